#!/usr/bin/env bash
# Chakra execution traces: `nest simulate --chakra DIR` and `nest run --chakra DIR` write one ET
# file per rank that Python's protobuf reads back with the replay's node counts, durations and
# dependencies (tests/tools/check_chakra.py against run.h5); `nest profile --chakra DIR` reads
# them back with the same counts; the same plan gives the same bytes; bad folders and options
# are refused with one line and exit 2, leaving nothing behind.
# Usage: chakra_output.sh <nest> <source-dir>
set -u
nest=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
source tests/cli/lib/common.sh

# The schema's Python module, generated here from the vendored .proto.
mkdir "$tmp/pb2"
protoc --python_out="$tmp/pb2" -I third_party/chakra third_party/chakra/et_def.proto ||
  fail "protoc --python_out"

"$nest" run --model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 64 \
  --baselines none --output-dir "$tmp/run" --chakra "$tmp/run-et" >"$tmp/run.out" 2>&1 ||
  fail "nest run --chakra: $(cat "$tmp/run.out")"
grep -qx "wrote $tmp/run-et" "$tmp/run.out" || fail "nest run does not name the Chakra folder"
for schedule in 1f1b interleaved; do
  "$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/$schedule.h5" --chakra "$tmp/$schedule" \
    --schedule "$schedule" >/dev/null 2>"$tmp/err" || fail "simulate --chakra ($schedule): $(cat "$tmp/err")"
  /usr/bin/python3 tests/tools/check_chakra.py "$tmp/$schedule.h5" "$tmp/$schedule" "$tmp/pb2" \
    >"$tmp/$schedule.check" || fail "$schedule: $(cat "$tmp/$schedule.check")"
  "$nest" profile --chakra "$tmp/$schedule" --json >"$tmp/$schedule.json" 2>"$tmp/err" ||
    fail "profile --chakra ($schedule): $(cat "$tmp/err")"
done
# The same plan, the same bytes (nest run's folder and simulate's).
diff -r "$tmp/run-et" "$tmp/1f1b" >/dev/null || fail "two exports of one plan differ"

/usr/bin/python3 - "$tmp" <<'PY' || failed=1
import json, re, sys
tmp = sys.argv[1]
errors = []
plan = open(f"{tmp}/run/plan.yaml").read()
stages = int(re.search(r"^stages: (\d+)$", plan, re.M).group(1))
replicas = int(re.search(r"^data_parallel: (\d+)$", plan, re.M).group(1))
shards = int(re.search(r"devices_per_replica: (\d+)", plan).group(1))
used = stages * replicas * shards
for schedule in ("1f1b", "interleaved"):
    python = json.load(open(f"{tmp}/{schedule}.check"))
    nest = json.load(open(f"{tmp}/{schedule}.json"))
    # NEST's reader and Python's agree on every count.
    if nest["nodes"] != {k: python["nodes"][k] for k in nest["nodes"]} or \
            sorted(nest["nodes"]) != sorted(python["nodes"]):
        errors.append(f"{schedule}: nodes {nest['nodes']} (NEST) vs {python['nodes']} (Python)")
    if nest["dependencies"] != python["dependencies"] or nest["groups"] != python["groups"]:
        errors.append(f"{schedule}: {nest['dependencies']} / {python['dependencies']} dependencies")
    # Every device of the 1,024-GPU cluster has a file; the plan's devices hold nodes; one
    # group per stage shard (the data-parallel replicas of one shard).
    if nest["ranks"] != 1024 or nest["ranks"] - nest["empty_ranks"] != used:
        errors.append(f"{schedule}: {nest['ranks']} ranks, {nest['empty_ranks']} empty, "
                      f"expected 1024 and {used} used")
    if nest["groups"] != stages * shards:
        errors.append(f"{schedule}: {nest['groups']} groups, expected {stages * shards}")
    want_stages = stages * (2 if schedule == "interleaved" else 1)
    if len(nest["stages"]) != want_stages:
        errors.append(f"{schedule}: {len(nest['stages'])} stages, expected {want_stages}")
for e in errors:
    print("FAIL", e)
sys.exit(1 if errors else 0)
PY

# Text output: the counts and the per-stage table.
"$nest" profile --chakra "$tmp/1f1b" >"$tmp/text" 2>&1 || fail "profile --chakra: $(cat "$tmp/text")"
grep -q "^chakra       $tmp/1f1b: 1024 ranks (960 without nodes), " "$tmp/text" ||
  fail "profile --chakra text: $(head -1 "$tmp/text")"
grep -q "^stage  layers      ranks      forward     backward$" "$tmp/text" ||
  fail "profile --chakra has no stage table: $(cat "$tmp/text")"

# Refusals: a folder that holds files, the folder inside nest run's, mixed options, a broken trace.
expect_failure "nest simulate: --chakra: the output folder is not empty (got \"$tmp/1f1b\"; expected an empty or new folder, or --force to replace the run's files in it)" \
  "$nest" simulate --plan "$tmp/run/plan.yaml" -o "$tmp/x.h5" --chakra "$tmp/1f1b"
[[ -e "$tmp/x.h5" ]] && fail "a refused --chakra left the run file"
expect_failure "nest run: --chakra: the Chakra folder is inside the output folder (got \"$tmp/r2/et\"; expected a folder outside --output-dir)" \
  "$nest" run --model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 64 \
  --baselines none --output-dir "$tmp/r2" --chakra "$tmp/r2/et"
[[ -e "$tmp/r2" ]] && fail "a refused nest run left its folder"
expect_failure "nest profile: --chakra: --chakra excludes --profile, --model and --accelerator (expected --chakra DIR alone (with --json))" \
  "$nest" profile --chakra "$tmp/1f1b" --model llama2-7b
cp -r "$tmp/1f1b" "$tmp/broken"
head -c 100 "$tmp/1f1b/nest.5.et" >"$tmp/broken/nest.5.et"
err=$("$nest" profile --chakra "$tmp/broken" 2>&1 >/dev/null)
status=$?
[[ $status -eq 2 && "$err" == "nest profile: $tmp/broken/nest.5.et: message "*" bytes that do not parse as a Chakra Node (a file cut short?) (expected varint32-delimited Chakra ET messages)" ]] ||
  fail "a cut file: status $status: $err"
rm "$tmp/broken/nest.7.et"
expect_failure "nest profile: $tmp/broken: rank 7 has no file (expected nest.7.et (ranks 0..1023 without gaps))" \
  "$nest" profile --chakra "$tmp/broken"
expect_failure "nest profile: $tmp/none: not a folder (expected a folder of Chakra ET files)" \
  "$nest" profile --chakra "$tmp/none"

exit $failed
