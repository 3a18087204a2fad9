#!/usr/bin/env bash
# `nest topology describe` and `validate` on the bundled topologies: exact figures.
# Usage: topology_describe.sh <nest> <source-dir>
set -u
nest="$1"
cd "$2/topologies" || exit 1
failed=0

expect_out() {  # expected stdout, then the command's arguments
  local expected="$1" out status
  shift
  out=$("$nest" topology "$@")
  status=$?
  if [ "$status" -ne 0 ] || [ "$out" != "$expected" ]; then
    printf 'FAIL topology %s (status %s):\n  got:      %s\n  expected: %s\n' "$*" "$status" \
      "$out" "$expected"
    failed=1
  fi
}

# k=16 fat-tree: 1024 hosts, 5*16^2/4 = 320 switches, 3*16^3/4 = 3072 cables; bisection = 512
# host links of 400 Gb/s = 512 * 5e10 B/s.
expect_out '{"name":"fat-tree-k16","kind":"fat_tree","devices":1024,"switches":320,"links":3072,"directed_links":6144,"diameter_hops":6,"injection_bytes_per_s":50000000000.0,"bisection_bytes_per_s":25600000000000.0,"bisection_method":"closed_form","domain_sizes":[8,64,1024]}' \
  describe fat_tree_k16.yaml --json
# Rail-optimized: 128 NVSwitches + 32 leaves + 32/16/8 spines; bisection = 512 NICs' worth at
# 1:1, half and a quarter of it when oversubscribed.
expect_out '{"name":"h100-rail-1024","kind":"rail_optimized","devices":1024,"switches":192,"links":3072,"directed_links":6144,"diameter_hops":4,"injection_bytes_per_s":500000000000.0,"bisection_bytes_per_s":25600000000000.0,"bisection_method":"closed_form","domain_sizes":[8,256,1024]}' \
  describe h100_rail_1024.yaml --json
expect_out '{"name":"h100-rail-1024-2to1","kind":"rail_optimized","devices":1024,"switches":176,"links":2560,"directed_links":5120,"diameter_hops":4,"injection_bytes_per_s":500000000000.0,"bisection_bytes_per_s":12800000000000.0,"bisection_method":"closed_form","domain_sizes":[8,256,1024]}' \
  describe h100_rail_1024_2to1.yaml --json
expect_out '{"name":"h100-rail-1024-4to1","kind":"rail_optimized","devices":1024,"switches":168,"links":2304,"directed_links":4608,"diameter_hops":4,"injection_bytes_per_s":500000000000.0,"bisection_bytes_per_s":6400000000000.0,"bisection_method":"closed_form","domain_sizes":[8,256,1024]}' \
  describe h100_rail_1024_4to1.yaml --json
# Torus 8x8x16: diameter 4+4+8; bisection cuts 64 rings of 16 twice: 128 * 50 GB/s.
expect_out '{"name":"tpuv4-torus-8x8x16","kind":"torus","devices":1024,"switches":0,"links":3072,"directed_links":6144,"diameter_hops":16,"injection_bytes_per_s":300000000000.0,"bisection_bytes_per_s":6400000000000.0,"bisection_method":"closed_form","domain_sizes":[8,64,1024]}' \
  describe tpuv4_torus_8x8x16.yaml --json
# NEST hierarchical: 16 level-2 subtrees per half, each min(400, 4 x 100) = 400 GB/s, and
# min(50, 4 x 12.5) = 50 GB/s.
expect_out '{"name":"nest-tpuv4-fattree","kind":"hierarchical","devices":1024,"switches":161,"links":1184,"directed_links":2368,"diameter_hops":6,"injection_bytes_per_s":900000000000.0,"bisection_bytes_per_s":6400000000000.0,"bisection_method":"closed_form","domain_sizes":[8,32,1024]}' \
  describe nest_tpuv4_fattree.yaml --json
expect_out '{"name":"nest-h100-spineleaf","kind":"hierarchical","devices":1024,"switches":161,"links":1184,"directed_links":2368,"diameter_hops":6,"injection_bytes_per_s":900000000000.0,"bisection_bytes_per_s":800000000000.0,"bisection_method":"closed_form","domain_sizes":[8,32,1024]}' \
  describe nest_h100_spineleaf.yaml --json
# Explicit: gpu0, gpu1 -> gpu2, gpu3 crosses box0's uplinks, 50 + 25 GB/s (max-flow).
expect_out 'topology:  small-explicit (explicit)
devices:   4
switches:  4
links:     8 cables (16 directed)
diameter:  4 hops
injection: 200 GB/s per device
bisection: 75 GB/s (max-flow)
domains:   2, 4' describe small_explicit.yaml
expect_out 'ok: small_explicit.yaml: small-explicit (explicit), 4 devices, 4 switches, 8 cables' \
  validate small_explicit.yaml

# --nodes: the node and link tables, as run files hold them under /topology. The asymmetric
# cable box0 -- core-b is cable 6: directed links 12 (25 GB/s) and 13 (12.5 GB/s back).
"$nest" topology describe small_explicit.yaml --nodes --json >"${TMPDIR:-/tmp}/nest_describe_$$.json"
/usr/bin/python3 - "${TMPDIR:-/tmp}/nest_describe_$$.json" <<'PY' || failed=1
import json, sys
d = json.load(open(sys.argv[1]))
t = d["topology"]
# Devices of an explicit file do not forward unless marked; switches always do.
want_nodes = [{"id": 0, "name": "gpu0", "kind": "device", "tier": 0, "forwards": False},
              {"id": 6, "name": "core-a", "kind": "switch", "tier": 2, "forwards": True}]
got = [t["nodes"][0], t["nodes"][6]]
errors = []
if len(t["nodes"]) != 8 or got != want_nodes:
    errors.append(f"nodes: {len(t['nodes'])} rows, {got}")
want_links = [{"src": 4, "dst": 7, "bandwidth_bytes_per_s": 25e9, "latency_s": 2e-6},
              {"src": 7, "dst": 4, "bandwidth_bytes_per_s": 12.5e9, "latency_s": 2e-6}]
if len(t["links"]) != 16 or t["links"][12:14] != want_links:
    errors.append(f"links: {len(t['links'])} rows, {t['links'][12:14]}")
if list(d)[-1] != "topology" or d["links"] != 8:
    errors.append(f"keys {list(d)}")
for e in errors:
    print("FAIL topology describe --nodes --json:", e)
sys.exit(1 if errors else 0)
PY
rm -f "${TMPDIR:-/tmp}/nest_describe_$$.json"
out=$("$nest" topology describe small_explicit.yaml --nodes | sed -n '10,11p;20p;34p')
expected='  node  name                     kind    tier  forwards
     0  gpu0                     device     0  no
  link  from                     to                          bandwidth    latency
    13  core-b                   box0                        12.5 GB/s       2 us'
if [ "$out" != "$expected" ]; then
  printf 'FAIL topology describe --nodes:\n%s\nexpected:\n%s\n' "$out" "$expected"
  failed=1
fi

# An unknown subcommand is an input error.
err=$("$nest" topology draw x.yaml 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 2 ] || [ "$err" != 'nest topology: topology: unknown or missing subcommand (got "draw"; expected describe, validate or import)' ]; then
  echo "FAIL topology draw: status $status: $err"
  failed=1
fi

exit $failed
