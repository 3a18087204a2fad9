#!/usr/bin/env bash
# The main job on a bundled example: NEST places GPT-3 175B on the 1,024-GPU H100
# rail-optimized cluster, replays one training iteration on the network simulator and draws
# it. Writes results/example/ (plan.yaml, run.h5, trace.json, summary.csv, timeline.png,
# memory.png) and prints the plan and the replayed summary.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh >/dev/null
out=results/example
mkdir -p "$out"
# --force: the folder holds the committed plan, summary and plots of the last run; nest run
# replaces its four files (and keeps the plots, which are redrawn below).
build/nest run --model gpt3-175b --accelerator h100 --topology topologies/h100_rail_1024.yaml \
  --output-dir "$out" --force
/usr/bin/python3 scripts/plot_timeline.py "$out/run.h5" "$out/timeline.png"
/usr/bin/python3 scripts/plot_memory.py "$out/run.h5" "$out/memory.png"
echo "wrote $out/timeline.png"
echo "wrote $out/memory.png"
echo "open $out/trace.json in https://ui.perfetto.dev: a process per stage replica, memory and link counters"
