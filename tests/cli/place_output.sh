#!/usr/bin/env bash
# `nest place`: the published H100 row of the NEST artifact through the command line (--json
# keys and values), the plan file (-o, written whole, the same bytes on a second run), and the
# plan file read back as the `fixed` baseline, which must price exactly as NEST's plan.
# Usage: place_output.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
profile="$src/workloads/profiles/gpt3-175b-h100.yaml"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }

"$nest" place --profile "$profile" --rules nest-artifact --devices 128 --json \
  -o "$tmp/plan.yaml" > "$tmp/out.json" || fail "exit status $?"
python3 - "$tmp/out.json" <<'PY' || failed=1
import json, sys
j = json.load(open(sys.argv[1]))
ok = True
def expect(name, got, want):
    global ok
    if got != want:
        print(f"FAIL {name}: got {got!r}, expected {want!r}")
        ok = False
# expected-nest.tsv: gpt3-175b-h100.yaml 128 devices 245184.584 ms, S 8, d 4, t 4.
p = j["predicted"]
if abs(p["iteration_time_s"] - 245.184584) > 245.184584e-3:
    print("FAIL iteration_time_s", p["iteration_time_s"]); ok = False
expect("kind", j["kind"], "plan")
expect("stages", j["stages"], 8)
expect("data_parallel", j["data_parallel"], 4)
expect("tensor_parallel", j["variant"]["tensor_parallel"], 4)
expect("devices_used", j["devices_used"], 128)
expect("partition entries", len(j["partition"]), 8)
expect("baseline names", sorted(j["baselines"]), ["anneal", "manual", "topology-agnostic"])
expect("topology-agnostic without a topology",
       j["baselines"]["topology-agnostic"]["iteration_time_s"], None)
# Megatron practice at t = 8 (the default scale-up domain): 5 stages, d = 3: 395.2 s.
if not (395.0 < j["baselines"]["manual"]["iteration_time_s"] < 395.5):
    print("FAIL manual", j["baselines"]["manual"]); ok = False
parts = ["compute_s", "bubble_s", "collectives_s", "transfers_s", "data_parallel_sync_s",
         "optimizer_s"]
expect("breakdown sums to the iteration time",
       round(sum(p[k] for k in parts), 6), round(p["iteration_time_s"], 6))
sys.exit(0 if ok else 1)
PY

[ -f "$tmp/plan.yaml" ] || fail "no plan file"
ls "$tmp" | grep -q '\.tmp\.' && fail "a temporary file was left behind"
grep -q '^placement_order: tp-pp-dp$' "$tmp/plan.yaml" || fail "placement order missing"
grep -q '^  iteration_time_s: 245.1845844$' "$tmp/plan.yaml" || fail "exact iteration time"

"$nest" place --profile "$profile" --rules nest-artifact --devices 128 --json \
  -o "$tmp/again.yaml" > /dev/null || fail "second run"
cmp -s "$tmp/plan.yaml" "$tmp/again.yaml" || fail "plan files differ between two runs"

"$nest" place --profile "$profile" --rules nest-artifact --devices 128 --json \
  --baselines none --fixed "$tmp/plan.yaml" > "$tmp/fixed.json" || fail "--fixed run"
python3 - "$tmp/fixed.json" <<'PY' || failed=1
import json, sys
j = json.load(open(sys.argv[1]))
if list(j["baselines"]) != ["fixed"] or \
        j["baselines"]["fixed"]["iteration_time_s"] != j["predicted"]["iteration_time_s"]:
    print("FAIL fixed baseline", j["baselines"], j["predicted"]); sys.exit(1)
PY

# The text report names the plan and the breakdown.
"$nest" place --profile "$profile" --rules nest-artifact --devices 128 --baselines none \
  > "$tmp/out.txt" || fail "text run"
grep -q '^plan: tensor 4, expert 1, context 1, micro-batch 1 | pipeline 8 stages | data parallel 4 | ZeRO-0 | recompute full | order tp-pp-dp$' "$tmp/out.txt" \
  || { fail "plan line"; cat "$tmp/out.txt"; }
grep -q '^iteration time: 245.2 s ' "$tmp/out.txt" || fail "iteration time line"
exit $failed
