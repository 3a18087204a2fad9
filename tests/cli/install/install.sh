#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, then from outside the source tree and without
# NEST_HOME: the installed `nest` finds its bundled files (list, place by name, validate), and
# the example program builds against the installed package (find_package(nest) + nest::nest)
# and prints what the in-tree build of the same example prints.
# Usage: install.sh <build-dir> <source-dir> <in-tree place_and_simulate>
set -u
build="$1"
src="$2"
example="$3"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }
unset NEST_HOME
prefix="$tmp/prefix"
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 ||
  { fail "cmake --install: $(tail -5 "$tmp/install.log")"; exit 1; }
for f in bin/nest share/nest/topologies/h100_rail_1024.yaml share/nest/workloads/models/gpt3-175b.yaml \
  share/nest/studies/example.yaml share/nest/scripts/plot_timeline.py \
  share/nest/validation/reference/nest-artifact/expected-nest.tsv include/nest/job/job.h \
  lib/cmake/nest/nestConfig.cmake; do
  [ -e "$prefix/$f" ] || fail "not installed: $f"
done

cd "$tmp" || exit 1
"$prefix/bin/nest" list topologies >"$tmp/list.out" 2>&1 || fail "nest list: $(cat "$tmp/list.out")"
grep -q "^  h100_rail_1024  *$prefix/share/nest/topologies/h100_rail_1024.yaml$" "$tmp/list.out" ||
  fail "installed topologies not listed: $(cat "$tmp/list.out")"
"$prefix/bin/nest" place --model llama2-7b --accelerator h100 --topology h100_rail_1024 \
  --devices 16 --baselines none -o "$tmp/plan.yaml" >"$tmp/place.out" 2>&1 ||
  fail "installed nest place: $(cat "$tmp/place.out")"
"$prefix/bin/nest" simulate --plan "$tmp/plan.yaml" -o "$tmp/run.h5" >"$tmp/sim.out" 2>&1 ||
  fail "installed nest simulate: $(cat "$tmp/sim.out")"
"$prefix/bin/nest" validate >"$tmp/validate.out" 2>&1 || fail "installed nest validate: $(tail -3 "$tmp/validate.out")"

# The Python package, installed where /usr/bin/python3 finds the prefix's packages: the same
# figure as the installed nest place.
pkg=$(ls -d "$prefix"/lib/python3*/dist-packages 2>/dev/null | head -1)
if [ -n "$pkg" ]; then
  got=$(PYTHONPATH="$pkg" /usr/bin/python3 -c "import nest; print(repr(nest.Job(model='llama2-7b', accelerator='h100', topology='h100_rail_1024', devices=16, baselines=[]).place().iteration_time_s))" 2>&1) ||
    fail "installed python module: $got"
  want=$("$prefix/bin/nest" place --model llama2-7b --accelerator h100 --topology h100_rail_1024 \
    --devices 16 --baselines none --json | /usr/bin/python3 -c "import json,sys; print(repr(json.load(sys.stdin)['predicted']['iteration_time_s']))")
  [ "$got" = "$want" ] || fail "installed python module: $got, nest place: $want"
  [ -z "$(ls "$pkg/nest/_paths.py" 2>/dev/null)" ] || fail "the build tree's _paths.py was installed"
fi

# The example, as a user's project: a copy of examples/ configured against the prefix.
cp -r "$src/examples" "$tmp/app"
cmake -S "$tmp/app" -B "$tmp/app-build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
  >"$tmp/app.log" 2>&1 && cmake --build "$tmp/app-build" -j2 >>"$tmp/app.log" 2>&1 ||
  { fail "example against the installed package: $(grep -m3 -i error "$tmp/app.log")"; exit 1; }
"$tmp/app-build/place_and_simulate" >"$tmp/installed.out" 2>&1 ||
  fail "installed example: $(cat "$tmp/installed.out")"
"$example" >"$tmp/in-tree.out" 2>&1 || fail "in-tree example: $(cat "$tmp/in-tree.out")"
cmp -s "$tmp/installed.out" "$tmp/in-tree.out" ||
  fail "the installed example differs: $(cat "$tmp/installed.out") vs $(cat "$tmp/in-tree.out")"
grep -q '^plan: t [0-9]*, [0-9]* stages, [0-9]* replicas, ZeRO-[0-3] on 64 of 64 devices$' \
  "$tmp/installed.out" || fail "example output: $(cat "$tmp/installed.out")"
exit $failed
