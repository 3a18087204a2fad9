#!/usr/bin/env bash
# `nest place` when nothing fits or the options are wrong: exit status 2 and one exact line on
# stderr. Usage: place_errors.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
profile="$src/workloads/profiles/gpt3-175b-h100.yaml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"
expect_error() {  # expected stderr line, then the arguments after `nest place`
  local expected="$1"
  shift
  expect_failure "$expected" "$nest" place "$@"
}

# Too few devices: GPT-3 under the artifact rules needs 8 stages of 4 (tensor parallel 4).
expect_error 'nest place: nothing fits on 16 devices: the smallest pipeline that fits memory needs 8 stages of 4 devices (tensor parallel 4, recomputation full) = 32 devices' \
  --profile "$profile" --rules nest-artifact --devices 16

# Too little memory: the same profile with 4 GiB per device. The smallest stage is one
# transformer block at tensor parallel 8, alone at the last position: 2 · 453202944 B of weights
# and gradients + 3281179702 B of activations = 4187585590 B.
sed 's/^hbm: 90 GiB$/hbm: 3 GiB/' "$profile" > "$tmp/small.yaml"
expect_error "nest place: nothing fits: the smallest stage (layer 1 'transformer_block' alone, tensor parallel 8, ZeRO-0 over 1 replica, recomputation none) needs 3.9 GiB per device against a capacity of 3 GiB" \
  --profile "$tmp/small.yaml" --rules nest-artifact --devices 128

expect_error 'nest place: --profile: give either a layer profile, or a model with an accelerator (expected a profile file or name, or model + accelerator)' \
  --devices 8
expect_error 'nest place: --rules: unknown memory rules (got "adam"; expected megatron or nest-artifact)' \
  --profile "$profile" --rules adam --devices 8
expect_error 'nest place: --network: unknown network model (got "wifi"; expected oracle, flat or zero)' \
  --profile "$profile" --network wifi --devices 8
expect_error 'nest place: --baselines: unknown baseline (got "oracle"; expected manual, topology-agnostic or anneal (or all, none))' \
  --profile "$profile" --rules nest-artifact --devices 128 --baselines manual,oracle
expect_error 'nest place: --devices: a device count is needed without a topology (expected a positive integer)' \
  --profile "$profile" --rules nest-artifact
# --verify K: candidates replayed, 0..64, and a replay needs a topology.
expect_error 'nest place: --verify: candidates to verify out of range (got "-1"; expected an integer in 0..64)' \
  --profile "$profile" --topology h100_rail_64 --verify -1
expect_error 'nest place: --verify: candidates to verify out of range (got "65"; expected an integer in 0..64)' \
  --profile "$profile" --topology h100_rail_64 --verify 65
expect_error 'nest place: --verify: not an integer (got "x"; expected an integer)' \
  --profile "$profile" --topology h100_rail_64 --verify x
# --threads N: 1..64.
expect_error 'nest place: --threads: threads out of range (got "0"; expected an integer in 1..64)' \
  --profile "$profile" --topology h100_rail_64 --threads 0
expect_error 'nest place: --threads: threads out of range (got "65"; expected an integer in 1..64)' \
  --profile "$profile" --topology h100_rail_64 --threads 65
expect_error 'nest place: --verify: verifying by replay needs a topology (got "2"; expected 0 without a topology)' \
  --profile "$profile" --rules nest-artifact --devices 128 --verify 2
exit $failed
