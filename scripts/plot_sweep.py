#!/usr/bin/python3
"""Charts of a `nest sweep` results table (results.csv), as PNG, and a markdown summary.

    scripts/plot_sweep.py RESULTS [--out DIR] [--x COLUMN] [--series COLUMN]
                          [--facets COLUMN,COLUMN] [--baseline NAME] [--metric COLUMN]

RESULTS is a results folder (holding results.csv) or the CSV itself. For every value of the
facet columns (default: workload and devices) one panel plots the metric (default tokens_per_s)
against the x column (default: the first swept topology.* column), one line per value of the
series column (default spine_oversubscription): NEST's plan solid, the baseline's (default
manual) dashed in the same colour. Quantities with units ("12.5 GB/s", "400 Gb/s", "2 us") are
read as numbers in GB/s or us. Writes DIR/throughput.png, DIR/speedup.png, DIR/replay.png (when
the points were replayed: the replay's deviation from the prediction) and DIR/summary.md (the
plans NEST chose beside the baseline's). Rows that are not "ok" are left out of the charts
and counted in the summary.
"""

import argparse
import csv
import math
import os
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

_RATE = re.compile(r"^\s*([-+0-9.eE]+)\s*([KMGTP]?i?)([Bb])(ps|/s)\s*$")
_TIME = re.compile(r"^\s*([-+0-9.eE]+)\s*(ps|ns|us|ms|s)\s*$")
_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME_US = {"ps": 1e-6, "ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def quantity(text):
    """A number from a cell: plain, a rate (in GB/s) or a duration (in us); None if empty."""
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        pass
    m = _RATE.match(text)
    if m:
        value = float(m.group(1)) * _PREFIX[m.group(2)]
        if m.group(3) == "b" or m.group(4) == "ps":
            value /= 8  # bits (Gb/s, Gbps)
        return value / 1e9
    m = _TIME.match(text)
    if m:
        return float(m.group(1)) * _TIME_US[m.group(2)]
    raise ValueError(f"not a number or a quantity: {text!r}")


def axis_label(column, sample):
    if _RATE.match(sample or ""):
        return f"{column} (GB/s)"
    if _TIME.match(sample or ""):
        return f"{column} (us)"
    return column


def load(path):
    if os.path.isdir(path):
        path = os.path.join(path, "results.csv")
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    if not rows:
        sys.exit(f"plot_sweep: {path}: no rows")
    return rows


def sort_key(value):
    q = None
    try:
        q = quantity(value)
    except ValueError:
        pass
    return (0, q, "") if q is not None else (1, 0.0, value)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="results folder or results.csv")
    p.add_argument("--out", default=None, help="output folder (default: the results folder)")
    p.add_argument("--x", default=None, help="x axis column (default: first topology.* column)")
    p.add_argument("--series", default="spine_oversubscription", help="one line per value")
    p.add_argument("--facets", default="workload,devices", help="one panel per value pair")
    p.add_argument("--baseline", default="manual", help="baseline drawn dashed ('' for none)")
    p.add_argument("--metric", default="tokens_per_s", help="the y column of NEST's plan")
    args = p.parse_args()

    rows = load(args.results)
    columns = list(rows[0].keys())
    x = args.x or next((c for c in columns if c.startswith("topology.")), None)
    if x is None or x not in columns:
        sys.exit(f"plot_sweep: no x column {x!r} (columns: {', '.join(columns)})")
    facets = [c for c in args.facets.split(",") if c]
    for c in facets + [args.series, args.metric]:
        if c not in columns:
            sys.exit(f"plot_sweep: no column {c!r}")
    base = args.baseline.replace("-", "_")
    base_metric = f"{base}_{args.metric}" if base else None
    if base_metric and base_metric not in columns:
        sys.exit(f"plot_sweep: no column {base_metric!r} (is {args.baseline!r} in the study?)")
    out = args.out or (args.results if os.path.isdir(args.results)
                       else os.path.dirname(args.results) or ".")
    os.makedirs(out, exist_ok=True)

    ok = [r for r in rows if r["status"] == "ok"]
    panels = sorted({tuple(r[c] for c in facets) for r in rows},
                    key=lambda k: [sort_key(v) for v in k])
    series = sorted({r[args.series] for r in rows}, key=sort_key)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    x_label = axis_label(x, rows[0][x])

    def draw(name, y_of, y_label, with_baseline):
        cols = min(len(panels), 2)
        nrows = math.ceil(len(panels) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(6.2 * cols, 4.2 * nrows), squeeze=False)
        for i, key in enumerate(panels):
            ax = axes[i // cols][i % cols]
            mine = [r for r in ok if tuple(r[c] for c in facets) == key]
            for j, s in enumerate(series):
                pts = sorted(((quantity(r[x]), r) for r in mine
                              if r[args.series] == s and r[x] != ""), key=lambda t: t[0])
                if not pts:
                    continue
                colour = colours[j % len(colours)]
                label = f"{args.series} {s}" if s else "NEST"
                ys = [y_of(r) for _, r in pts]
                ax.plot([q for q, _ in pts], ys, "o-", color=colour, label=f"NEST, {label}")
                if with_baseline:
                    b = [(q, quantity(r[base_metric])) for q, r in pts if r[base_metric]]
                    if b:
                        ax.plot([q for q, _ in b], [v for _, v in b], "s--", color=colour,
                                alpha=0.7, label=f"{args.baseline}, {label}")
            ax.set_title(", ".join(f"{c} {v}" for c, v in zip(facets, key)))
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            ax.set_xscale("log", base=2)
            ticks = sorted({quantity(r[x]) for r in mine if r[x] != ""})
            ax.set_xticks(ticks)
            ax.set_xticklabels([f"{t:g}" for t in ticks])
            ax.minorticks_off()
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7)
        for i in range(len(panels), nrows * cols):
            axes[i // cols][i % cols].axis("off")
        fig.tight_layout()
        path = os.path.join(out, name)
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
        return path

    written = [draw("throughput.png", lambda r: quantity(r[args.metric]), args.metric,
                    bool(base_metric))]
    if base_metric and f"speedup_vs_{base}" in columns:
        written.append(draw("speedup.png", lambda r: quantity(r[f"speedup_vs_{base}"]) or math.nan,
                            f"NEST speedup over {args.baseline}", False))

    if "replay_error" in columns and any(r["replay_error"] for r in ok):
        written.append(draw("replay.png",
                            lambda r: quantity(r["replay_error"]) if r["replay_error"]
                            else math.nan,
                            "(replayed - predicted) / predicted iteration time", False))

    # The plans, for the README: one line per ok row.
    lines = [f"| {' | '.join(facets + [args.series, x])} | NEST plan | NEST {args.metric} | "
             f"{args.baseline} plan | {args.baseline} {args.metric} | speedup |",
             "|" + "---|" * (len(facets) + 7)]
    for r in sorted(ok, key=lambda r: ([sort_key(r[c]) for c in facets + [args.series, x]],
                                       int(r["point"]))):
        plan = (f"t{r['tensor_parallel']} e{r['expert_parallel']} pp{r['pipeline_stages']} "
                f"dp{r['data_parallel']} mb{r['micro_batch']} zero{r['zero_stage']}"
                f"{' recompute' if r['recompute'] == '1' else ''} {r['order']}")
        cells = [r[c] for c in facets + [args.series, x]] + [plan, f"{float(r[args.metric]):.4g}"]
        if base_metric:
            cells += [r.get(f"{base}_plan", ""),
                      f"{float(r[base_metric]):.4g}" if r[base_metric] else "none",
                      f"{float(r[f'speedup_vs_{base}']):.3f}" if r.get(f"speedup_vs_{base}")
                      else ""]
        else:
            cells += ["", "", ""]
        lines.append("| " + " | ".join(cells) + " |")
    failed = [r for r in rows if r["status"] != "ok"]
    lines.append("")
    lines.append(f"{len(rows)} points: {len(ok)} ok, "
                 f"{sum(r['status'] == 'infeasible' for r in rows)} infeasible, "
                 f"{sum(r['status'] == 'error' for r in rows)} error.")
    for r in failed:
        lines.append(f"- point {r['point']}: {r['status']}: {r['error']}")
    summary = os.path.join(out, "summary.md")
    with open(summary, "w") as f:
        f.write("\n".join(lines) + "\n")
    written.append(summary)
    for w in written:
        print(f"wrote {w}")


if __name__ == "__main__":
    main()
