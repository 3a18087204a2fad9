#!/usr/bin/env bash
# `nest simulate --flow-by-flow` turns off the replay's shortcuts (shard planes merged,
# reductions timed alone) and gives the same run file: GPT-3 175B on the 1,024-GPU rail
# cluster (t 8, 16 stages, d 8; 392 of 512 reductions timed alone by default, none flow by
# flow) and Llama-2-7B on h100_rail_64 (tp-pp-dp, one leaf per rail: shard planes merged; 7 of
# its 8 reductions timed alone).
# Usage: flow_by_flow.sh <nest> <source-dir>
set -u
nest="$1"
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }

check() {  # NAME EXPECTED_ALONE PLACE_ARGS...: place, simulate both ways, compare
  local name="$1" alone="$2"
  shift 2
  "$nest" place "$@" --baselines none --verify 0 -o "$tmp/$name.yaml" >/dev/null 2>&1 ||
    fail "$name: nest place"
  "$nest" -v simulate --plan "$tmp/$name.yaml" -o "$tmp/$name.h5" 2>"$tmp/$name.log" >/dev/null ||
    fail "$name: nest simulate: $(cat "$tmp/$name.log")"
  "$nest" -v simulate --plan "$tmp/$name.yaml" -o "$tmp/$name-ff.h5" --flow-by-flow \
    2>"$tmp/$name-ff.log" >/dev/null || fail "$name: --flow-by-flow: $(cat "$tmp/$name-ff.log")"
  grep -q " $alone reductions timed alone" "$tmp/$name.log" ||
    fail "$name: expected '$alone reductions timed alone': $(grep replay: "$tmp/$name.log")"
  grep -q " 0 of [0-9]* reductions timed alone" "$tmp/$name-ff.log" ||
    fail "$name: --flow-by-flow timed reductions alone: $(grep replay: "$tmp/$name-ff.log")"
  /usr/bin/python3 tests/cli/lib/h5_same.py "$tmp/$name.h5" "$tmp/$name-ff.h5" || fail "$name"
}

check gpt3 "392 of 512" --model gpt3-175b --accelerator h100 --topology h100_rail_1024 \
  --tp 8 --pp 16 --dp 8
check llama "7 of 8" --model llama2-7b --accelerator h100 --topology h100_rail_64 \
  --tp 2 --pp 2 --dp 16 --order tp-pp-dp
exit $failed
