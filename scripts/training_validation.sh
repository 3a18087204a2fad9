#!/usr/bin/env bash
# The measured training runs against NEST: every row predicted and replayed on the Selene-like
# topology, the fit of the A100's fitted constants, one layer against Korthikanti Table 4, and
# results/training_validation.md + .png. Usage: scripts/training_validation.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build="${1:-${NEST_BUILD_DIR:-build}}"
cmake --build "$build" -j "${NEST_JOBS:-2}" --target bench_training_validation >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$build/tests/bench/bench_training_validation" table "$tmp/table.tsv" >"$tmp/table.txt"
"$build/tests/bench/bench_training_validation" fit >"$tmp/fit.txt"
"$build/tests/bench/bench_training_validation" table4 >"$tmp/layer.txt"
cp "$tmp/table.tsv" results/training_validation.tsv
/usr/bin/python3 scripts/plot_validation.py "$tmp/table.tsv" "$tmp/fit.txt" "$tmp/layer.txt" results
tail -3 "$tmp/table.txt"
