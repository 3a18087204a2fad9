#!/usr/bin/env bash
# Hardening of the inputs (issue 17, defects 3, 4, 6 and 7): each case used to read without
# end, run out of memory, print wrong numbers with status 0, echo a file or an escape sequence,
# or fail as an internal error (status 1). Now each is one line on stderr with status 2.
# Every command runs under `timeout` and a 4 GiB address-space limit, so that a regression
# fails the test instead of hanging or exhausting the machine.
# Usage: input_limits.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failed=0
source "$src/tests/cli/lib/common.sh"

# Under a sanitizer the address space is the shadow's: no limit there.
limit_memory() { [ -n "${NEST_SANITIZED:-}" ] || ulimit -v 4194304; }
run() { (limit_memory; exec timeout 60 "$nest" "$@"); }

# expect_prefix PREFIX COMMAND...: status 2 and a stderr line that starts with PREFIX.
expect_prefix() {
  local prefix="$1" err status
  shift
  err=$("$@" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ] || [ "${err#"$prefix"}" = "$err" ] || [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ]; then
    printf 'FAIL %s:\n  status %s\n  got:      %s\n  expected: %s...\n' "$*" "$status" "$err" "$prefix"
    failed=1
  fi
}

bw='400 Gb/s'
torus() { printf 'kind: torus\ndims: [4]\nlink_bandwidth: %s\nlink_latency: 1 us\n' "$bw"; }

# --- Non-regular files and sizes (defect 4) ---
expect_failure 'nest topology: /dev/zero: not a regular file but a character device (expected a readable YAML file)' \
  run topology validate /dev/zero
mkfifo fifo.yaml
expect_failure 'nest topology: fifo.yaml: not a regular file but a FIFO (expected a readable YAML file)' \
  run topology describe fifo.yaml
expect_failure 'nest simulate: /dev/zero: not a regular file but a character device (expected a readable plan file)' \
  run simulate --plan /dev/zero -o run.h5
expect_failure 'nest sweep: /dev/zero: not a regular file but a character device (expected a readable study file)' \
  run sweep /dev/zero --output out
truncate -s 65M sparse.yaml
expect_failure 'nest topology: sparse.yaml: file too large (got "68157440 bytes"; expected at most 67108864 bytes (64 MiB; --max-input-size raises the limit))' \
  run topology validate sparse.yaml
torus > torus.yaml
expect_failure 'nest topology: torus.yaml: file too large (got "66 bytes"; expected at most 64 bytes (64 B; --max-input-size raises the limit))' \
  run topology validate torus.yaml --max-input-size 64B
expect_failure 'nest topology: --max-input-size: missing unit (got "64"; expected a size like "80 GiB" (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB; b, Kb, Mb, Gb for bits))' \
  run topology validate torus.yaml --max-input-size 64

# --- Topologies too large to build (defect 4): refused before building, naming the count ---
cat > spine_leaf.yaml <<YAML
kind: spine_leaf
leaves: 8192
spines: 8192
hosts_per_leaf: 2
host_bandwidth: 400 Gb/s
host_latency: 1 us
uplink_bandwidth: 400 Gb/s
uplink_latency: 1 us
YAML
expect_failure 'nest topology: spine_leaf.yaml:3: spines: topology too large for the memory limit (got "67,125,248 cables and 32,768 nodes: an estimated 8.007 GiB"; expected at most 1 GiB (--max-memory raises the limit))' \
  run topology describe spine_leaf.yaml --max-memory 1GiB
expect_failure 'nest collective: spine_leaf.yaml:3: spines: topology too large for the memory limit (got "67,125,248 cables and 32,768 nodes: an estimated 8.007 GiB"; expected at most 512 MiB (--max-memory raises the limit))' \
  run collective --topology spine_leaf.yaml --op allreduce --size 1MiB --max-memory 512MiB
cat > rail.yaml <<YAML
kind: rail_optimized
nodes: 67108864
gpus_per_node: 64
nodes_per_leaf: 1
spines: 1
nvlink_bandwidth: 450 GB/s
nvlink_latency: 0.5 us
nic_bandwidth: 400 Gb/s
nic_latency: 1 us
spine_bandwidth: 400 Gb/s
spine_latency: 1 us
YAML
# 2^32 devices: the device count truncated to 0 in 32 bits and passed the node limit.
expect_failure 'nest topology: rail.yaml:2: nodes: too many nodes (got "12,884,901,888 cables and 8,657,043,457 nodes"; expected at most 67,108,864 nodes)' \
  run topology validate rail.yaml

# --- Unclear errors (defect 7) ---
{ torus; echo 'dims: [8]'; } > dup.yaml
expect_failure 'nest topology: dup.yaml:5: dims: duplicate key "dims" (expected each key once in a map)' \
  run topology validate dup.yaml
{ torus; echo '---'; torus; } > two.yaml
expect_failure 'nest topology: two.yaml:5: a second YAML document (expected one document per file)' \
  run topology validate two.yaml
{ torus | head -3; printf 'link_latency: %s1 us%s\n' "$(printf '[%.0s' {1..3000})" "$(printf ']%.0s' {1..3000})"; } > deep.yaml
expect_failure 'nest topology: deep.yaml:4: nesting too deep (expected at most 32 levels of maps and lists)' \
  run topology validate deep.yaml
torus > "$(printf 'bad\xff').yaml"
expect_failure 'nest topology: bad\xff.yaml: name: topology name is not UTF-8 (got "bad\xff"; expected a name: key, or a UTF-8 file name)' \
  run topology describe "$(printf 'bad\xff').yaml" --json
long=$(printf 'a%.0s' {1..5000})
expect_failure "nest topology: file: path too long (got 5000 bytes beginning \"$(printf 'a%.0s' {1..256})...\"; expected a path of at most 4095 bytes)" \
  run topology validate "$long"
expect_failure "nest collective: --topology: path too long (got 5000 bytes beginning \"$(printf 'a%.0s' {1..256})...\"; expected a path of at most 4095 bytes)" \
  run collective --topology "$long" --op allreduce --size 1MiB

# --- Values shown escaped and short, files never echoed (defect 6) ---
printf 'kind: "\\e[2J\\e[Hall is well"\n' > escape.yaml
expect_failure 'nest topology: escape.yaml:1: kind: unknown value (got "\x1b[2J\x1b[Hall is well"; expected one of fat_tree, spine_leaf, torus, rail_optimized, hierarchical, dragonfly, explicit, dimensions)' \
  run topology validate escape.yaml
{ printf 'kind: '; head -c 10485760 /dev/zero | tr '\0' x; echo; } > huge_value.yaml
expect_failure "nest topology: huge_value.yaml:1: kind: unknown value (got 10485760 bytes beginning \"$(printf 'x%.0s' {1..256})...\"; expected one of fat_tree, spine_leaf, torus, rail_optimized, hierarchical, dragonfly, explicit, dimensions)" \
  run topology validate huge_value.yaml
printf 'root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n' > passwd
expect_failure "nest place: $tmp/passwd:1: (document): expected a map (expected a map with keys kind, model, accelerator, sequence_length, micro_batch, global_batch, time_unit, hbm, activation_recomputation, total_parameters, peak_flop_rate, variants)" \
  run place --profile "$tmp/passwd" --devices 8

# --- Wrong numbers with status 0 (defect 3) ---
m="$src/workloads/models"
a="$src/workloads/accelerators"
sed 's/^hidden: .*/hidden: 4294967296/' "$m/gpt3-175b.yaml" > hidden.yaml
expect_failure 'nest profile: hidden.yaml:10: hidden: out of range (got "4294967296"; expected an integer in [1, 1048576])' \
  run profile --model hidden.yaml --accelerator h100
sed 's/^layers: .*/layers: 4294967296/' "$m/gpt3-175b.yaml" > layers.yaml
expect_failure 'nest profile: layers.yaml:9: layers: out of range (got "4294967296"; expected an integer in [1, 4096])' \
  run profile --model layers.yaml --accelerator h100
expect_failure 'nest profile: --seq: out of range (got "4294967296"; expected an integer in [1, 16777216] (0: the model'"'"'s))' \
  run profile --model llama2-7b --accelerator h100 --seq 4294967296
sed 's/gemm: .*/gemm: 1e-300/' "$a/h100-sxm.yaml" > efficiency.yaml
expect_failure 'nest place: efficiency.yaml:22: efficiency.gemm: out of range (got "1e-300"; expected a number in [0.001, 1])' \
  run place --model gpt3-175b --accelerator efficiency.yaml --devices 64 --network zero
sed 's/^  bf16: .*/  bf16: 1e-300 FLOP\/s/' "$a/h100-sxm.yaml" > peak.yaml
expect_failure 'nest place: peak.yaml:14: peak_flop_rate.bf16: out of range (got "1e-300 FLOP/s"; expected a compute rate in [1e6 FLOP/s, 1e21 FLOP/s])' \
  run place --model gpt3-175b --accelerator peak.yaml --devices 64 --network zero
# (without its collective model, whose files are beside the bundled topology)
sed -E -e 's/(bandwidth: ).*/\11 b\/s/' -e '/^collectives:/d' -e '/^nvlink_sharp:/d' \
  "$src/topologies/h100_rail_1024.yaml" > slow.yaml
expect_failure 'nest place: duration out of range (got "1.34e+08 s"; expected a transfer or computation within 2^62 ps (4.6e6 s, 53 days): smaller sizes or faster rates)' \
  run place --model llama2-7b --accelerator h100 --topology slow.yaml --devices 16
sed 's/: 1 b\/s/: 1 Kb\/s/' slow.yaml > slow_flat.yaml
expect_failure 'nest place: duration out of range (got "9e+07 s"; expected a transfer or computation within 2^62 ps (4.6e6 s, 53 days): smaller sizes or faster rates)' \
  run place --model llama2-7b --accelerator h100 --topology slow_flat.yaml --devices 16 --network flat
# A billion gradient buckets per stage.
run place --model llama2-7b --accelerator h100 --topology "$src/topologies/h100_rail_1024.yaml" \
  --devices 16 --baselines none -o plan.yaml >/dev/null || { echo "FAIL: place for the bucket case"; failed=1; }
expect_failure 'nest simulate: --buckets: bucket count out of range (got "1000000000"; expected an integer in [1, 65536])' \
  run simulate --plan plan.yaml -o run.h5 --buckets 1000000000
[ -e run.h5 ] && { echo "FAIL: a refused simulate left run.h5"; failed=1; }

exit $failed
