#!/usr/bin/python3
"""Draws the pipeline timeline of a NEST run: devices (rows) x time, tasks colored by kind.

usage: /usr/bin/python3 scripts/plot_timeline.py RUN.h5 OUT.png [--devices N] [--stream compute]
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

COLORS = {
    "forward": "#4c72b0",
    "backward": "#dd8452",
    "recompute": "#937860",
    "send_activation": "#55a868",
    "send_gradient": "#8c8c8c",
    "layer_collective": "#c44e52",
    "gradient_sync": "#8172b3",
    "optimizer": "#da8bc3",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run")
    parser.add_argument("out")
    parser.add_argument("--devices", type=int, default=32,
                        help="draw at most this many devices (the first device of each stage first)")
    parser.add_argument("--stream", default="compute", choices=["compute", "network", "all"])
    args = parser.parse_args()

    with h5py.File(args.run, "r") as f:
        t = nest_h5.timeline(f)
        iteration = float(f["/summary"].attrs["iteration_time_s"])
    keep = np.ones(len(t["device"]), dtype=bool)
    if args.stream != "all":
        keep &= t["stream"] == args.stream
    devices = np.unique(t["device"][keep])
    # One representative device per stage first, so that a big run still shows the pipeline.
    first_of_stage = {}
    for d, s in zip(t["device"][keep], t["stage"][keep]):
        first_of_stage.setdefault(int(s), int(d))
    shown = sorted(first_of_stage.values())
    for d in devices:
        if len(shown) >= args.devices:
            break
        if int(d) not in shown:
            shown.append(int(d))
    shown = sorted(shown[: args.devices])
    row_of = {d: i for i, d in enumerate(shown)}

    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.35 * len(shown) + 1.5)))
    for kind, color in COLORS.items():
        sel = keep & (t["kind"] == kind) & np.isin(t["device"], shown)
        if not sel.any():
            continue
        rows = [row_of[int(d)] for d in t["device"][sel]]
        ax.barh(rows, t["end"][sel] - t["start"][sel], left=t["start"][sel], height=0.8,
                color=color, label=kind, linewidth=0)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"dev {d}" for d in shown])
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_xlim(0, iteration)
    ax.set_title(f"{os.path.basename(args.run)}: one iteration, {iteration:.4g} s")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=4, frameon=False)
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
