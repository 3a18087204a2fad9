#!/usr/bin/env bash
# Installs what is missing, builds NEST with warnings as errors and runs every test suite
# (unit, cli, golden, validation). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
ctest --test-dir "${NEST_BUILD_DIR:-build}" -j "${NEST_JOBS:-2}" --output-on-failure --timeout 600
