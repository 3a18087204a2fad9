#!/usr/bin/env bash
# A NEST built without MPI refuses to run as several ranks (each would write the same files):
# the ranks exit 2 with one exact line. Usage: sweep_mpi_unavailable.sh <nest> <source-dir> <mpirun>
set -u
nest="$1"
src="$2"
mpirun="$3"
launch=("$mpirun" --oversubscribe)
[ "$(id -u)" -eq 0 ] && launch+=(--allow-run-as-root)
err=$("${launch[@]}" -np 2 "$nest" sweep "$src/studies/example.yaml" --output "$(mktemp -d)/out" 2>&1 >/dev/null)
status=$?
[ "$status" -ne 0 ] || { echo "FAIL exit status 0"; exit 1; }
expected='nest sweep: started as 2 MPI ranks, but this nest was built without MPI (expected a build configured with -DNEST_WITH_MPI=ON, or a single process)'
# Each rank prints it, but mpirun may end one rank before it prints: at least once.
n=$(echo "$err" | grep -cxF "$expected")
[ "$n" -ge 1 ] || { printf 'FAIL expected the line:\n%s\ngot:\n%s\n' "$expected" "$err"; exit 1; }
exit 0
