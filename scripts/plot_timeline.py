#!/usr/bin/python3
"""Draws the pipeline timeline of a NEST run: devices (rows) x time, tasks colored by kind.

usage: /usr/bin/python3 scripts/plot_timeline.py RUN.h5 OUT.png [--devices N]
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
    parser.add_argument("--devices", type=int, default=0,
                        help="also draw further devices, up to this many rows "
                             "(default: the first device of each stage)")
    args = parser.parse_args()

    with h5py.File(args.run, "r") as f:
        t = nest_h5.timeline(f)
        iteration = float(f["/summary"].attrs["iteration_time_s"])
    # One row per stage (its first device), then optionally more devices.
    first_of_stage = {}
    for d, s in zip(t["device"], t["stage"]):
        first_of_stage.setdefault(int(s), int(d))
    shown = [first_of_stage[s] for s in sorted(first_of_stage)]
    for d in np.unique(t["device"]):
        if len(shown) >= args.devices:
            break
        if int(d) not in shown:
            shown.append(int(d))
    row_of = {d: i for i, d in enumerate(shown)}
    stage_of = {d: s for s, d in first_of_stage.items()}

    fig, ax = plt.subplots(figsize=(12, max(2.5, 0.45 * len(shown) + 1.5)))
    on_rows = np.isin(t["device"], shown)
    for kind, color in COLORS.items():
        for stream, offset, height in (("compute", 0.0, 0.6), ("network", 0.38, 0.16)):
            sel = on_rows & (t["kind"] == kind) & (t["stream"] == stream)
            if not sel.any():
                continue
            rows = np.array([row_of[int(d)] for d in t["device"][sel]]) + offset
            label = kind if stream == "compute" or kind not in ("forward", "backward") else None
            ax.barh(rows, t["end"][sel] - t["start"][sel], left=t["start"][sel], height=height,
                    color=color, label=label, linewidth=0)
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels([f"stage {stage_of[d]} (dev {d})" if d in stage_of else f"dev {d}"
                        for d in shown])
    ax.invert_yaxis()
    ax.set_xlabel("time (s); thick bars: compute stream, thin bars below: network")
    ax.set_xlim(0, iteration)
    ax.set_title(f"{os.path.basename(args.run)}: one iteration, {iteration:.4g} s")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), loc="upper center", bbox_to_anchor=(0.5, -0.15),
              ncol=4, frameon=False)
    fig.tight_layout()
    tmp = args.out + ".tmp.png"
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, args.out)


if __name__ == "__main__":
    main()
