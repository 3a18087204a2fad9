#!/usr/bin/env bash
# `nest sweep` with malformed studies and bad options: exit status 2 and one exact line on
# stderr, before any work (no results folder appears). Usage: sweep_errors.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0

# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"
expect_error() {  # expected stderr line, then the arguments after `nest sweep`
  local expected="$1"
  shift
  expect_failure "$expected" "$nest" sweep "$@"
}

# A study with one mistake at the end (line 18 and after).
study() {
  {
    rail_study_head "$src"
    printf '%s\n' "$1"
  } >"$tmp/s.yaml"
}

study 'sweep: {product: {devices: [16], topology.k: [4]}}'
expect_error "nest sweep: $tmp/s.yaml:18: sweep.product.topology.k: not a parameter of rail_optimized topology \"rail\" (expected one of nodes, gpus_per_node, nodes_per_leaf, spines, nvlink_bandwidth, nvlink_latency, nic_bandwidth, nic_latency, spine_bandwidth, spine_latency)" \
  "$tmp/s.yaml" --output "$tmp/out"
study 'sweep: {product: {devices: [16], bandwidth: [1 GB/s]}}'
expect_error "nest sweep: $tmp/s.yaml:18: sweep.product.bandwidth[0]: unknown axis \"bandwidth\" (got \"1 GB/s\"; expected one of topology, workload, devices, rules, replay, spine_oversubscription, seed, topology.<parameter>, tp, pp, dp, vp, zero, recompute, order)" \
  "$tmp/s.yaml" --output "$tmp/out"
study 'sweep: {points: [{devices: 16, workload: gpt}]}'
expect_error "nest sweep: $tmp/s.yaml:18: sweep.points[0].workload: unknown name (got \"gpt\"; expected one of llama)" \
  "$tmp/s.yaml" --output "$tmp/out"
study 'placer: {baseline: [manual]}
sweep: {points: [{devices: 16}]}'
expect_error "nest sweep: $tmp/s.yaml:18: placer.baseline: unknown key \"baseline\" (expected one of baselines, orders, zero_stages, recompute, max_stages, verify)" \
  "$tmp/s.yaml" --output "$tmp/out"
study 'sweep: {points: [{devices: 16}]}
defaults: {replay: maybe}'
expect_error "nest sweep: $tmp/s.yaml:19: defaults.replay: not a boolean (got \"maybe\"; expected true or false)" \
  "$tmp/s.yaml" --output "$tmp/out"
study 'sweep: {points: [{devices: 16}]}'
sed -i 's/llama2-7b.yaml/llama2-8b.yaml/' "$tmp/s.yaml"
expect_error "nest sweep: $tmp/s.yaml:16: workloads.llama.model: no such file (got \"$src/workloads/models/llama2-8b.yaml\"; expected a readable file (paths are relative to the study file) or a bundled name)" \
  "$tmp/s.yaml" --output "$tmp/out"
expect_error "nest sweep: $tmp/none.yaml: cannot open file: No such file or directory (expected a readable study file)" \
  "$tmp/none.yaml" --output "$tmp/out"
[ -e "$tmp/out" ] && { echo "FAIL a malformed study created the output folder"; failed=1; }

study 'sweep: {points: [{devices: 16}]}'
expect_error "nest sweep: --resume: --resume and --force exclude each other (expected one of them)" \
  "$tmp/s.yaml" --output "$tmp/out" --resume --force
expect_error "nest sweep: --progress: unknown progress mode (got \"sometimes\"; expected auto, always or never)" \
  "$tmp/s.yaml" --output "$tmp/out" --progress sometimes
expect_error "nest sweep: --threads: thread count out of range (got \"0\"; expected an integer in [1, 1024])" \
  "$tmp/s.yaml" --output "$tmp/out" --threads 0
# 40,000 threads aborted in the pool's constructor (SIGABRT) before the range.
expect_error "nest sweep: --threads: thread count out of range (got \"40000\"; expected an integer in [1, 1024])" \
  "$tmp/s.yaml" --output "$tmp/out" --threads 40000
"$nest" sweep "$tmp/s.yaml" --output "$tmp/out" >/dev/null || { echo "FAIL a good study"; failed=1; }
expect_error "nest sweep: --output: the output folder already holds results (got \"$tmp/out\"; expected --resume to continue them or --force to start over)" \
  "$tmp/s.yaml" --output "$tmp/out"
exit $failed
