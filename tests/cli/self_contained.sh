#!/usr/bin/env bash
# The repository stands alone: no file of the build, the tests, the benchmarks or the tool
# names a folder outside it (the shared reference folder of the team's workspace included), and
# no build definition points outside the source tree. `scripts/test.sh --fresh-clone` (CI) runs
# the whole suite in a clone with nothing beside it; this test catches a regression in place.
# Usage: self_contained.sh <nest> <source-dir>
set -u
src="$2"
failed=0
fail() { echo "FAIL $*"; failed=1; }
cd "$src" || exit 1
dirs=(CMakeLists.txt cmake src include tests scripts topologies workloads studies examples)
present=()
for d in "${dirs[@]}"; do [ -e "$d" ] && present+=("$d"); done
# Markdown may tell the story of where a file came from; code and data may not read from there.
hits=$(grep -rIl --exclude='*.md' --exclude='self_contained.sh' -e '\.\./shared' "${present[@]}")
[ -z "$hits" ] || fail "files that read outside the repository: $hits"
hits=$(grep -rIn --include='*.cc' --include='*.h' --include='*.cmake' --include='CMakeLists.txt' \
  -e 'PROJECT_SOURCE_DIR}/\.\.' -e 'CMAKE_SOURCE_DIR}/\.\.' "${present[@]}")
[ -z "$hits" ] || fail "build definitions that point above the source tree: $hits"
# Every data file the tests name through NEST_REFERENCE_DIR is in the repository.
for f in nest-artifact/expected-nest.tsv measured/training-runs.tsv \
  measured/nccl-allreduce-dgx-h100.tsv README.md measured/README.md; do
  [ -f "tests/validation/reference/$f" ] || fail "missing tests/validation/reference/$f"
done
exit $failed
