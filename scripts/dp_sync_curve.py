#!/usr/bin/python3
"""The placer's data-parallel sync of GPT-3 175B on h100_rail_1024 against the device count.

    /usr/bin/python3 scripts/dp_sync_curve.py [--nest build/nest] [--topology h100_rail_1024]
        [--devices 128,256,512,1024] > table.md

Runs `nest place --model gpt3-175b --accelerator h100 --devices N --baselines none -o plan`
for each N and prints one Markdown row per N: the plan (t, stages, d, ZeRO, order), the stage
with the longest sync, its gradient bytes per device (= its parameter bytes, 2 B per
parameter), the placer's sync time, and the bus bandwidth that time implies for a ring over d
replicas, busbw = 2(d-1)/d x bytes / sync. A sync that grows only as a ring's (n-1)/n predicts
keeps busbw constant (or higher where the replicas of a group share a node); contention or
crossing rails would make it fall. Needs Debian's python3-yaml.
"""

import argparse
import os
import subprocess
import sys
import tempfile

import yaml


def row(nest, topology, n, folder):
    plan_path = os.path.join(folder, f"plan{n}.yaml")
    subprocess.run([nest, "place", "--model", "gpt3-175b", "--accelerator", "h100",
                    "--topology", topology, "--devices", str(n), "--baselines", "none",
                    "-o", plan_path], check=True, stdout=subprocess.DEVNULL)
    with open(plan_path) as f:
        plan = yaml.safe_load(f)

    def seconds(text):
        return float(str(text).split()[0])

    def nbytes(text):
        return float(str(text).split()[0])

    stages = plan["partition"]
    worst = max(range(len(stages)), key=lambda p: seconds(stages[p]["data_parallel_sync"]))
    sync = seconds(stages[worst]["data_parallel_sync"])
    weights = nbytes(stages[worst]["memory"]["weights"])
    d = plan["data_parallel"]
    busbw = 2 * (d - 1) / d * weights / sync if sync > 0 else float("nan")
    v = plan["variant"]
    return (f"| {n} | {v['tensor_parallel']} | {plan['stages']} | {d} | {plan['zero_stage']} | "
            f"{plan['placement_order']} | {worst} | {weights / 1e9:.2f} | {sync * 1e3:.1f} | "
            f"{2 * (d - 1) / d:.4f} | {busbw / 1e9:.1f} | "
            f"{seconds(plan['predicted']['iteration_time']):.3f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nest", default="build/nest")
    p.add_argument("--topology", default="h100_rail_1024")
    p.add_argument("--devices", default="128,256,384,512,640,768,896,1024")
    a = p.parse_args()
    print("| GPUs | t | stages | d | ZeRO | order | stage | gradient GB/device | "
          "DP sync (ms) | 2(d-1)/d | implied busbw (GB/s) | iteration (s) |")
    print("|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        for n in a.devices.split(","):
            try:
                print(row(a.nest, a.topology, int(n), folder))
            except subprocess.CalledProcessError as e:
                sys.exit(f"dp_sync_curve.py: nest place --devices {n} failed ({e.returncode})")


if __name__ == "__main__":
    main()
