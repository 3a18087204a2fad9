#!/usr/bin/env bash
# `nest run` is `nest place -o` then `nest simulate` in one process: the same plan, trace, CSV
# and HDF5 bytes (the HDF5 compared dataset by dataset, all but the command line and the input
# paths as typed), with one topology load and one collective oracle (the debug log shows it), and
# the plan simulated from another working directory finds its inputs beside it.
# Usage: run_equivalence.sh <nest> <source-dir>
set -u
nest="$1"
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
job=(--model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 64 --baselines none)

"$nest" --debug run "${job[@]}" --output-dir "$tmp/a" >"$tmp/run.out" 2>"$tmp/run.log" ||
  fail "nest run: $(cat "$tmp/run.log")"
[ "$(grep -c '^info: topology .*h100_rail_1024.yaml: 1024 devices, loaded' "$tmp/run.log")" -eq 1 ] ||
  fail "expected one topology load: $(cat "$tmp/run.log")"
[ "$(grep -c '^debug: oracle: one collective oracle' "$tmp/run.log")" -eq 1 ] ||
  fail "expected one oracle: $(cat "$tmp/run.log")"

mkdir -p "$tmp/b"
"$nest" place "${job[@]}" -o "$tmp/b/plan.yaml" >/dev/null 2>&1 || fail "nest place"
(cd / && "$nest" simulate --plan "$tmp/b/plan.yaml" -o "$tmp/b/run.h5" --trace "$tmp/b/trace.json" \
  --csv "$tmp/b/summary.csv" >/dev/null 2>"$tmp/sim.log") || fail "nest simulate: $(cat "$tmp/sim.log")"
for f in plan.yaml trace.json summary.csv; do
  cmp -s "$tmp/a/$f" "$tmp/b/$f" || fail "$f differs between run and place + simulate"
done
/usr/bin/python3 tests/cli/lib/h5_same.py "$tmp/a/run.h5" "$tmp/b/run.h5" || failed=1
exit $failed
