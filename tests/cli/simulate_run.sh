#!/usr/bin/env bash
# `nest run` and `nest simulate` end to end: files written, the HDF5 schema checked by the
# Python reader, the same bytes twice, and bad plans rejected with exact messages and no
# output left behind.
# Usage: bash simulate_run.sh <path-to-nest> <source-dir>
set -u
nest=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# Place and replay Llama-2-7B on 64 GPUs of the rail-optimized cluster.
"$nest" run --model llama2-7b --accelerator h100 --topology topologies/h100_rail_1024.yaml \
  --devices 64 --baselines none --output-dir "$tmp/run" >"$tmp/run.out" 2>&1 ||
  fail "nest run exited $?: $(cat "$tmp/run.out")"
for f in plan.yaml run.h5 trace.json summary.csv; do
  [[ -s "$tmp/run/$f" ]] || fail "nest run did not write $f"
done
grep -q '^iteration (replayed) ' "$tmp/run.out" || fail "no replayed iteration in the summary"
/usr/bin/python3 scripts/check_run.py "$tmp/run/run.h5" "$tmp/run/plan.yaml" >"$tmp/check.out" ||
  fail "schema: $(cat "$tmp/check.out")"
[[ $(wc -l <"$tmp/run/summary.csv") -eq 2 ]] || fail "summary.csv is not header + one row"
/usr/bin/python3 scripts/plot_timeline.py "$tmp/run/run.h5" "$tmp/t.png" && [[ -s "$tmp/t.png" ]] ||
  fail "plot_timeline.py"
/usr/bin/python3 scripts/plot_memory.py "$tmp/run/run.h5" "$tmp/m.png" && [[ -s "$tmp/m.png" ]] ||
  fail "plot_memory.py"

# Determinism: simulating the plan twice (same command line) gives the same bytes.
for i in 1 2; do
  "$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/s.h5" --trace "$tmp/s.json" \
    >/dev/null 2>&1 || fail "nest simulate ($i) exited $?"
  mv "$tmp/s.h5" "$tmp/s$i.h5" && mv "$tmp/s.json" "$tmp/s$i.json"
done
cmp -s "$tmp/s1.h5" "$tmp/s2.h5" || fail "two simulations wrote different HDF5 files"
cmp -s "$tmp/s1.json" "$tmp/s2.json" || fail "two simulations wrote different traces"

expect_error() {
  local expected=$1 out=$2
  shift 2
  local err status
  "$nest" simulate "$@" >/dev/null 2>"$tmp/err"
  status=$?
  err=$(cat "$tmp/err")
  if [[ $status -ne 2 || "$err" != "$expected" ]]; then
    fail "nest simulate $*: status $status, got: $err; expected: $expected"
  fi
  [[ -e "$out" ]] && fail "nest simulate $* left $out behind"
  ls "$(dirname "$out")" | grep -q '\.tmp\.' && fail "a temporary file was left behind"
}

# A topology too small for the plan.
expect_error "nest simulate: topologies/small_explicit.yaml: devices: the plan needs 64 devices, the topology has 4" \
  "$tmp/small.h5" --plan "$tmp/run/plan.yaml" -o "$tmp/small.h5" --topology topologies/small_explicit.yaml

# A stage over memory: four times the micro-batch, four times the activations. (Edited plans go
# into a folder beside the run's, so that their relative input paths still hold.)
mkdir -p "$tmp/edit"
sed -e 's/^  micro_batch: 1$/  micro_batch: 4/' -e 's/^microbatches: 1024$/microbatches: 256/' \
  "$tmp/run/plan.yaml" >"$tmp/edit/big.yaml"
expect_error "nest simulate: $tmp/edit/big.yaml: partition[0]: stage 0 needs 175 GiB per device, more than the 80 GiB of memory" \
  "$tmp/big.h5" --plan "$tmp/edit/big.yaml" -o "$tmp/big.h5"

# An unknown key in the plan file.
sed -e 's/^recompute: none$/recompute: none\nrecomputation: true/' "$tmp/run/plan.yaml" >"$tmp/key.yaml"
"$nest" simulate --plan "$tmp/key.yaml" -o "$tmp/key.h5" >/dev/null 2>"$tmp/err"
status=$?
[[ $status -eq 2 ]] || fail "unknown key: status $status"
grep -q "key.yaml:[0-9]*: recomputation: unknown key \"recomputation\"" "$tmp/err" ||
  fail "unknown key message: $(cat "$tmp/err")"
[[ -e "$tmp/key.h5" ]] && fail "unknown key left an output file"

# An unknown schedule.
expect_error 'nest simulate: --schedule: unknown schedule (got "zigzag"; expected 1f1b, gpipe or interleaved)' \
  "$tmp/z.h5" --plan "$tmp/run/plan.yaml" -o "$tmp/z.h5" --schedule zigzag

# A run whose placement fails leaves no output folder behind.
"$nest" run --model no-such-model --accelerator h100 --topology topologies/h100_rail_1024.yaml \
  --output-dir "$tmp/failed" >/dev/null 2>"$tmp/err"
status=$?
[[ $status -eq 2 ]] || fail "failed run: status $status"
[[ -e "$tmp/failed" ]] && fail "a failed run left its output folder behind"

# The interleaved schedule on a 1F1B plan: 2 virtual stages per device group, the same devices,
# a shorter bubble (an interleaved plan's own errors: tests/unit/replay/plan_replay_test.cc).
grep -q '^virtual_stages: 1$' "$tmp/run/plan.yaml" || fail "the plan is interleaved"
"$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/i.h5" --schedule interleaved \
  --virtual-stages 2 >"$tmp/i.out" 2>&1 || fail "interleaved: $(cat "$tmp/i.out")"
grep -q '^iteration (replayed) ' "$tmp/i.out" || fail "interleaved: no summary"
expect_error 'nest simulate: --virtual-stages: the interleaved schedule needs at least 2 virtual stages (got "1"; expected an integer >= 2)' \
  "$tmp/v.h5" --plan "$tmp/run/plan.yaml" -o "$tmp/v.h5" --schedule interleaved --virtual-stages 1

if [[ $failures -gt 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "simulate/run: all checks passed"
