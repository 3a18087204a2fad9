#!/usr/bin/python3
"""Charts of a `nest sweep` results table (results.csv), as PNG, and a markdown summary.

    scripts/plot_sweep.py RESULTS [--out DIR] [--x COLUMN] [--series COLUMN[,COLUMN]]
                          [--facets COLUMN,COLUMN] [--baseline NAME] [--metric COLUMN]
                          [--dump FILE]

RESULTS is a results folder (holding results.csv) or the CSV itself. For every value of the
facet columns (default: workload and devices, those the table has) one panel plots the metric
(default tokens_per_s) against the x column (default: the first swept topology.* column), NEST's
plan solid and the baseline's (default manual) dashed in the same colour.

- The x axis is numeric when every value is a number or a quantity ("12.5 GB/s", "400 Gb/s",
  "2 us": read in GB/s or us; log scale when all are positive), else categorical (`--x
  topology`: one position per value, in order).
- One line per combination of the inputs that vary between rows, other than x and the facets
  (--series names the ones to show first; the others still split lines), so two points are on
  one line only when nothing but x tells them apart; two rows with the same inputs are both
  drawn and reported.
- Rows that cannot be placed (no value of x: a torus point of a study whose x is a rail
  parameter) and rows that are not "ok" are left out of the charts, with one warning line on
  stderr naming them; summary.md lists every ok row.

Writes DIR/throughput.png, DIR/speedup.png, DIR/replay.png (when the points were replayed: the
replay's deviation from the prediction) and DIR/summary.md (the plans NEST chose beside the
baseline's, with each point's topology). --dump FILE writes what was drawn as JSON (per chart,
panel and line: the label and the points with their `point` number), for tests.
"""

import argparse
import csv
import json
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


def maybe_quantity(text):
    try:
        return quantity(text)
    except ValueError:
        return None


def axis_label(column, values):
    if values and all(_RATE.match(v) for v in values):
        return f"{column} (GB/s)"
    if values and all(_TIME.match(v) for v in values):
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
    q = maybe_quantity(value)
    return (0, q, "") if q is not None else (1, 0.0, value)


def inputs_of(columns):
    """The input columns of a results table: those between `point` and `status`."""
    if "point" in columns and "status" in columns:
        return columns[columns.index("point") + 1:columns.index("status")]
    return []


def points_text(rows, limit=8):
    ids = [r["point"] for r in rows]
    more = f" and {len(ids) - limit} more" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def plan_text(r):
    recompute = r.get("recompute", "")
    flag = "" if recompute in ("", "0", "none", "false") else (
        " recompute" if recompute in ("1", "true") else f" recompute {recompute}")
    return (f"t{r['tensor_parallel']} e{r['expert_parallel']} pp{r['pipeline_stages']} "
            f"dp{r['data_parallel']} mb{r['micro_batch']} zero{r['zero_stage']}{flag} "
            f"{r['order']}")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("results", help="results folder or results.csv")
    p.add_argument("--out", default=None, help="output folder (default: the results folder)")
    p.add_argument("--x", default=None, help="x axis column (default: first topology.* column)")
    p.add_argument("--series", default="spine_oversubscription",
                   help="inputs to name lines by first (others that vary split lines too)")
    p.add_argument("--facets", default=None,
                   help="one panel per value combination (default: workload,devices)")
    p.add_argument("--baseline", default="manual", help="baseline drawn dashed ('' for none)")
    p.add_argument("--metric", default="tokens_per_s", help="the y column of NEST's plan")
    p.add_argument("--dump", default=None, help="also write what was drawn, as JSON")
    args = p.parse_args()

    rows = load(args.results)
    columns = list(rows[0].keys())
    inputs = inputs_of(columns)
    x = args.x or next((c for c in inputs if c.startswith("topology.")), None) or next(
        (c for c in columns if c.startswith("topology.")), None)
    if x is None or x not in columns:
        sys.exit(f"plot_sweep: no x column {x!r} (columns: {', '.join(columns)})")
    if args.facets is None:
        facets = [c for c in ("workload", "devices") if c in columns and c != x]
    else:
        facets = [c for c in args.facets.split(",") if c]
    named = [c for c in args.series.split(",") if c]
    if args.series == "spine_oversubscription" and "spine_oversubscription" not in columns:
        named = []  # the default, in a table without it
    for c in facets + named + [args.metric]:
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
    unplaced = [r for r in ok if r[x] == ""]
    placed = [r for r in ok if r[x] != ""]
    not_ok = [r for r in rows if r["status"] != "ok"]
    if not_ok:
        print(f"plot_sweep: warning: {len(not_ok)} rows are not ok (points "
              f"{points_text(not_ok)}): not in the charts, listed in summary.md", file=sys.stderr)
    if unplaced:
        topologies = sorted({r.get("topology", "") for r in unplaced})
        print(f"plot_sweep: warning: {len(unplaced)} ok rows have no {x} (points "
              f"{points_text(unplaced)}; topology {', '.join(topologies)}): not in the charts; "
              f"--x topology places every row", file=sys.stderr)

    # The x axis: numbers when every placed value is one, else categories in order.
    values = sorted({r[x] for r in placed}, key=sort_key)
    numeric = bool(values) and all(maybe_quantity(v) is not None for v in values)
    if numeric:
        position = {v: quantity(v) for v in values}
    else:
        position = {v: float(i) for i, v in enumerate(values)}
    log_x = numeric and all(q > 0 for q in position.values()) and len(values) > 1

    # Lines: every input that varies, but x and the facets, named ones first.
    varying = [c for c in inputs if c not in facets and c != x
               and len({r[c] for r in ok}) > 1]
    line_columns = named + [c for c in varying if c not in named]
    panels = sorted({tuple(r[c] for c in facets) for r in rows},
                    key=lambda k: [sort_key(v) for v in k])
    lines = sorted({tuple(r[c] for c in line_columns) for r in placed},
                   key=lambda k: [sort_key(v) for v in k])
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "oD^v<>ph*"
    x_label = axis_label(x, values)

    # Rows that nothing tells apart but the columns the charts ignore: both drawn, reported.
    seen = {}
    for r in placed:
        key = tuple(r[c] for c in facets + line_columns + [x])
        if key in seen:
            print(f"plot_sweep: warning: points {seen[key]['point']} and {r['point']} have the "
                  f"same inputs; both are drawn at {x} {r[x]}", file=sys.stderr)
        seen.setdefault(key, r)

    def label_of(key):
        parts = [f"{c} {v}" for c, v in zip(line_columns, key) if v != ""]
        return ", ".join(parts) if parts else "all points"

    # On a categorical axis the lines' points at one category sit side by side, not on top of
    # each other.
    def dodge(j):
        if numeric or len(lines) < 2:
            return 0.0
        return (j - (len(lines) - 1) / 2) * min(0.6 / len(lines), 0.12)

    dumped = {}

    def draw(name, y_of, y_label, with_baseline):
        cols = min(len(panels), 2)
        nrows = math.ceil(len(panels) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(9.5 * cols, 4.2 * nrows), squeeze=False)
        chart = []
        for i, key in enumerate(panels):
            ax = axes[i // cols][i % cols]
            mine = [r for r in placed if tuple(r[c] for c in facets) == key]
            panel = {"panel": dict(zip(facets, key)), "lines": []}
            for j, line in enumerate(lines):
                pts = sorted(((position[r[x]] + dodge(j), int(r["point"]), r) for r in mine
                              if tuple(r[c] for c in line_columns) == line))
                if not pts:
                    continue
                colour = colours[j % len(colours)]
                marker = markers[(j // len(colours)) % len(markers)]
                label = label_of(line)
                ys = [y_of(r) for _, _, r in pts]
                ax.plot([q for q, _, _ in pts], ys, marker + "-", color=colour,
                        label=f"NEST, {label}")
                drawn = {"label": label,
                         "points": [{"point": n, "x": r[x], "y": y}
                                    for (_, n, r), y in zip(pts, ys)]}
                if with_baseline:
                    b = [(q, quantity(r[base_metric])) for q, _, r in pts if r[base_metric]]
                    if b:
                        ax.plot([q for q, _ in b], [v for _, v in b], "s--",
                                color=colour, alpha=0.7, label=f"{args.baseline}, {label}")
                    drawn["baseline"] = [v for _, v in b]
                panel["lines"].append(drawn)
            chart.append(panel)
            ax.set_title(", ".join(f"{c} {v}" for c, v in zip(facets, key)) or "all points")
            ax.set_xlabel(x_label)
            ax.set_ylabel(y_label)
            if log_x:
                ax.set_xscale("log", base=2)
            ticks = sorted({position[r[x]] for r in mine})
            ax.set_xticks(ticks)
            if numeric:
                ax.set_xticklabels([f"{t:g}" for t in ticks])
            else:
                ax.set_xticklabels([values[int(t)] for t in ticks])
            ax.minorticks_off()
            ax.grid(True, alpha=0.3)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                          borderaxespad=0.0)
        for i in range(len(panels), nrows * cols):
            axes[i // cols][i % cols].axis("off")
        fig.tight_layout()
        path = os.path.join(out, name)
        fig.savefig(path, dpi=110, metadata={"Software": None})
        plt.close(fig)
        dumped[name] = chart
        return path

    def number(text):
        q = maybe_quantity(text)
        return q if q is not None else math.nan

    written = [draw("throughput.png", lambda r: number(r[args.metric]), args.metric,
                    bool(base_metric))]
    if base_metric and f"speedup_vs_{base}" in columns:
        written.append(draw("speedup.png", lambda r: number(r[f"speedup_vs_{base}"]),
                            f"NEST speedup over {args.baseline}", False))

    if "replay_error" in columns and any(r["replay_error"] for r in ok):
        written.append(draw("replay.png", lambda r: number(r["replay_error"]),
                            "(replayed - predicted) / predicted iteration time", False))

    # The plans, for the README: one line per ok row, with its topology.
    shown = (["topology"] if "topology" in columns else []) + [
        c for c in facets + named + [x] if c != "topology"]
    shown += [c for c in line_columns if c not in shown]
    lines_md = [f"| {' | '.join(shown)} | NEST plan | NEST {args.metric} | "
                f"{args.baseline} plan | {args.baseline} {args.metric} | speedup |",
                "|" + "---|" * (len(shown) + 5)]
    for r in sorted(ok, key=lambda r: ([sort_key(r[c]) for c in shown], int(r["point"]))):
        cells = [r[c] for c in shown] + [plan_text(r), f"{float(r[args.metric]):.4g}"]
        if base_metric:
            cells += [r.get(f"{base}_plan", ""),
                      f"{float(r[base_metric]):.4g}" if r[base_metric] else "none",
                      f"{float(r[f'speedup_vs_{base}']):.3f}" if r.get(f"speedup_vs_{base}")
                      else ""]
        else:
            cells += ["", "", ""]
        lines_md.append("| " + " | ".join(cells) + " |")
    lines_md.append("")
    lines_md.append(f"{len(rows)} points: {len(ok)} ok, "
                    f"{sum(r['status'] == 'infeasible' for r in rows)} infeasible, "
                    f"{sum(r['status'] == 'error' for r in rows)} error.")
    if unplaced:
        lines_md.append(f"Not in the charts (no {x}): points {points_text(unplaced, 1000)}.")
    for r in not_ok:
        lines_md.append(f"- point {r['point']}: {r['status']}: {r['error']}")
    summary = os.path.join(out, "summary.md")
    with open(summary, "w") as f:
        f.write("\n".join(lines_md) + "\n")
    written.append(summary)
    if args.dump:
        with open(args.dump, "w") as f:
            json.dump({"x": x, "numeric": numeric, "line_columns": line_columns,
                       "unplaced": [int(r["point"]) for r in unplaced], "charts": dumped}, f,
                      indent=1)
    for w in written:
        print(f"wrote {w}")


if __name__ == "__main__":
    main()
