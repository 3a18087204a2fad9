#!/usr/bin/env bash
# `nest topology import`: ASTRA-sim's published analytical network configs become NEST files
# (kind: dimensions) that load and run a collective; bad configs exit 2 with one line and write
# nothing. Usage: topology_import.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
astra="$src/tests/validation/reference/astra_sim"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }

for f in "$astra"/*.yml; do
  name=$(basename "$f" .yml)
  [ "$name" = dgx_v100_8gpu ] && continue  # its rates are "tbd"
  out="$work/$name.yaml"
  "$nest" topology import "$f" -o "$out" >/dev/null || fail "import $name: exit $?"
  "$nest" topology validate "$out" >/dev/null || fail "validate $name: exit $?"
done

# The written file is the one standard output shows, with NEST's units.
"$nest" topology import "$astra/Ring_FullyConnected_Switch.yml" >"$work/stdout.yaml" || fail "stdout"
cmp -s "$work/stdout.yaml" "$work/Ring_FullyConnected_Switch.yaml" || fail "stdout differs from -o"
grep -qx 'bandwidth: \["200 GiB/s", "100 GiB/s", "50 GiB/s"\]' "$work/stdout.yaml" ||
  fail "bandwidth line: $(grep bandwidth "$work/stdout.yaml")"

# Without --algorithm, a dimensions topology runs hierarchical with each dimension's algorithm:
# direct on FullyConnected. 64 MiB: 25.1 us latency + 507.8125 us bandwidth (closed form in
# tests/unit/coll/dimensions_test.cc).
json=$("$nest" collective --topology "$work/Ring_FullyConnected_Switch.yaml" --op allreduce \
  --size 64MiB --json) || fail "collective: exit $?"
echo "$json" | python3 -c '
import json, sys
j = json.load(sys.stdin)
assert j["algorithm"] == "hierarchical", j["algorithm"]
assert j["levels"] == [2, 8, 4], j["levels"]
assert j["level_algorithms"] == ["ring", "direct", "ring"], j["level_algorithms"]
assert abs(j["simulated_s"] - 532.9125e-6) < 1e-10, j["simulated_s"]
' || fail "collective JSON: $json"
text=$("$nest" collective --topology "$work/Ring_FullyConnected_Switch.yaml" --op allreduce \
  --size 64MiB --level-algorithms ring,ring,ring | head -1)
[ "$text" = "collective:  allreduce hierarchical 2x8x4 (ring, ring, ring), 64 ranks (0-63), 64 MiB" ] ||
  fail "text: $text"

expect_error() {  # expected stderr line, then the command's arguments
  local expected="$1" err status
  shift
  err=$("$nest" "$@" 2>&1 >/dev/null)
  status=$?
  [ "$status" -eq 2 ] || fail "$*: exit status $status, expected 2"
  [ "$err" = "$expected" ] || printf 'FAIL %s:\n  got:      %s\n  expected: %s\n' "$*" "$err" "$expected"
  [ "$err" = "$expected" ] || failed=1
}

printf 'topology: [ Ring, Torus ]\nnpus_count: [ 2, 2 ]\nbandwidth: [ 1, 1 ]\nlatency: [ 1, 1 ]\n' >"$work/kind.yml"
expect_error "nest topology: $work/kind.yml:1: topology[1]: unknown value (got \"Torus\"; expected one of Ring, FullyConnected, Switch)" \
  topology import "$work/kind.yml" -o "$work/kind.out"
printf 'topology: [ Ring ]\nnpus_count: [ 2, 4 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n' >"$work/npus.yml"
expect_error "nest topology: $work/npus.yml:2: npus_count: wrong length (got \"2 entries\"; expected 1 entries, one per dimension of topology)" \
  topology import "$work/npus.yml" -o "$work/npus.out"
printf 'topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1, 2 ]\nlatency: [ 1 ]\n' >"$work/bw.yml"
expect_error "nest topology: $work/bw.yml:3: bandwidth: wrong length (got \"2 entries\"; expected 1 entries, one per dimension of topology)" \
  topology import "$work/bw.yml" -o "$work/bw.out"
printf 'topology: [ Ring ]\nnpus_count: [ 4 ]\nbandwidth: [ 1 ]\nlatency: [ ]\n' >"$work/lat.yml"
expect_error "nest topology: $work/lat.yml:4: latency: wrong length (got \"0 entries\"; expected 1 entries, one per dimension of topology)" \
  topology import "$work/lat.yml" -o "$work/lat.out"
expect_error "nest topology: $astra/dgx_v100_8gpu.yml:11: bandwidth[0]: not a number (got \"tbd\"; expected a number > 0 (GB/s, ASTRA-sim's unit))" \
  topology import "$astra/dgx_v100_8gpu.yml" -o "$work/dgx.out"
# Too large for the memory limit: refused before anything is written.
printf 'topology: [ FullyConnected ]\nnpus_count: [ 60000 ]\nbandwidth: [ 1 ]\nlatency: [ 1 ]\n' >"$work/big.yml"
"$nest" topology import "$work/big.yml" -o "$work/big.out" --max-memory 1GiB >/dev/null 2>&1
[ $? -eq 2 ] || fail "big: expected exit 2"
for o in kind npus bw lat dgx big; do
  [ -e "$work/$o.out" ] && fail "$o: output written"
done
ls "$work" | grep -q nest-tmp && fail "temporary left behind"

# A NEST file of kind dimensions needs units like every NEST topology file.
printf 'kind: dimensions\ntopology: [Ring]\nnpus_count: [4]\nbandwidth: [50]\nlatency: ["1 us"]\n' >"$work/units.yaml"
expect_error "nest topology: $work/units.yaml:4: bandwidth[0]: missing unit (got \"50\"; expected a bandwidth like \"400 GB/s\" or \"400 Gb/s\" (B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, ..., b/s, Kb/s, Mb/s, Gb/s, Tb/s, Gbps))" \
  topology validate "$work/units.yaml"
expect_error "nest collective: --level-algorithms: unknown level algorithm (got \"mesh\"; expected ring, direct, halving_doubling or double_binary_tree, comma-separated, e.g. ring,direct,ring)" \
  collective --topology "$work/Ring_FullyConnected_Switch.yaml" --op allreduce --size 1MiB --level-algorithms ring,mesh,ring

exit $failed
