#!/usr/bin/python3
"""NEST's collective sweep against a measured nccl-tests curve: bus bandwidth against size.

    nest collective --topology topologies/dgx_h100.yaml --op allreduce --sizes 8:16G --csv \\
        > nest.csv
    nest collective --topology topologies/dgx_h100.yaml --op allreduce --sizes 8:16G --csv \\
        --ideal > ideal.csv
    /usr/bin/python3 scripts/plot_collective.py \\
        tests/validation/reference/measured/nccl-allreduce-dgx-h100.tsv nest.csv OUT.png \\
        [--ideal ideal.csv] [--title TEXT]

MEASURED is an nccl-tests table (tab-separated, `#` comments, columns size_bytes, time_us,
algbw_GBps, busbw_GBps); the CSVs are `nest collective --sizes ... --csv` output. The top panel
draws bus bandwidth (GB/s) against size (log scale), the bottom one NEST's time relative to
the measured one at the measured sizes, with the validation tolerances (10% from 64 KiB up,
25% below). Needs Debian's python3-matplotlib (scripts/setup.sh installs it).
"""

import argparse
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_measured(path):
    rows = []
    with open(path) as f:
        header = None
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            fields = line.split()
            if header is None:
                header = fields
                continue
            record = dict(zip(header, fields))
            rows.append((int(record["size_bytes"]), float(record["time_us"]),
                         float(record["busbw_GBps"])))
    if not rows:
        sys.exit(f"plot_collective.py: {path}: no measurements")
    return rows


def read_nest(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if not rows or "busbw_bytes_per_s" not in rows[0]:
        sys.exit(f"plot_collective.py: {path}: not `nest collective --sizes ... --csv` output")
    return [(int(r["size_bytes"]), float(r["time_s"]) * 1e6, float(r["busbw_bytes_per_s"]) / 1e9,
             r["algorithm"], r["protocol"]) for r in rows]


def size_label(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b / scale:g} {unit}"
    return f"{b} B"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("measured")
    p.add_argument("nest")
    p.add_argument("out")
    p.add_argument("--ideal", help="the same sweep with --ideal")
    p.add_argument("--title", default="allreduce, 8 H100 (one DGX H100)")
    a = p.parse_args()

    measured = read_measured(a.measured)
    nest = read_nest(a.nest)
    by_size = {row[0]: row for row in nest}

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 7), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 1.4]})
    top.plot([m[0] for m in measured], [m[2] for m in measured], "o-", color="black",
             label="measured (nccl-tests all_reduce_perf)")
    top.plot([n[0] for n in nest], [n[2] for n in nest], "s-", color="tab:blue", ms=4,
             label="NEST, calibrated (NCCL model)")
    if a.ideal:
        ideal = read_nest(a.ideal)
        top.plot([n[0] for n in ideal], [n[2] for n in ideal], "--", color="tab:gray",
                 label="NEST --ideal (line rate, ring)")
    # Where the chosen algorithm or protocol changes.
    previous = None
    for size, _, busbw, algorithm, protocol in nest:
        key = (algorithm, protocol)
        if key != previous:
            top.annotate(f"{algorithm} {protocol}", (size, busbw), textcoords="offset points",
                         xytext=(-4, 8), fontsize=7, color="tab:blue")
            previous = key
    top.set_xscale("log", base=2)
    top.set_ylabel("bus bandwidth (GB/s)")
    top.set_title(a.title)
    top.grid(True, which="both", alpha=0.3)
    top.legend(loc="upper left", fontsize=8)

    xs, errors = [], []
    for size, time_us, _ in measured:
        if size in by_size:
            xs.append(size)
            errors.append(100 * (by_size[size][1] / time_us - 1))
    bottom.axhspan(-10, 10, color="tab:green", alpha=0.12, label="±10% (from 64 KiB)")
    bottom.axhspan(-25, 25, color="tab:green", alpha=0.06, label="±25% (below)")
    bottom.axvline(64 * 1024, color="tab:green", lw=0.8, ls=":")
    bottom.plot(xs, errors, "o-", color="tab:blue", ms=4)
    bottom.axhline(0, color="black", lw=0.6)
    bottom.set_ylabel("NEST time vs\nmeasured (%)")
    bottom.set_xlabel("message size")
    ticks = [1 << e for e in range(3, 35, 4)]
    bottom.set_xticks(ticks)
    bottom.set_xticklabels([size_label(t) for t in ticks], fontsize=8)
    bottom.grid(True, alpha=0.3)
    bottom.legend(loc="lower right", fontsize=7)
    fig.tight_layout()
    fig.savefig(a.out, dpi=120)


if __name__ == "__main__":
    main()
