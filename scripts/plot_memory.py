#!/usr/bin/python3
"""Draws memory over time for the first device of each pipeline stage of a NEST run.

usage: /usr/bin/python3 scripts/plot_memory.py RUN.h5 OUT.png
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import h5py  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nest_h5  # noqa: E402

GIB = float(1 << 30)


def total_over_time(m, device):
    """Step function of the device's total bytes (all categories) over time."""
    sel = m["device"] == device
    times, categories, values = m["time"][sel], m["category"][sel], m["bytes"][sel]
    order = np.argsort(times, kind="stable")
    level = {}
    xs, ys = [], []
    for i in order:
        level[categories[i]] = values[i]
        xs.append(times[i])
        ys.append(sum(level.values()))
    return np.array(xs), np.array(ys)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("out")
    args = parser.parse_args()
    with h5py.File(args.run, "r") as f:
        m = nest_h5.memory_trace(f)
        t = nest_h5.timeline(f)
        iteration = float(f["/summary"].attrs["iteration_time_s"])
    first_of_stage = {}
    for d, s in zip(t["device"], t["stage"]):
        first_of_stage.setdefault(int(s), int(d))
    fig, ax = plt.subplots(figsize=(10, 4.5))
    for stage, device in sorted(first_of_stage.items()):
        xs, ys = total_over_time(m, device)
        if len(xs) == 0:
            continue
        xs = np.append(xs, iteration)
        ys = np.append(ys, ys[-1])
        ax.step(xs, ys / GIB, where="post", label=f"stage {stage} (dev {device})")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("memory (GiB)")
    ax.set_title(f"{os.path.basename(args.run)}: memory per stage")
    ax.legend(fontsize="small", ncol=2)
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
