#!/usr/bin/env bash
# `nest topology validate` on bad files: exit status 2 and one exact line on stderr naming the
# file, line and key. Usage: topology_validate_errors.sh <nest> <source-dir>
set -u
nest="$1"
cd "$2/tests/cli/data/topo" || exit 1
failed=0

expect_error() {  # file, expected stderr line
  local err status
  err=$("$nest" topology validate "$1" 2>&1 >/dev/null)
  status=$?
  if [ "$status" -ne 2 ]; then
    echo "FAIL $1: exit status $status, expected 2"
    failed=1
  fi
  if [ "$err" != "$2" ]; then
    printf 'FAIL %s:\n  got:      %s\n  expected: %s\n' "$1" "$err" "$2"
    failed=1
  fi
}

bw_expected='expected a bandwidth like "400 GB/s" or "400 Gb/s" (B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, ..., b/s, Kb/s, Mb/s, Gb/s, Tb/s, Gbps)'

expect_error unknown_key.yaml \
  'nest topology: unknown_key.yaml:5: colour: unknown key "colour" (expected one of kind, name, description, dims, link_bandwidth, link_latency, collectives, nvlink_sharp)'
expect_error negative_bandwidth.yaml \
  "nest topology: negative_bandwidth.yaml:7: uplink_bandwidth: negative quantity (got \"-400 Gb/s\"; $bw_expected)"
expect_error missing_unit.yaml \
  "nest topology: missing_unit.yaml:3: link_bandwidth: missing unit (got \"400\"; $bw_expected)"
expect_error overflowing_bandwidth.yaml \
  "nest topology: overflowing_bandwidth.yaml:3: link_bandwidth: quantity out of range (got \"1e300 TB/s\"; $bw_expected)"
expect_error disconnected.yaml \
  'nest topology: disconnected.yaml:5: nodes[2]: graph is disconnected: node not reachable from gpu0 (got "gpu2"; expected a connected graph)'
expect_error unknown_node.yaml \
  'nest topology: unknown_node.yaml:8: links[1].b: unknown node (got "sw9"; expected a name listed under nodes)'
expect_error duplicate_name.yaml \
  'nest topology: duplicate_name.yaml:4: nodes[1].name: duplicate node name (got "gpu0"; expected names that are unique)'
expect_error lonely_device.yaml \
  'nest topology: lonely_device.yaml:5: nodes[2]: device has no link (got "gpu2"; expected every device on at least one link)'
expect_error zero_latency.yaml \
  'nest topology: zero_latency.yaml:4: link_latency: must be positive (got "0 us"; expected a duration > 0)'
expect_error odd_k.yaml \
  'nest topology: odd_k.yaml:2: k: out of range (got "5"; expected an even integer in [2, 1024])'
expect_error no_such_file.yaml \
  'nest topology: no_such_file.yaml: cannot open file: No such file or directory (expected a readable YAML file)'

exit $failed
