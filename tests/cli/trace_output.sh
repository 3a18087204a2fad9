#!/usr/bin/env bash
# The Perfetto trace of `nest run` / `nest simulate --trace`: every file passes Perfetto's JSON
# rules (tests/tools/check_trace.py), has one process per stage replica in stage order (or one
# per device with --all-devices), memory counters for each, the 8 busiest links' utilization, a
# flow per transfer; --trace-gzip holds the same text. The example's trace (GPT-3 175B on 1,024
# GPUs) stays under 12 MB per virtual stage. The checker itself rejects each broken rule with its message.
# Usage: trace_output.sh <nest> <source-dir>
set -u
nest=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
check=(/usr/bin/python3 tests/tools/check_trace.py)

# Llama-2-7B on 64 GPUs of the rail cluster, and the same plan interleaved and per device.
"$nest" run --model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 64 \
  --baselines none --output-dir "$tmp/run" >"$tmp/run.out" 2>&1 || fail "nest run: $(cat "$tmp/run.out")"
"$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/i.h5" --trace "$tmp/i.json" \
  --schedule interleaved --virtual-stages 2 >/dev/null 2>"$tmp/err" || fail "interleaved: $(cat "$tmp/err")"
"$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/a.h5" --trace "$tmp/a.json" --all-devices \
  >/dev/null 2>"$tmp/err" || fail "--all-devices: $(cat "$tmp/err")"
"$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/g.h5" --trace "$tmp/g.json.gz" --trace-gzip \
  >/dev/null 2>"$tmp/err" || fail "--trace-gzip: $(cat "$tmp/err")"
"$nest" run --model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 64 \
  --baselines none --output-dir "$tmp/gz" --trace-gzip >/dev/null 2>"$tmp/err" || fail "run --trace-gzip: $(cat "$tmp/err")"
[[ -s "$tmp/gz/trace.json.gz" && ! -e "$tmp/gz/trace.json" ]] || fail "run --trace-gzip wrote $(ls "$tmp/gz")"
gzip -dc "$tmp/g.json.gz" | cmp -s - "$tmp/run/trace.json" || fail "the gzip trace holds other text"
gzip -dc "$tmp/gz/trace.json.gz" | cmp -s - "$tmp/run/trace.json" || fail "run's gzip trace holds other text"

for t in "$tmp/run/trace.json" "$tmp/i.json" "$tmp/a.json" "$tmp/g.json.gz"; do
  "${check[@]}" "$t" --require-names --stats >"$t.stats" || fail "$(cat "$t.stats")"
done

/usr/bin/python3 - "$tmp" <<'PY' || failed=1
import json, re, sys
sys.path.insert(0, "scripts")
import h5py, numpy as np
import nest_h5

tmp = sys.argv[1]
errors = []
plan = open(f"{tmp}/run/plan.yaml").read()
stages = int(re.search(r"^stages: (\d+)$", plan, re.M).group(1))
replicas = int(re.search(r"^data_parallel: (\d+)$", plan, re.M).group(1))
shards = int(re.search(r"devices_per_replica: (\d+)", plan).group(1))

with h5py.File(f"{tmp}/run/run.h5") as f:
    t = nest_h5.timeline(f)
    use = nest_h5.link_use(f)
order = np.argsort(-use["utilization"], kind="stable")[:8]
busiest = sorted(f"{use['src_name'][i]} -> {use['dst_name'][i]}" for i in order)


def folded(name, stats):
    procs = stats["processes"]
    if len(procs) != stages * replicas + 1 or procs[-1] != "network: the 8 busiest links":
        errors.append(f"{name}: {len(procs)} processes, expected {stages} x {replicas} + 1")
        return
    seats = [tuple(map(int, re.match(r"stage (\d+) replica (\d+): devices? ", p).groups()))
             for p in procs[:-1]]
    if seats != sorted(seats) or len(set(seats)) != len(seats):
        errors.append(f"{name}: processes not in stage order: {procs[:4]}...")
    firsts = [int(re.search(r": devices? (\d+)", p).group(1)) for p in procs[:-1]]
    sends = np.isin(t["kind"], ["send_activation", "send_gradient"]) & np.isin(t["device"], firsts)
    if stats["flows"] != int(sends.sum()):
        errors.append(f"{name}: {stats['flows']} flows, expected one per shown transfer "
                      f"({int(sends.sum())})")
    tracks = stats["counter_tracks"]
    for pid in range(1, len(procs)):
        for arg in ("weights", "gradients", "optimizer", "activations", "total"):
            if f"{pid}/memory/{arg}" not in tracks:
                errors.append(f"{name}: no memory {arg} counter for process {pid}")
    links = sorted(k.split("/")[1] for k in tracks if k.startswith(f"{len(procs)}/"))
    if links != busiest:
        errors.append(f"{name}: link counters {links}, expected the busiest {busiest}")


run = json.load(open(f"{tmp}/run/trace.json.stats"))
folded("run", run)
interleaved = json.load(open(f"{tmp}/i.json.stats"))
if interleaved["flows"] == 0 or len(interleaved["processes"]) != stages * replicas + 1:
    errors.append(f"interleaved: {interleaved['flows']} flows, "
                  f"{len(interleaved['processes'])} processes")
every = json.load(open(f"{tmp}/a.json.stats"))
if len(every["processes"]) != stages * replicas * shards + 1:
    errors.append(f"--all-devices: {len(every['processes'])} processes, expected "
                  f"{stages * replicas * shards} + 1")
if every["slices"] != len(t["device"]):
    errors.append(f"--all-devices: {every['slices']} slices, expected every timeline row "
                  f"({len(t['device'])})")
for e in errors:
    print("FAIL", e)
sys.exit(1 if errors else 0)
PY

# The example of scripts/run-example.sh: under 12 MB per virtual stage (it was 28 MB with a
# process per device; its plan is now interleaved, each chunk a task of its own).
"$nest" run --model gpt3-175b --accelerator h100 --topology topologies/h100_rail_1024.yaml \
  --output-dir "$tmp/example" >/dev/null 2>"$tmp/err" || fail "example: $(cat "$tmp/err")"
size=$(stat -c %s "$tmp/example/trace.json")
chunks=$(grep -m1 '^virtual_stages:' "$tmp/example/plan.yaml" | awk '{print $2}')
[[ $size -lt $((12000000 * ${chunks:-1})) ]] ||
  fail "the example's trace is $size bytes, expected under 12 MB x ${chunks:-1} virtual stages"
"${check[@]}" "$tmp/example/trace.json" --require-names >"$tmp/ex.out" || fail "$(cat "$tmp/ex.out")"

# The checker catches each broken rule, naming it.
expect_violation() {  # expected message, then the events as JSON
  printf '{"traceEvents":%s}' "$2" >"$tmp/bad.json"
  local out
  out=$("${check[@]}" "$tmp/bad.json" --require-names)
  local status=$?
  [[ $status -eq 1 && "$out" == "check_trace: $tmp/bad.json: $1" ]] ||
    fail "checker on $2: status $status, got: $out; expected: $1"
}
name='{"ph":"M","pid":1,"name":"process_name","args":{"name":"p"}},{"ph":"M","pid":1,"tid":0,"name":"thread_name","args":{"name":"t"}}'
expect_violation 'event 0: unknown phase "Q"' '[{"ph":"Q","ts":0}]'
expect_violation 'event 2 (X): missing dur' "[$name,{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"name\":\"a\"}]"
expect_violation 'event 2 (X): dur -1 is not a finite number >= 0' \
  "[$name,{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":-1,\"name\":\"a\"}]"
expect_violation 'event 3 (X) on pid 1 tid 0: [5000, 15000] ns overlaps event 2 ending at 10000 ns without nesting' \
  "[$name,{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":10,\"name\":\"a\"},{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":5,\"dur\":10,\"name\":\"b\"}]"
expect_violation 'event 3 (C): counter m v of pid 1 at 1 us, not after 2000 ns' \
  "[$name,{\"ph\":\"C\",\"pid\":1,\"ts\":2,\"name\":\"m\",\"args\":{\"v\":1}},{\"ph\":\"C\",\"pid\":1,\"ts\":1,\"name\":\"m\",\"args\":{\"v\":2}}]"
expect_violation 'event 2 (C): counter v value "x" is not a finite number' \
  "[$name,{\"ph\":\"C\",\"pid\":1,\"ts\":2,\"name\":\"m\",\"args\":{\"v\":\"x\"}}]"
expect_violation 'flow bind_id 7: 1 flow_out and 0 flow_in slices, expected one of each' \
  "[$name,{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":1,\"name\":\"a\",\"bind_id\":7,\"flow_out\":true}]"
expect_violation 'flow bind_id 7: its flow_in slice (event 2) starts before its flow_out slice (event 3)' \
  "[$name,{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":1,\"name\":\"a\",\"bind_id\":7,\"flow_in\":true},{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":3,\"dur\":1,\"name\":\"b\",\"bind_id\":7,\"flow_out\":true}]"
expect_violation "flow ('c', 'f', '3'): 1 starts and 0 ends, expected one of each" \
  "[$name,{\"ph\":\"s\",\"pid\":1,\"tid\":0,\"ts\":0,\"name\":\"f\",\"cat\":\"c\",\"id\":3}]"
expect_violation 'event 0 (M): unknown metadata "process_colour"' \
  '[{"ph":"M","pid":1,"name":"process_colour","args":{"name":"p"}}]'
expect_violation 'event 0 (M): process_sort_index without args.sort_index' \
  '[{"ph":"M","pid":1,"name":"process_sort_index","args":{}}]'
expect_violation 'pid 2 has events but no process_name' \
  "[$name,{\"ph\":\"C\",\"pid\":2,\"ts\":2,\"name\":\"m\",\"args\":{\"v\":1}}]"
printf '{"traceEvents":{}}' >"$tmp/bad.json"
out=$("${check[@]}" "$tmp/bad.json")
[[ "$out" == "check_trace: $tmp/bad.json: not an object with a \"traceEvents\" array" ]] ||
  fail "checker on a non-array: $out"

exit $failed
