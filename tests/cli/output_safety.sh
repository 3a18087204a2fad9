#!/usr/bin/env bash
# Every output file survives (issue 17, defects 1 and 5): a full disk, a failure after placing,
# SIGINT, SIGTERM and SIGKILL never leave a partial file, a mixed `nest run` set or a
# temporary behind, and the previous good files stay; a planted symlink is never followed;
# outputs that are inputs are refused; `nest run` refuses a folder that holds files without
# --force; a sweep folder is locked. Signals are sent for real.
# Usage: output_safety.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
# shellcheck source=lib/common.sh
source "$src/tests/cli/lib/common.sh"
cd "$src" || exit 1

run_args=(--model llama2-7b --accelerator h100 --topology topologies/h100_rail_1024.yaml
  --devices 64 --baselines none)
set_files="plan.yaml run.h5 summary.csv trace.json"

# same_set A B: the run files of folders A and B are the same bytes.
same_set() {
  for f in $set_files; do cmp -s "$1/$f" "$2/$f" || return 1; done
}
# no_temporaries DIR...: no NEST temporary (file or staging folder) in DIR.
no_temporaries() {
  local left
  left=$(ls -A "$@" 2>/dev/null | grep -E '\.nest-tmp-|\.tmp\.' || true)
  [ -z "$left" ] || fail "temporaries left: $left"
}
# background COMMAND...: starts COMMAND in the background with the default SIGINT disposition (a
# shell without job control starts background commands with SIGINT ignored); $! is its pid.
background() { env --default-signal=INT "$@" & }
# wait_for PATTERN: waits (up to 20 s) until a path matching the glob PATTERN exists.
wait_for() {
  local _
  for _ in $(seq 2000); do
    compgen -G "$1" >/dev/null && return 0
    sleep 0.01
  done
  return 1
}

# --- nest run: a folder that holds files needs --force; --force replaces the set only. -------
"$nest" run "${run_args[@]}" --output-dir "$tmp/run" >/dev/null 2>&1 || fail "first run"
cp -r "$tmp/run" "$tmp/first"
expect_failure "nest run: --output-dir: the output folder is not empty (got \"$tmp/run\"; expected an empty or new folder, or --force to replace the run's files in it)" \
  "$nest" run "${run_args[@]}" --output-dir "$tmp/run"
same_set "$tmp/run" "$tmp/first" || fail "a refused run changed the folder"
echo "my notes" >"$tmp/run/notes.txt"
"$nest" run "${run_args[@]}" --buckets 2 --force --output-dir "$tmp/run" >"$tmp/out" 2>&1 ||
  fail "run --force: $(cat "$tmp/out")"
grep -qx "wrote $tmp/run/plan.yaml" "$tmp/out" || fail "run's report: $(grep plan "$tmp/out")"
grep -qx "wrote $tmp/run/run.h5" "$tmp/out" || fail "run's report: $(tail -3 "$tmp/out")"
[ "$(cat "$tmp/run/notes.txt")" = "my notes" ] || fail "--force lost a file that is not the run's"
cmp -s "$tmp/run/run.h5" "$tmp/first/run.h5" && fail "--force did not replace run.h5"
/usr/bin/python3 scripts/check_run.py "$tmp/run/run.h5" "$tmp/run/plan.yaml" >/dev/null ||
  fail "the replaced set does not check"
no_temporaries "$tmp" "$tmp/run"
rm "$tmp/run/notes.txt"
cp -r "$tmp/run" "$tmp/second"

# --- nest run failing after placing: the previous set stays whole, nothing else is left. ------
expect_failure "nest run: --virtual-stages: the interleaved schedule needs at least 2 virtual stages (got \"1\"; expected an integer >= 2)" \
  "$nest" run "${run_args[@]}" --force --schedule interleaved --virtual-stages 1 --output-dir "$tmp/run"
same_set "$tmp/run" "$tmp/second" || fail "a run that failed after placing changed the set"
no_temporaries "$tmp" "$tmp/run"
expect_failure "nest run: --virtual-stages: the interleaved schedule needs at least 2 virtual stages (got \"1\"; expected an integer >= 2)" \
  "$nest" run "${run_args[@]}" --schedule interleaved --virtual-stages 1 --output-dir "$tmp/new"
[ -e "$tmp/new" ] && fail "a failed run created its output folder"

# --- A full disk, as a file-size limit (SIGXFSZ is ignored by nest: the write fails). ---------
# A limit halfway between run.h5 and the larger trace.json lets the HDF5 through and stops the
# trace (both measured from the set just written, so the test follows the files' sizes).
# One process per device (--all-devices) makes the trace the larger file.
"$nest" run "${run_args[@]}" --buckets 3 --all-devices --output-dir "$tmp/sizes" >/dev/null 2>&1 ||
  fail "the sizing run"
h5_bytes=$(stat -c %s "$tmp/sizes/run.h5")
trace_bytes=$(stat -c %s "$tmp/sizes/trace.json")
[ "$trace_bytes" -gt $((h5_bytes + 8192)) ] || fail "the test needs trace.json larger than run.h5"
between=$(((h5_bytes + trace_bytes) / 2 / 1024))
limited() {
  local blocks=$1
  shift
  (
    ulimit -f "$blocks"
    exec "$@"
  )
}
expect_failure "nest run: $tmp/run/trace.json: cannot write the output file: File too large" \
  limited "$between" "$nest" run "${run_args[@]}" --force --buckets 3 --all-devices --output-dir "$tmp/run"
same_set "$tmp/run" "$tmp/second" || fail "a full disk in nest run changed the set"
no_temporaries "$tmp" "$tmp/run"
cp "$tmp/second/run.h5" "$tmp/s.h5"
cp "$tmp/second/trace.json" "$tmp/s.json"
expect_failure "nest simulate: $tmp/s.json: cannot write the output file: File too large" \
  limited "$between" "$nest" simulate --plan "$tmp/second/plan.yaml" -o "$tmp/s.h5" --trace "$tmp/s.json" --buckets 3 --all-devices
cmp -s "$tmp/s.h5" "$tmp/second/run.h5" || fail "simulate replaced run.h5 although the trace failed"
cmp -s "$tmp/s.json" "$tmp/second/trace.json" || fail "a full disk damaged the previous trace"
expect_failure "nest simulate: $tmp/s.h5: cannot write the output file: File too large" \
  limited 100 "$nest" simulate --plan "$tmp/second/plan.yaml" -o "$tmp/s.h5"
cmp -s "$tmp/s.h5" "$tmp/second/run.h5" || fail "a full disk damaged the previous run.h5"
mkdir -p "$tmp/pp" # beside second/, so that the copy's relative input paths hold
cp "$tmp/second/plan.yaml" "$tmp/pp/p.yaml"
expect_failure "nest place: $tmp/pp/p.yaml: cannot write the output file: File too large" \
  limited 1 "$nest" place "${run_args[@]}" -o "$tmp/pp/p.yaml"
cmp -s "$tmp/pp/p.yaml" "$tmp/second/plan.yaml" || fail "a full disk damaged the previous plan"
no_temporaries "$tmp"

# The sweep table: a limit just below the finished results.h5 (each row adds ~0.5 KB) stops
# the sweep at its third or fourth row; the files before stay whole and --resume (with room
# again) completes them to the bytes of an uninterrupted sweep.
{
  rail_study_head "$src" full
  cat <<YAML
    micro_batches: [1]
sweep:
  product:
    devices: [16, 32]
    topology.nic_bandwidth: [12.5 GB/s, 50 GB/s]
YAML
} >"$tmp/full.yaml"
"$nest" sweep "$tmp/full.yaml" --output "$tmp/sw-clean" --progress never >/dev/null || fail "sweep"
kib=$((($(stat -c %s "$tmp/sw-clean/results.h5") - 1) / 1024))
expect_failure "nest sweep: $tmp/sw/results.h5: cannot write the output file: File too large" \
  limited "$kib" "$nest" sweep "$tmp/full.yaml" --output "$tmp/sw" --progress never
/usr/bin/python3 - "$tmp/sw/results.h5" <<'PY' || fail "the sweep's results.h5 after a full disk is not whole"
import sys, h5py
with h5py.File(sys.argv[1]) as f:
    assert 1 <= len(f["/results"]) < 4, len(f["/results"])
PY
no_temporaries "$tmp/sw"
"$nest" sweep "$tmp/full.yaml" --output "$tmp/sw" --resume --progress never >/dev/null || fail "resume"
cmp -s "$tmp/sw/results.h5" "$tmp/sw-clean/results.h5" || fail "resumed results.h5 differs"
cmp -s "$tmp/sw/results.csv" "$tmp/sw-clean/results.csv" || fail "resumed results.csv differs"

# A real full disk (ENOSPC) on a 256 KiB tmpfs, where user namespaces allow mounting one.
if unshare -rm true 2>/dev/null; then
  cat >"$tmp/enospc.sh" <<'SH'
set -u
dir=$1 nest=$2 plan=$3 good=$4
mount -t tmpfs -o size=256k tmpfs "$dir" || exit 9
cp "$good/summary.csv" "$dir/s.csv"
# --all-devices: every device's rows, a file larger than the 256 KiB (one timeline per class
# would fit).
"$nest" simulate --plan "$plan" -o "$dir/s.h5" --csv "$dir/s.csv" --all-devices 2>"$dir/err" >/dev/null
echo "status $?"
cat "$dir/err"
cmp -s "$dir/s.csv" "$good/summary.csv" && echo "csv kept"
ls -A "$dir"
SH
  mkdir "$tmp/tmpfs"
  got=$(unshare -rm bash "$tmp/enospc.sh" "$tmp/tmpfs" "$nest" "$tmp/second/plan.yaml" "$tmp/second")
  expected="status 2
nest simulate: $tmp/tmpfs/s.h5: cannot write the output file: No space left on device
csv kept
err
s.csv"
  [ "$got" = "$expected" ] || fail "ENOSPC on tmpfs: got: $got"
else
  echo "note: no user namespace here; the tmpfs (ENOSPC) case is covered by the size limit"
fi

# --- Outputs that are inputs, or each other, are refused before any work. --------------------
expect_failure "nest simulate: --output: the output would replace the input --plan (got \"$tmp/pp/p.yaml\"; expected a file that is not an input)" \
  "$nest" simulate --plan "$tmp/pp/p.yaml" -o "$tmp/pp/p.yaml"
cmp -s "$tmp/pp/p.yaml" "$tmp/second/plan.yaml" || fail "the refused simulate changed the plan"
expect_failure "nest simulate: --trace: the same file as --output (got \"$tmp/x\"; expected a file of its own for each output)" \
  "$nest" simulate --plan "$tmp/pp/p.yaml" -o "$tmp/x" --trace "$tmp/x" --csv "$tmp/x"
expect_failure "nest simulate: --output: the output would replace the input inputs.topology (got \"./topologies/h100_rail_1024.yaml\"; expected a file that is not an input)" \
  "$nest" simulate --plan "$tmp/pp/p.yaml" -o ./topologies/h100_rail_1024.yaml
expect_failure "nest simulate: --csv: the output would replace the input inputs.model (got \"workloads/models/llama2-7b.yaml\"; expected a file that is not an input)" \
  "$nest" simulate --plan "$tmp/pp/p.yaml" -o "$tmp/y.h5" --csv workloads/models/llama2-7b.yaml
[ -e "$tmp/x" ] && fail "a refused simulate wrote $tmp/x"

# --- A planted symlink under the old predictable temporary name is not followed. ------------
echo precious >"$tmp/victim"
# `exec` keeps the shell's pid, so $$ is the pid nest runs as: <out>.tmp.<pid> was the name.
sh -c 'ln -s "$1" "$2.tmp.$$" && ln -s "$1" "$2.nest-tmp-0123456789abcdef" && exec "$3" simulate --plan "$4" -o "$2"' \
  _ "$tmp/victim" "$tmp/sym.h5" "$nest" "$tmp/pp/p.yaml" >/dev/null 2>&1 || fail "simulate beside symlinks"
[ "$(cat "$tmp/victim")" = precious ] || fail "a planted symlink was written through"
[ -L "$tmp/sym.h5.nest-tmp-0123456789abcdef" ] && fail "a planted name in the pattern was kept"
[ "$(head -c 4 "$tmp/sym.h5" | tail -c 3)" = HDF ] || fail "no run file written beside the symlinks"
rm -f "$tmp"/sym.h5.tmp.*

# --- SIGINT and SIGTERM for real: the staging folder goes, the previous set stays. -----------
big=(--model gpt3-175b --accelerator h100 --topology topologies/h100_rail_1024.yaml --baselines none)
for sig in INT TERM; do
  background "$nest" run "${big[@]}" --force --output-dir "$tmp/run" >/dev/null 2>&1
  pid=$!
  wait_for "$tmp/run.nest-tmp-*" || fail "SIG$sig: no staging folder appeared"
  kill -s "$sig" "$pid"
  wait "$pid"
  status=$?
  want=$([ "$sig" = INT ] && echo 130 || echo 143)
  [ "$status" -eq "$want" ] || fail "SIG$sig: exit status $status, expected $want"
  same_set "$tmp/run" "$tmp/second" || fail "SIG$sig changed the previous set"
  no_temporaries "$tmp" "$tmp/run"
done

# --- SIGKILL leaves the staging folder; the next run of the same folder removes it. ---------
background "$nest" run "${big[@]}" --output-dir "$tmp/killed" >/dev/null 2>&1
pid=$!
wait_for "$tmp/killed.nest-tmp-*" || fail "SIGKILL: no staging folder appeared"
{
  kill -KILL "$pid"
  wait "$pid"
} 2>/dev/null
compgen -G "$tmp/killed.nest-tmp-*" >/dev/null || fail "SIGKILL: the staging folder is gone?"
[ -e "$tmp/killed" ] && fail "SIGKILL: a partial output folder appeared"
"$nest" run "${run_args[@]}" --output-dir "$tmp/killed" >/dev/null 2>&1 || fail "run after SIGKILL"
no_temporaries "$tmp"
# A stale file temporary (a simulate killed while writing) is removed by the next write.
touch "$tmp/s.h5.nest-tmp-00000000deadbeef"
"$nest" simulate --plan "$tmp/pp/p.yaml" -o "$tmp/s.h5" >/dev/null 2>&1 || fail "simulate"
no_temporaries "$tmp"

# --- A sweep folder is locked while a sweep writes into it. ----------------------------------
{
  rail_study_head "$src" lock
  printf '    micro_batches: [1]\nsweep:\n  points:\n'
  printf '    - {devices: 256, seed: %s}\n' 1 2
} >"$tmp/lock.yaml"
background "$nest" sweep "$tmp/lock.yaml" --output "$tmp/locked" --progress never >/dev/null 2>&1
pid=$!
wait_for "$tmp/locked/.nest-lock" || fail "no lock file appeared"
# The holder writes its pid just after taking the lock: wait for it, then freeze the holder.
for _ in $(seq 2000); do [ -s "$tmp/locked/.nest-lock" ] && break; sleep 0.01; done
kill -STOP "$pid" # holds the lock for as long as the test needs
expect_failure "nest sweep: --output: nest process $pid is writing into this folder (got \"$tmp/locked\"; expected a folder no other sweep is using (the lock: $tmp/locked/.nest-lock))" \
  "$nest" sweep "$tmp/lock.yaml" --output "$tmp/locked" --force --progress never
kill -CONT "$pid"
wait "$pid" || fail "the first sweep failed"
[ -e "$tmp/locked/.nest-lock" ] && fail "the lock file outlived its sweep"
# A lock left by SIGKILL is stale (its flock went with the process): the next sweep takes it.
background "$nest" sweep "$tmp/lock.yaml" --output "$tmp/locked2" --progress never >/dev/null 2>&1
pid=$!
wait_for "$tmp/locked2/.nest-lock" || fail "no lock file appeared (2)"
{
  kill -KILL "$pid"
  wait "$pid"
} 2>/dev/null
[ -e "$tmp/locked2/.nest-lock" ] || fail "SIGKILL removed the lock file?"
"$nest" sweep "$tmp/lock.yaml" --output "$tmp/locked2" --resume --progress never >/dev/null ||
  fail "a stale lock refused the next sweep"
cmp -s "$tmp/locked/results.csv" "$tmp/locked2/results.csv" || fail "resumed after a stale lock"
exit $failed
