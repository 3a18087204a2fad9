#!/usr/bin/env bash
# Installs what is missing, builds NEST with warnings as errors and runs every test suite
# (unit, cli, golden, validation). Exits non-zero on any failure.
#
#   scripts/test.sh                 build and test this working tree
#   scripts/test.sh --fresh-clone   clone the committed HEAD into an empty temporary folder and
#                                   build and test it there (what CI runs: it proves that
#                                   nothing in the build or the tests reads outside the
#                                   repository)
#   scripts/test.sh --sanitize      build with clang, AddressSanitizer (leak detection on) and
#                                   UndefinedBehaviorSanitizer (-fno-sanitize-recover: any report
#                                   fails its test) and the libFuzzer targets into
#                                   ${NEST_BUILD_DIR:-build-sanitize}, then run the whole suite
#                                   and each fuzzer for NEST_FUZZ_SECONDS (default 5) seconds
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--fresh-clone" ]; then
  scripts/setup.sh
  parent=$(mktemp -d)
  trap 'rm -rf "$parent"' EXIT
  git clone --quiet --no-hardlinks "$PWD" "$parent/nest"
  echo "test: fresh clone of $(git rev-parse --short HEAD) in $parent/nest (nothing beside it)" >&2
  # ccache keys on paths relative to the source tree, so the clone reuses this tree's objects.
  NEST_BUILD_DIR=build "$parent/nest/scripts/test.sh"
  exit 0
fi
if [ "${1:-}" = "--sanitize" ]; then
  # clang for libFuzzer and for float-to-integer overflow checks (GCC's UBSan misses the
  # conversions of std::ceil's results); the default build does not need either package.
  scripts/setup.sh clang libclang-rt-14-dev
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"
  build="${NEST_BUILD_DIR:-build-sanitize}"
  CC=clang CXX=clang++ cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNEST_WERROR=ON \
    -DNEST_WITH_MPI=ON -DNEST_SANITIZE=ON -DNEST_FUZZ=ON -DNEST_BUILD_BENCH=OFF -DNEST_WITH_PYTHON=OFF \
    -DNEST_FUZZ_SECONDS="${NEST_FUZZ_SECONDS:-5}" >/dev/null
  cmake --build "$build" -j "${NEST_JOBS:-2}"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  # The command-line tests cap their address space unless told that a sanitizer's shadow
  # memory needs it.
  export NEST_SANITIZED=1
  asan="abort_on_error=1:strict_string_checks=1"
  # Not here: the Python module (a sanitized library inside an unsanitized interpreter needs the
  # runtime preloaded) and the install test (it builds the example against the installed static
  # libraries without the sanitizer runtime); the default suite runs both.
  ASAN_OPTIONS="detect_leaks=1:$asan" ctest --test-dir "$build" -j "${NEST_JOBS:-2}" -LE mpi \
    -E '^cli\.install$' --output-on-failure --timeout 1200 ${NEST_CTEST_ARGS:-}
  # Under mpirun, Open MPI's plugins are unloaded before the leak check runs, so what they keep
  # until exit cannot be told from NEST's by name: the MPI test runs without leak detection.
  ASAN_OPTIONS="detect_leaks=0:$asan" ctest --test-dir "$build" -L mpi --output-on-failure \
    --timeout 1200
  exit 0
fi
scripts/build.sh
ctest --test-dir "${NEST_BUILD_DIR:-build}" -j "${NEST_JOBS:-2}" --output-on-failure --timeout 600
