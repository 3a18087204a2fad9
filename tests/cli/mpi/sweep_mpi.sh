#!/usr/bin/env bash
# `mpirun -np 2 nest sweep` (NEST built with -DNEST_WITH_MPI=ON) writes the same bytes as one
# process, and so do 3 ranks with 2 threads each; a resumed MPI sweep too.
# Usage: sweep_mpi.sh <nest> <source-dir> <mpirun>
set -u
nest="$1"
src="$2"
mpirun="$3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
# shellcheck source=../lib/common.sh
source "$src/tests/cli/lib/common.sh"
# As root, OpenMPI wants --allow-run-as-root; with 2 cores, 3 ranks need --oversubscribe.
launch=("$mpirun" --oversubscribe)
[ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)

{
  rail_study_head "$src" mpi
  cat <<YAML
    micro_batches: [1]
defaults:
  topology: rail
sweep:
  product:
    devices: [1, 16, 32, 64]
    topology.nic_bandwidth: [12.5 GB/s, 50 GB/s]
    spine_oversubscription: [1, 4]
YAML
} >"$tmp/s.yaml"

"$nest" sweep "$tmp/s.yaml" --output "$tmp/one" --progress never >/dev/null || fail "one process"
[ "$(wc -l <"$tmp/one/results.csv")" -eq 17 ] || fail "16 rows expected"

out=$("${launch[@]}" -np 2 "$nest" sweep "$tmp/s.yaml" --output "$tmp/two" --progress never)
status=$?
[ "$status" -eq 0 ] || fail "mpirun -np 2: exit $status"
echo "$out" | grep -q '^sweep mpi: 16 points, 0 resumed, 16 evaluated on 2 processes x 1 thread in ' ||
  fail "report of 2 ranks: $out"
echo "$out" | grep -Eq '^points per rank: rank 0: [1-9][0-9]*, rank 1: [1-9][0-9]*$' ||
  fail "both ranks must evaluate points: $out"
cmp -s "$tmp/one/results.csv" "$tmp/two/results.csv" || fail "CSV differs with 2 ranks"
cmp -s "$tmp/one/results.h5" "$tmp/two/results.h5" || fail "HDF5 differs with 2 ranks"

"${launch[@]}" -np 3 "$nest" sweep "$tmp/s.yaml" --output "$tmp/three" --threads 2 \
  --progress never >/dev/null || fail "mpirun -np 3 --threads 2"
cmp -s "$tmp/one/results.csv" "$tmp/three/results.csv" || fail "CSV differs with 3 ranks x 2 threads"
cmp -s "$tmp/one/results.h5" "$tmp/three/results.h5" || fail "HDF5 differs with 3 ranks x 2 threads"

"${launch[@]}" -np 2 "$nest" sweep "$tmp/s.yaml" --output "$tmp/part" --stop-after 5 \
  --progress never >/dev/null || fail "mpirun -np 2 --stop-after 5"
[ "$(wc -l <"$tmp/part/results.csv")" -eq 6 ] || fail "stop-after 5 under MPI"
"${launch[@]}" -np 2 "$nest" sweep "$tmp/s.yaml" --output "$tmp/part" --resume \
  --progress never >/dev/null || fail "mpirun -np 2 --resume"
cmp -s "$tmp/one/results.csv" "$tmp/part/results.csv" || fail "CSV differs after an MPI resume"
cmp -s "$tmp/one/results.h5" "$tmp/part/results.h5" || fail "HDF5 differs after an MPI resume"

# Rank 0 refuses an occupied output folder and every rank stops (no rank waits forever). Each
# rank prints the reason on one line with one write: rank 0 its own, rank 1 "rank 0 stopped: "
# and rank 0's. mpirun ends the job when the first rank exits, so either line may be the only one.
err=$("${launch[@]}" -np 2 "$nest" sweep "$tmp/s.yaml" --output "$tmp/two" 2>&1 >/dev/null)
status=$?
[ "$status" -ne 0 ] || fail "occupied output under MPI: exit 0"
reason="--output: the output folder already holds results (got \"$tmp/two\"; expected --resume to continue them or --force to start over)"
echo "$err" | grep -qxF -e "nest sweep: $reason" -e "nest sweep: rank 0 stopped: $reason" ||
  fail "occupied output under MPI: $err"
exit $failed
