#!/usr/bin/env bash
# The Python examples (examples/python/) run and write their plots; their printed plans are the
# module's (checked against the command line by test_nest.py).
# Usage: examples.sh <python> <source-dir>   (PYTHONPATH points at the build tree's package)
set -u
python="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
for script in "$src"/examples/python/*.py; do
  name=$(basename "$script" .py)
  (cd "$tmp" && "$python" "$script" "$tmp/$name.png") >"$tmp/$name.out" 2>&1 ||
    { echo "FAIL $name: $(tail -5 "$tmp/$name.out")"; failed=1; continue; }
  [ -s "$tmp/$name.png" ] || { echo "FAIL $name wrote no plot"; failed=1; }
  grep -q "^wrote $tmp/$name.png$" "$tmp/$name.out" || { echo "FAIL $name output"; failed=1; }
done
grep -q '^plan: t=2 stages=8 d=64 ' "$tmp/pipeline_timeline.out" ||
  { echo "FAIL pipeline_timeline plan: $(head -1 "$tmp/pipeline_timeline.out")"; failed=1; }
[ "$(grep -c ' NEST .* manual ' "$tmp/spine_whatif.out")" -eq 4 ] ||
  { echo "FAIL spine_whatif rows: $(cat "$tmp/spine_whatif.out")"; failed=1; }
[ "$(grep -cE '^ +[0-9]+ +(ring|nvls|tree|hierarchical) ' "$tmp/busbw_curve.out")" -ge 5 ] ||
  { echo "FAIL busbw_curve rows: $(cat "$tmp/busbw_curve.out")"; failed=1; }
exit $failed
