#!/usr/bin/env bash
# Every command answers --json with one JSON object, and its top-level keys are exactly the ones
# listed here (the README's "JSON output" section documents the same names): seconds end in
# `_s`, bytes in `_bytes`, rates in `_per_s`, as in plan files. A key added or renamed in a
# command must be added here too.
# Usage: json_keys.sh <nest> <source-dir>
set -u
nest="$1"
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
job=(--profile gpt3-175b-h100 --rules nest-artifact --devices 128 --baselines manual)
small=(--model llama2-7b --accelerator h100 --topology h100_rail_1024 --devices 16 --baselines none)
cat >"$tmp/study.yaml" <<YAML
kind: study
topologies: {rail: {file: small_explicit}}
workloads: {llama: {model: llama2-7b, accelerator: h100}}
placer: {baselines: []}
sweep: {points: [{topology: rail, workload: llama, devices: 4}]}
YAML

run() {  # name, then the command; stores stdout in $tmp/<name>.json
  local name="$1"
  shift
  "$@" >"$tmp/$name.json" 2>"$tmp/$name.err" || { echo "FAIL $name: $(cat "$tmp/$name.err")"; }
}
run topology_describe "$nest" topology describe h100_rail_1024 --json
run topology_describe_nodes "$nest" topology describe small_explicit --nodes --json
run topology_validate "$nest" topology validate small_explicit --json
run collective "$nest" collective --topology small_explicit --op allreduce --size 1MiB --json
run profile "$nest" profile --model gpt3-175b --accelerator h100 --json
run place "$nest" place "${job[@]}" --json
run simulate_plan "$nest" place "${small[@]}" -o "$tmp/plan.yaml"
run simulate "$nest" simulate --plan "$tmp/plan.yaml" -o "$tmp/run.h5" --json
run simulate_chakra "$nest" simulate --plan "$tmp/plan.yaml" -o "$tmp/c.h5" --chakra "$tmp/et"
run profile_chakra "$nest" profile --chakra "$tmp/et" --json
run run "$nest" run "${small[@]}" --output-dir "$tmp/run" --json
run sweep "$nest" sweep "$tmp/study.yaml" --output "$tmp/sweep" --json
run sweep_dry "$nest" sweep "$tmp/study.yaml" --dry-run --json
run validate "$nest" validate --json
run list "$nest" list --json

/usr/bin/python3 - "$tmp" <<'PY'
import json, os, sys
tmp = sys.argv[1]
plan = ["kind", "nest_version", "inputs", "variant", "stages", "data_parallel", "zero_stage",
        "recompute", "virtual_stages", "placement_order", "microbatches", "devices_used",
        "devices_available",
        "predicted", "partition", "collectives", "baselines"]
expected = {
    "topology_describe": ["name", "kind", "devices", "switches", "links", "directed_links",
                          "diameter_hops", "injection_bytes_per_s", "bisection_bytes_per_s",
                          "bisection_method", "domain_sizes"],
    "topology_describe_nodes": ["name", "kind", "devices", "switches", "links", "directed_links",
                                "diameter_hops", "injection_bytes_per_s", "bisection_bytes_per_s",
                                "bisection_method", "domain_sizes", "topology"],
    "topology_validate": ["file", "valid", "name", "kind", "devices", "switches", "links"],
    "collective": ["topology", "model", "op", "algorithm", "tuned", "protocol", "base_latency_s",
                   "ranks", "groups", "size_bytes", "chunks", "channels",
                   "levels", "level_algorithms", "simulated_s", "fastest_group_s", "closed_form_s",
                   "closed_form_latency_s", "closed_form_bandwidth_s", "closed_form_steps",
                   "difference_s", "algbw_bytes_per_s", "busbw_bytes_per_s", "flows", "events",
                   "method", "busiest_links"],
    "profile": ["model", "accelerator", "parameters", "sequence_length", "global_batch",
                "flops_per_iteration", "hbm_bytes", "peak_flops_per_s", "tensor_parallel",
                "sequence_parallel", "context_parallel", "expert_parallel", "micro_batch",
                "devices_per_replica", "microbatches", "layers", "variants"],
    "profile_chakra": ["folder", "ranks", "empty_ranks", "nodes", "dependencies", "groups",
                       "compute_max_s", "compute_min_s", "end_s", "send_bytes",
                       "collective_bytes", "stages"],
    "place": plan,
    "simulate": ["summary", "written"],
    "run": ["plan", "summary", "written"],
    "sweep": ["study", "points", "resumed", "evaluated", "ranks", "threads", "points_per_rank",
              "ok", "infeasible", "failed", "complete", "wall_s", "written"],
    "sweep_dry": ["study", "points"],
    "validate": ["cases", "total", "passed", "failed", "nest_table"],
    "list": ["topologies", "models", "accelerators", "profiles", "studies"],
}
nested = {
    ("place", "predicted"): ["iteration_time_s", "compute_s", "bubble_s", "collectives_s",
                             "transfers_s", "data_parallel_sync_s", "optimizer_s",
                             "optimizer_modeled", "sequences_per_second", "tokens_per_second",
                             "mfu", "memory_capacity_bytes"],
    ("simulate", "summary"): ["iteration_time_s", "estimate_s", "replay_error",
                              "sequences_per_second", "tokens_per_second", "mfu",
                              "bubble_fraction", "exposed_communication_s", "peak_memory_bytes"],
    # `nest run` on a topology verifies by replay (--verify 4 by default).
    ("run", "plan"): plan + ["verification"],
    ("topology_describe_nodes", "topology"): ["nodes", "links"],
}
# The rows of the tables (the first of each).
rows = {
    ("topology_describe_nodes", "nodes"): ["id", "name", "kind", "tier", "forwards"],
    ("topology_describe_nodes", "links"): ["src", "dst", "bandwidth_bytes_per_s", "latency_s"],
}
plan_collective = ["group", "stage", "op", "size_bytes", "group_size", "groups", "algorithm",
                   "protocol", "channels", "tuned", "time_s"]
ok = True
docs = {}
for name, keys in expected.items():
    try:
        docs[name] = json.load(open(os.path.join(tmp, name + ".json")))
    except Exception as e:
        print(f"FAIL {name}: not one JSON object ({e})")
        ok = False
        continue
    if list(docs[name]) != keys:
        print(f"FAIL {name}: keys {list(docs[name])}, expected {keys}")
        ok = False
for (name, key), keys in nested.items():
    got = list(docs.get(name, {}).get(key, {}))
    if got != keys:
        print(f"FAIL {name}.{key}: keys {got}, expected {keys}")
        ok = False
for (name, key), keys in rows.items():
    table = docs.get(name, {}).get("topology", {}).get(key) or [{}]
    if list(table[0]) != keys:
        print(f"FAIL {name}.topology.{key}[0]: keys {list(table[0])}, expected {keys}")
        ok = False
for name in ("run",):  # on the oracle (place's job is the nest-artifact's: no collectives)
    got = list((docs.get(name, {}).get("plan", {}).get("collectives") or [{}])[0])
    if got != plan_collective:
        print(f"FAIL {name}.plan.collectives[0]: keys {got}, expected {plan_collective}")
        ok = False
stage_keys = ["stage", "first_layer", "last_layer", "ranks", "forward_s", "backward_s"]
got = list((docs.get("profile_chakra", {}).get("stages") or [{}])[0])
if got != stage_keys:
    print(f"FAIL profile_chakra.stages[0]: keys {got}, expected {stage_keys}")
    ok = False
sys.exit(0 if ok else 1)
PY
