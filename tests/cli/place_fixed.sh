#!/usr/bin/env bash
# `nest place` with dimensions fixed on the command line (--tp --pp --dp --cp --ep --vp --mb
# --zero --recompute --sp --order --partition --ignore-memory): a fixed plan gets the full
# breakdown; an impossible combination gets one exact line naming the flag and what was
# expected (exit 2); a plan over memory says which stage exceeds it by how much, writes nothing,
# and --ignore-memory prices it anyway (the replay then refuses it). The plan file records what
# was fixed. Usage: place_fixed.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"
job=(--model llama2-7b --accelerator h100 --topology h100_rail_64 --baselines none)
expect_error() {  # expected stderr line, then the flags after the job
  local expected="$1"
  shift
  expect_failure "$expected" "$nest" place "${job[@]}" "$@" -o "$tmp/never.yaml"
  [ ! -e "$tmp/never.yaml" ] || { fail "$* wrote a plan file"; rm -f "$tmp/never.yaml"; }
}

# Every dimension fixed: one plan, its breakdown, and the plan file records the fixed flags.
fixed=(--tp 8 --pp 2 --dp 4 --mb 1 --zero 1 --recompute selective --sp on --order tp-pp-dp
  --vp 1 --cp 1)
"$nest" place "${job[@]}" "${fixed[@]}" -o "$tmp/fixed.yaml" >"$tmp/fixed.out" 2>&1 ||
  fail "fixed plan: $(cat "$tmp/fixed.out")"
grep -qx 'plan: tensor 8 (sequence parallel), expert 1, context 1, micro-batch 1 | pipeline 2 stages | data parallel 4 | ZeRO-1 | recompute selective | order tp-pp-dp' \
  "$tmp/fixed.out" || fail "fixed plan: $(sed -n 2p "$tmp/fixed.out")"
grep -q '^iteration time: .* (compute .*, bubble .*, TP/EP collectives .*, pipeline transfers .*, data-parallel sync .*, optimizer .*)$' \
  "$tmp/fixed.out" || fail "no breakdown: $(sed -n 4p "$tmp/fixed.out")"
grep -q '^memory: ' "$tmp/fixed.out" && fail "a plan that fits says it does not"
grep -q '^  search: {stages: \[2\], data_parallel: \[4\], virtual_stages: \[1\], zero_stages: \[1\], recompute: \[selective\], orders: \[tp-pp-dp\], max_stages: 0, uniform_partition: false, ignore_memory: false, gradient_buckets: 4, overlap_gradient_sync: true, overlap_boundary_transfers: true}$' \
  "$tmp/fixed.yaml" || fail "plan file search: $(grep '  search:' "$tmp/fixed.yaml")"
grep -q '^  candidates: {tensor_parallel: \[8\], expert_parallel: \[\], context_parallel: \[1\], micro_batches: \[1\], max_tensor_parallel: 8, max_expert_parallel: 8, sequence_parallel: true}$' \
  "$tmp/fixed.yaml" || fail "plan file candidates: $(grep '  candidates:' "$tmp/fixed.yaml")"
"$nest" simulate --plan "$tmp/fixed.yaml" -o "$tmp/fixed.h5" >/dev/null 2>"$tmp/sim.err" ||
  fail "simulate the fixed plan: $(cat "$tmp/sim.err")"

# Over memory: no recomputation, no sharding, one device per replica.
over=(--tp 1 --pp 1 --dp 64 --mb 1 --zero 0 --recompute none)
expect_error 'nest place: the plan does not fit memory: stage 0 needs 181 GiB per device, 101 GiB more than the 80 GiB of device memory (--ignore-memory prices it anyway)' \
  "${over[@]}"
"$nest" place "${job[@]}" "${over[@]}" --ignore-memory -o "$tmp/over.yaml" >"$tmp/over.out" 2>&1 ||
  fail "--ignore-memory: $(cat "$tmp/over.out")"
grep -qx 'memory: does not fit: stage 0 needs 181 GiB per device, 101 GiB more than the 80 GiB of device memory (priced with --ignore-memory)' \
  "$tmp/over.out" || fail "--ignore-memory report: $(cat "$tmp/over.out")"
grep -q '^iteration time: ' "$tmp/over.out" || fail "--ignore-memory: no iteration time"
grep -q 'ignore_memory: true' "$tmp/over.yaml" || fail "--ignore-memory not in the plan file"
expect_failure "nest simulate: $tmp/over.yaml: partition[0]: stage 0 needs 181 GiB per device, more than the 80 GiB of memory" \
  "$nest" simulate --plan "$tmp/over.yaml" -o "$tmp/over.h5"

# Impossible combinations.
expect_error 'nest place: --tp: attention heads not divisible by the tensor-parallel degree (got "3"; expected a divisor of 32 (heads))' \
  --tp 3
expect_error 'nest place: --cp: sequence length not divisible by the context-parallel degree (got "3"; expected a divisor of 4096 (sequence length))' \
  --cp 3
expect_error 'nest place: --ep: expert parallelism on a model without experts (got "2"; expected 1 for a dense model)' \
  --ep 2
expect_error 'nest place: --pp: a pipeline of 40 stages needs at least 40 layers, the model has 34 (got "40"; expected 1..34 stages)' \
  --pp 40
expect_error 'nest place: --dp: 8 devices per stage replica x 4 stages x 4 replicas = 128 devices, more than the 64 of the job (got "4"; expected at most 2 replicas)' \
  --tp 8 --pp 4 --dp 4
expect_error 'nest place: --pp: 8 devices per stage replica x 16 stages x 1 replica = 128 devices, more than the 64 of the job (got "16"; expected at most 8 stages)' \
  --tp 8 --pp 16
expect_error 'nest place: --vp: interleaved 1F1B needs equal blocks per chunk: 4 stages x 3 virtual stages = 12 chunks do not divide the 32 transformer blocks (got "3"; expected 1 or 2, 4, 8)' \
  --tp 8 --pp 4 --vp 3
expect_error 'nest place: --vp: interleaved 1F1B needs at least 2 stages (got "2"; expected 1 with a single stage)' \
  --tp 8 --pp 1 --vp 2
expect_error 'nest place: --partition: the uniform split needs the stages to divide the 32 transformer blocks (got "3 stages"; expected a number of stages dividing 32, or the balanced split)' \
  --tp 8 --pp 3 --partition uniform
expect_error 'nest place: --mb: give --mb or --micro-batches, not both' --mb 2 --micro-batches 1,2
expect_error 'nest place: --order: give --order or --orders, not both' --order tp-dp-pp --orders tp-pp-dp
expect_error 'nest place: --order: unknown placement order (got "foo"; expected one of tp-pp-dp tp-dp-pp pp-tp-dp pp-dp-tp dp-tp-pp dp-pp-tp)' \
  --order foo
expect_error 'nest place: --order: one placement order (got "tp-dp-pp,tp-pp-dp"; expected one order such as tp-dp-pp (a list goes to --orders))' \
  --order tp-dp-pp,tp-pp-dp
expect_error 'nest place: --tp: out of range (got "0"; expected an integer in 1..1048576)' --tp 0
expect_error 'nest place: --zero: out of range (got "4"; expected an integer in 0..3)' --zero 4
expect_error 'nest place: --sp: not on or off (got "maybe"; expected on or off)' --sp maybe
expect_error 'nest place: --recompute: unknown recomputation mode (got "some"; expected none, selective or full)' \
  --recompute some
expect_error 'nest place: --partition: unknown partition (got "x"; expected balanced or uniform)' \
  --partition x
expect_error 'nest place: --tp-overlap: not on or off (got "x"; expected on or off)' --tp-overlap x
expect_error 'nest place: --grad-overlap: not on or off (got "x"; expected on or off)' --grad-overlap x
expect_error 'nest place: --p2p-overlap: not on or off (got "x"; expected on or off)' --p2p-overlap x
expect_error 'nest place: --grad-buckets: bucket count out of range (got "0"; expected an integer in 1..65536)' \
  --grad-buckets 0
expect_error 'nest place: --grad-buckets: bucket count out of range (got "65537"; expected an integer in 1..65536)' \
  --grad-buckets 65537
expect_error 'nest place: --grad-accumulation-bytes: gradient accumulation bytes out of range (got "-1"; expected bytes per parameter and microbatch in 0..1048576)' \
  --grad-accumulation-bytes -1
# 10^14 bytes per parameter: the block's 2e8 parameters times them overflow 64 bits.
expect_error 'nest place: --grad-accumulation-bytes: gradient accumulation bytes out of range (got "100000000000000"; expected bytes per parameter and microbatch in 0..1048576)' \
  --grad-accumulation-bytes 100000000000000
expect_error 'nest place: --dp: out of range (got "0"; expected an integer in 1..1048576)' --dp 0
# A layer profile: --tp selects among its variants.
expect_failure 'nest place: --tp: the layer profile has no variant of the fixed degrees (got "3"; expected one of the profile'"'"'s variants: t=4, t=8)' \
  "$nest" place --profile gpt3-175b-h100 --rules nest-artifact --devices 128 --baselines none --tp 3
"$nest" place --profile gpt3-175b-h100 --rules nest-artifact --devices 128 --baselines none \
  --tp 8 >"$tmp/profile.out" 2>&1 || fail "profile --tp 8: $(cat "$tmp/profile.out")"
grep -q '^plan: tensor 8' "$tmp/profile.out" || fail "profile --tp 8: $(sed -n 2p "$tmp/profile.out")"
exit $failed
