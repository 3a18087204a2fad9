#!/usr/bin/env bash
# Configures and builds NEST (Release, warnings as errors) into ${NEST_BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
"$PWD/scripts/setup.sh"
# ccache keys on paths relative to the source tree: a fresh clone elsewhere reuses the objects.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
build="${NEST_BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DNEST_WERROR=ON -DNEST_WITH_MPI=ON "$@" >/dev/null
cmake --build "$build" -j "${NEST_JOBS:-2}"
