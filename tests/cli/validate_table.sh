#!/usr/bin/env bash
# `nest validate`: every check against outside numbers within tolerance (exit 0); a case pushed
# out of tolerance gives exit 1 and a FAIL line; bad folders give exit 2 and one exact line.
# By default the copies shipped in tests/validation/reference/ are used. Usage: validate_table.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }

# 1. From the source tree: everything within tolerance.
out=$(cd "$src" && "$nest" validate)
status=$?
[ "$status" -eq 0 ] || fail "validate exited $status"
echo "$out" | grep -q ' 0 out of tolerance$' || fail "summary: $(echo "$out" | tail -2)"
for group in collective nccl parameters activation flops nest collective-measured layer training; do
  n=$(echo "$out" | grep -c "^$group: .*  ok  ")
  [ "$n" -ge 2 ] || fail "group $group has $n passing cases"
done
[ "$(echo "$out" | grep -c '^nest: ')" -eq 6 ] || fail "expected the 6 rows of expected-nest.tsv"
echo "$out" | grep -q '^nest: gpt3-175b-h100.yaml on 128 devices, best iteration (ms) *245184.584 ' ||
  fail "published H100 row missing"
# The 19 measured runs, each predicted and replayed, and the three means.
[ "$(echo "$out" | grep -c '^training: .*: iteration time, predicted (s) .*  ok  ')" -eq 19 ] ||
  fail "expected the 19 rows of training-runs.tsv"
[ "$(echo "$out" | grep -c '^training: .*: iteration time, replayed against predicted (s) .*  ok  ')" -eq 19 ] ||
  fail "expected 19 replays"
[ "$(echo "$out" | grep -c '^training: mean |error|')" -eq 3 ] || fail "expected 3 means"

# A measured run moved far from NEST's figure fails; a malformed row is an input error.
mkdir -p "$tmp/runs/nest-artifact" "$tmp/runs/measured"
cp "$src"/workloads/profiles/gpt3-175b-*.yaml "$tmp/runs/nest-artifact/"
cp "$src"/tests/validation/reference/measured/nccl-*.tsv "$tmp/runs/measured/"
cp "$src/tests/validation/reference/nest-artifact/expected-nest.tsv" "$tmp/runs/nest-artifact/"
tsv="$src/tests/validation/reference/measured/training-runs.tsv"
{ head -1 "$tsv"; grep '^korthikanti-t5-22b-full' "$tsv" | sed 's/\t1.42\t/\t2.0\t/'; } \
  >"$tmp/runs/measured/training-runs.tsv"
out=$("$nest" validate --reference "$tmp/runs" --source "$src" --failures-only)
status=$?
[ "$status" -eq 1 ] || fail "a measured run out of tolerance: exit $status, expected 1"
echo "$out" | grep -q '^training: korthikanti-t5-22b-full: iteration time, predicted (s) .* FAIL ' ||
  fail "the moved run did not fail: $out"
{ head -1 "$tsv"; grep '^korthikanti-t5-22b-full' "$tsv" | sed 's/\tfull\t/\tsometimes\t/'; } \
  >"$tmp/runs/measured/training-runs.tsv"
err=$("$nest" validate --reference "$tmp/runs" --source "$src" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "malformed run: exit $status"
[ "$err" = "nest validate: $tmp/runs/measured/training-runs.tsv:2: recompute: unknown recomputation mode (got \"sometimes\"; expected none, selective or full)" ] ||
  fail "malformed run message: $err"

# 2. A published time moved by 1%: that case fails, the command exits 1.
mkdir -p "$tmp/ref/nest-artifact"
cp -r "$src/tests/validation/reference/measured" "$tmp/ref/"
cp "$src"/workloads/profiles/gpt3-175b-*.yaml "$tmp/ref/nest-artifact/"
sed 's/245184.584/247636.430/' "$src/tests/validation/reference/nest-artifact/expected-nest.tsv" \
  >"$tmp/ref/nest-artifact/expected-nest.tsv"
out=$("$nest" validate --reference "$tmp/ref" --source "$src" --failures-only)
status=$?
[ "$status" -eq 1 ] || fail "a case out of tolerance: exit $status, expected 1"
[ "$(echo "$out" | grep -c 'FAIL')" -eq 1 ] || fail "expected one FAIL line: $out"
echo "$out" | grep -q '^nest: gpt3-175b-h100.yaml on 128 devices.* FAIL ' || fail "wrong case failed"
echo "$out" | grep -q ' 1 out of tolerance$' || fail "summary after a failure"

# 2b. A measured NCCL time moved by 30% (4 MiB): its case and the curve's worst size fail.
sed -i 's/^4194304\t54.19\t/4194304\t70.45\t/' "$tmp/ref/measured/nccl-allreduce-dgx-h100.tsv"
sed -i 's/247636.430/245184.584/' "$tmp/ref/nest-artifact/expected-nest.tsv"
out=$("$nest" validate --reference "$tmp/ref" --source "$src" --failures-only)
status=$?
[ "$status" -eq 1 ] || fail "a measured case out of tolerance: exit $status, expected 1"
[ "$(echo "$out" | grep -c 'FAIL')" -eq 2 ] || fail "expected two FAIL lines: $out"
echo "$out" | grep -q '^collective-measured: dgx-h100 allreduce curve from 64 KiB, worst size: dgx-h100 allreduce 4194304 B .* FAIL ' ||
  fail "the worst size is not reported: $out"

# 3. From another tree: its shipped copies are used.
mkdir -p "$tmp/tree/tests"
ln -s "$src/workloads" "$tmp/tree/workloads"
ln -s "$src/topologies" "$tmp/tree/topologies"
ln -s "$src/tests/validation" "$tmp/tree/tests/validation"
out=$("$nest" validate --source "$tmp/tree")
status=$?
[ "$status" -eq 0 ] || fail "shipped copies: exit $status"
echo "$out" | grep -q "^NEST table: $tmp/tree/tests/validation/reference/nest-artifact/expected-nest.tsv$" ||
  fail "shipped table not used: $(echo "$out" | tail -1)"

# 4. Bad folders. Every run names --source or runs in the source tree: the default source is
# found from the working directory or the executable's folders, which need not be in the tree.
err=$("$nest" validate --reference "$tmp/none" --source "$src" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "missing reference: exit $status"
[ "$err" = "nest validate: --reference: no nest-artifact/expected-nest.tsv in the reference folder (got \"$tmp/none\"; expected a folder laid out as tests/validation/reference/)" ] ||
  fail "missing reference message: $err"
err=$("$nest" validate --source "$tmp" 2>&1 >/dev/null)
status=$?
[ "$status" -eq 2 ] || fail "missing source: exit $status"
[ "$err" = "nest validate: --source: cannot find the workloads folder (got \"$tmp\"; expected a folder holding workloads/models/ (the source tree))" ] ||
  fail "missing source message: $err"
exit $failed
