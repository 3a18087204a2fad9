#!/usr/bin/env bash
# Study points that fix dimensions (axes tp, pp, dp, vp, zero, recompute, order, as `nest place
# --tp --pp ...`): the point's plan is the one `nest place` gives with the same flags, the
# fixed values are input columns `fixed.<axis>` (empty where a point leaves the search free),
# an impossible point is an error row naming the axis, and a bad axis value is one line.
# Usage: sweep_fixed.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"

head=(
  "kind: study"
  "topologies: {rail: {file: h100_rail_64}}"
  "workloads: {llama: {model: llama2-7b, accelerator: h100, micro_batches: [1]}}"
  "placer: {baselines: []}"
)
{
  printf '%s\n' "${head[@]}"
  cat <<'YAML'
sweep:
  points:
    - {tp: 8, pp: 2, dp: 4, zero: 1, recompute: selective, order: tp-pp-dp}
    - {tp: 4}
    - {pp: 40}
YAML
} >"$tmp/s.yaml"
"$nest" sweep "$tmp/s.yaml" --output "$tmp/out" >"$tmp/sweep.out" 2>&1 ||
  fail "nest sweep: $(cat "$tmp/sweep.out")"
"$nest" place --model llama2-7b --accelerator h100 --topology h100_rail_64 --baselines none \
  --verify 0 --micro-batches 1 --tp 8 --pp 2 --dp 4 --zero 1 --recompute selective --order tp-pp-dp \
  --json >"$tmp/place.json" 2>&1 || fail "nest place: $(cat "$tmp/place.json")"
/usr/bin/python3 - "$tmp/out/results.csv" "$tmp/place.json" <<'PY' || failed=1
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
place = json.load(open(sys.argv[2]))
bad = []
fixed = ["fixed.tp", "fixed.pp", "fixed.dp", "fixed.zero", "fixed.recompute", "fixed.order"]
header = list(rows[0])
if header[8:14] != fixed:
    bad.append(f"input columns {header[8:14]}, expected {fixed}")
if [rows[0][c] for c in fixed] != ["8", "2", "4", "1", "selective", "tp-pp-dp"]:
    bad.append(f"point 0 inputs {[rows[0][c] for c in fixed]}")
if [rows[1][c] for c in fixed] != ["4", "", "", "", "", ""]:
    bad.append(f"point 1 inputs {[rows[1][c] for c in fixed]}")
r = rows[0]
if (r["status"], r["tensor_parallel"], r["pipeline_stages"], r["data_parallel"],
        r["zero_stage"], r["order"]) != ("ok", "8", "2", "4", "1", "tp-pp-dp"):
    bad.append(f"point 0 plan: {r}")
want = place["predicted"]["iteration_time_s"]
if abs(float(r["iteration_s"]) - want) > 1e-9 * want:
    bad.append(f"point 0: {r['iteration_s']} s, nest place {want} s")
if (rows[1]["status"], rows[1]["tensor_parallel"]) != ("ok", "4"):
    bad.append(f"point 1: {rows[1]['status']} tensor {rows[1]['tensor_parallel']}")
if (rows[2]["status"], rows[2]["error"]) != ("error", 'pp: a pipeline of 40 stages needs at least '
        '40 layers, the model has 34 (got "40"; expected 1..34 stages)'):
    bad.append(f"point 2: {rows[2]['status']}: {rows[2]['error']}")
for b in bad:
    print("FAIL", b)
sys.exit(1 if bad else 0)
PY

{
  printf '%s\n' "${head[@]}"
  printf 'sweep:\n  points:\n    - {recompute: sometimes}\n'
} >"$tmp/bad.yaml"
expect_failure "nest sweep: $tmp/bad.yaml:7: sweep.points[0].recompute: unknown value (got \"sometimes\"; expected one of none, selective, full)" \
  "$nest" sweep "$tmp/bad.yaml" --output "$tmp/bad"
{
  printf '%s\n' "${head[@]}"
  printf 'sweep:\n  points:\n    - {order: sideways}\n'
} >"$tmp/bad2.yaml"
expect_failure "nest sweep: $tmp/bad2.yaml:7: sweep.points[0].order: unknown placement order (got \"sideways\"; expected one of tp-pp-dp tp-dp-pp pp-tp-dp pp-dp-tp dp-tp-pp dp-pp-tp)" \
  "$nest" sweep "$tmp/bad2.yaml" --output "$tmp/bad2"
exit $failed
