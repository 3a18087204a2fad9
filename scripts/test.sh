#!/usr/bin/env bash
# Installs what is missing, builds NEST with warnings as errors and runs every test suite
# (unit, cli, golden, validation). Exits non-zero on any failure.
#
#   scripts/test.sh                 build and test this working tree
#   scripts/test.sh --fresh-clone   clone the committed HEAD into an empty temporary folder and
#                                   build and test it there (what CI runs: it proves that
#                                   nothing in the build or the tests reads outside the
#                                   repository)
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
scripts/build.sh
ctest --test-dir "${NEST_BUILD_DIR:-build}" -j "${NEST_JOBS:-2}" --output-on-failure --timeout 600
