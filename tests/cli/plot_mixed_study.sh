#!/usr/bin/env bash
# The plot scripts on a mixed study (rail-optimized and torus points, different parameters per
# topology): plot_sweep.py draws every ok row exactly once, never puts two distinct points on one
# line, warns about the rows its x axis cannot place, handles a categorical x (--x topology) and
# writes a topology column into summary.md; plot_timeline.py and plot_memory.py draw a torus run.
# Usage: plot_mixed_study.sh <nest> <source-dir>
set -u
nest=$1
src=$2
cd "$src" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }

cat >"$tmp/mixed.yaml" <<YAML
kind: study
name: mixed
topologies:
  rail:
    kind: rail_optimized
    gpus_per_node: 8
    nodes_per_leaf: 2
    spines: 2
    nvlink_bandwidth: 450 GB/s
    nvlink_latency: 0.5 us
    nic_bandwidth: 50 GB/s
    nic_latency: 1 us
    spine_bandwidth: 50 GB/s
    spine_latency: 1 us
  torus:
    kind: torus
    dims: [4, 4]
    link_bandwidth: 50 GB/s
    link_latency: 1 us
workloads:
  llama:
    model: $src/workloads/models/llama2-7b.yaml
    accelerator: $src/workloads/accelerators/h100-sxm.yaml
    micro_batches: [1]
placer: {baselines: [manual]}
sweep:
  points:
    - {topology: rail, devices: 16, topology.nic_bandwidth: 12.5 GB/s}
    - {topology: rail, devices: 16, topology.nic_bandwidth: 50 GB/s}
    - {topology: rail, devices: 16, topology.nic_bandwidth: 50 GB/s, spine_oversubscription: 4}
    - {topology: torus, devices: 16}
    - {topology: torus, devices: 16, topology.link_bandwidth: 25 GB/s}
    - {topology: rail, devices: 16, topology.nic_bandwidth: 12.5 GB/s, seed: 1}
    - {topology: rail, devices: 16, topology.nvlink_bandwidth: 0 GB/s}
YAML
"$nest" sweep "$tmp/mixed.yaml" --output "$tmp/out" --progress never >"$tmp/sweep.out" 2>&1 ||
  fail "nest sweep: $(cat "$tmp/sweep.out")"

plot() {  # name, then plot_sweep.py's options
  local name=$1
  shift
  /usr/bin/python3 scripts/plot_sweep.py "$tmp/out" --out "$tmp/$name" --dump "$tmp/$name.json" \
    "$@" >"$tmp/$name.out" 2>"$tmp/$name.err" || fail "plot_sweep.py $*: $(cat "$tmp/$name.err")"
  for f in throughput speedup; do
    [[ "$(head -c 4 "$tmp/$name/$f.png" | tail -c 3)" == "PNG" ]] || fail "$name: no $f.png"
  done
}
plot rail        # the default x: topology.nic_bandwidth, which torus points do not have
plot topology --x topology
plot devices --x devices --facets workload

# The rows the default x cannot place are named on stderr, once; the failed point too.
expected='plot_sweep: warning: 1 rows are not ok (points 6): not in the charts, listed in summary.md
plot_sweep: warning: 2 ok rows have no topology.nic_bandwidth (points 3, 4; topology torus): not in the charts; --x topology places every row'
[[ "$(cat "$tmp/rail.err")" == "$expected" ]] || fail "warnings: $(cat "$tmp/rail.err")"
[[ "$(cat "$tmp/topology.err")" == "plot_sweep: warning: 1 rows are not ok (points 6): not in the charts, listed in summary.md" ]] ||
  fail "--x topology warnings: $(cat "$tmp/topology.err")"

/usr/bin/python3 - "$tmp" <<'PY' || failed=1
import csv, json, sys
tmp = sys.argv[1]
rows = list(csv.DictReader(open(f"{tmp}/out/results.csv")))
ok = {int(r["point"]) for r in rows if r["status"] == "ok"}
inputs = list(rows[0])[1:list(rows[0]).index("status")]
errors = []
for name, unplaced, numeric in (("rail", {3, 4}, True), ("topology", set(), False),
                                ("devices", set(), True)):
    d = json.load(open(f"{tmp}/{name}.json"))
    if set(d["unplaced"]) != unplaced or d["numeric"] != numeric:
        errors.append(f"{name}: unplaced {d['unplaced']}, numeric {d['numeric']}")
    for chart, panels in d["charts"].items():
        drawn = [p["point"] for panel in panels for line in panel["lines"] for p in line["points"]]
        # Every placeable ok row exactly once.
        if sorted(drawn) != sorted(ok - unplaced):
            errors.append(f"{name}/{chart}: drew points {sorted(drawn)}, expected "
                          f"{sorted(ok - unplaced)}")
        # A line's points differ in x only: nothing else of their inputs.
        for panel in panels:
            for line in panel["lines"]:
                members = [rows[p["point"]] for p in line["points"]]
                for c in inputs:
                    if c == d["x"]:
                        continue
                    if len({m[c] for m in members}) > 1:
                        errors.append(f"{name}/{chart}: line {line['label']!r} merges points "
                                      f"that differ in {c}")
                if len({m[d["x"]] for m in members}) != len(members):
                    errors.append(f"{name}/{chart}: line {line['label']!r} has two points at one x")
topo = json.load(open(f"{tmp}/topology.json"))["charts"]["throughput.png"][0]["lines"]
xs = sorted({p["x"] for line in topo for p in line["points"]})
if xs != ["rail", "torus"]:
    errors.append(f"--x topology: categories {xs}")
# The torus lines are named by the torus's own parameter.
labels = sorted(line["label"] for line in topo if line["points"][0]["x"] == "torus")
if labels != ["seed 0, topology.link_bandwidth 25 GB/s", "seed 0, topology.link_bandwidth 50 GB/s"]:
    errors.append(f"--x topology: torus lines {labels}")
# summary.md: a topology column, a row per ok point, the unplaced and failed points named.
summary = open(f"{tmp}/rail/summary.md").read().splitlines()
if not summary[0].startswith("| topology | workload | devices | "):
    errors.append(f"summary header: {summary[0]}")
body = [l for l in summary[2:] if l.startswith("| ")]
if len(body) != len(ok) or sum(l.startswith("| torus | ") for l in body) != 2:
    errors.append(f"summary rows: {len(body)}, {sum(l.startswith('| torus | ') for l in body)} torus")
if "Not in the charts (no topology.nic_bandwidth): points 3, 4." not in summary:
    errors.append("summary does not name the unplaced points")
if not any(l.startswith("- point 6: error: ") for l in summary):
    errors.append("summary does not name the failed point")
for e in errors:
    print("FAIL", e)
sys.exit(1 if errors else 0)
PY

# An x column the table does not have is one line, exit 1.
out=$(/usr/bin/python3 scripts/plot_sweep.py "$tmp/out" --x topology.k --out "$tmp/k" 2>&1)
status=$?
[[ $status -eq 1 && "$out" == "plot_sweep: no x column 'topology.k' (columns: "* ]] ||
  fail "--x topology.k: status $status: $out"

# The run plots on a torus run.
"$nest" run --model llama2-7b --accelerator h100 --topology tpuv4_torus_8x8x16 --devices 16 \
  --baselines none --output-dir "$tmp/torus" >"$tmp/torus.out" 2>&1 || fail "torus run: $(cat "$tmp/torus.out")"
/usr/bin/python3 scripts/plot_timeline.py "$tmp/torus/run.h5" "$tmp/t.png" >/dev/null &&
  [[ -s "$tmp/t.png" ]] || fail "plot_timeline.py on the torus run"
/usr/bin/python3 scripts/plot_memory.py "$tmp/torus/run.h5" "$tmp/m.png" >/dev/null &&
  [[ -s "$tmp/m.png" ]] || fail "plot_memory.py on the torus run"

exit $failed
