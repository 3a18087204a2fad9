#!/usr/bin/python3
"""The measured training runs against NEST: a plot and a markdown report.

usage: /usr/bin/python3 scripts/plot_validation.py TABLE.tsv FIT.txt LAYER.txt OUT_DIR

TABLE.tsv is `bench_training_validation table` (one row per measured run), FIT.txt the output of
`bench_training_validation fit` (the grid search and the leave-one-table-out check) and LAYER.txt
of `bench_training_validation table4`. Writes OUT_DIR/training_validation.png and
OUT_DIR/training_validation.md. scripts/training_validation.sh runs all of it.
"""
import csv
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def rows_of(path):
    with open(path) as f:
        return list(csv.DictReader(f, delimiter="\t"))


def stats(rows):
    errors = [abs(float(r["error"])) for r in rows]
    return 100 * sum(errors) / len(errors), 100 * max(errors)


def plot(rows, out):
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 5))
    for table, marker, colour in (("narayanan", "o", "tab:blue"), ("korthikanti", "s", "tab:red")):
        part = [r for r in rows if r["table"] == table]
        measured = [float(r["measured_s"]) for r in part]
        predicted = [float(r["predicted_s"]) for r in part]
        mean, worst = stats(part)
        label = f"{table} (mean |error| {mean:.2f}%, max {worst:.2f}%)"
        left.scatter(measured, predicted, marker=marker, color=colour, label=label)
        right.scatter([int(r["gpus"]) for r in part], [100 * float(r["error"]) for r in part],
                      marker=marker, color=colour, label=table)
    lo = min(float(r["measured_s"]) for r in rows) * 0.8
    hi = max(float(r["measured_s"]) for r in rows) * 1.2
    left.plot([lo, hi], [lo, hi], color="grey", linewidth=1)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("measured iteration time (s)")
    left.set_ylabel("NEST's predicted iteration time (s)")
    left.set_title("Megatron-LM on Selene: measured against NEST")
    left.legend(fontsize=8)
    right.axhline(0, color="grey", linewidth=1)
    for band in (3, 8):
        right.axhspan(-band, band, color="green", alpha=0.06)
    right.set_xscale("log")
    right.set_xlabel("GPUs")
    right.set_ylabel("error (%)")
    right.set_title("error per run (bands: 3% and 8%)")
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def report(rows, fit_text, layer_text, out):
    mean_n, max_n = stats([r for r in rows if r["table"] == "narayanan"])
    mean_k, max_k = stats([r for r in rows if r["table"] == "korthikanti"])
    mean_a, max_a = stats(rows)
    replay = max(abs(float(r["replay_error"])) for r in rows)
    lines = [
        "# Measured training runs: NEST against Megatron-LM on Selene",
        "",
        "Written by `scripts/training_validation.sh` (tests/bench/training_validation.cc and",
        "scripts/plot_validation.py); `nest validate` checks the same figures (groups `training`",
        "and `layer`). The runs: tests/validation/reference/measured/training-runs.tsv (Narayanan",
        "et al. 2021 Table 1, Korthikanti et al. 2022 Table 5 and its 530B headline, with their",
        "sources). Every run is expressed with library options only (nest/validate/training_runs.h:",
        "the model from its columns, one variant, every search dimension fixed, Megatron's uniform",
        "split), on topologies/selene_4480.yaml with workloads/accelerators/a100-80gb.yaml.",
        "",
        "Network model: the collective oracle on the topology with its calibrated collective model",
        "(topologies/collectives/nvlink3.yaml and hdr.yaml: NCCL's algorithms, protocols, bus",
        "efficiencies and per-step latencies on NVLink 3 and HDR InfiniBand), on main before the",
        "constants were fitted; stage-to-stage transfers are flows at the links' rates.",
        "",
        "![measured against NEST](training_validation.png)",
        "",
        "| run | GPUs | measured (s) | NEST (s) | error | replayed (s) | replay vs NEST |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['id']} | {r['gpus']} | {float(r['measured_s']):.3f} | "
            f"{float(r['predicted_s']):.3f} | {100 * float(r['error']):+.2f}% | "
            f"{float(r['replayed_s']):.3f} | {100 * float(r['replay_error']):+.2f}% |")
    lines += [
        "",
        "| table | runs | mean \\|error\\| | max \\|error\\| |",
        "|---|---:|---:|---:|",
        f"| Narayanan et al. 2021, Table 1 | 10 | {mean_n:.2f}% | {max_n:.2f}% |",
        f"| Korthikanti et al. 2022, Table 5 + 530B | 9 | {mean_k:.2f}% | {max_k:.2f}% |",
        f"| all | 19 | {mean_a:.2f}% | {max_a:.2f}% |",
        "| Calculon (SC'23) on Korthikanti Table 5 | 8 | 3.65% | 8.87% |",
        "",
        f"Every replay is within {100 * replay:.2f}% of its estimate.",
        "",
        "## One layer against Korthikanti et al. 2022 Table 4 (not fitted)",
        "",
        "```",
        layer_text.strip(),
        "```",
        "",
        "## The fit",
        "",
        "Three constants of workloads/accelerators/a100-80gb.yaml are fitted, once, on the 19 rows:",
        "the GEMM plateau efficiency (efficiency.gemm), the per-tile overhead in steps of k",
        "(gemm_shape.k_overhead) and the HBM efficiency (efficiency.memory). Everything else is a",
        "published figure or the software the papers ran (training_runs.h). Method: a grid search",
        "minimizing the mean |error| over all rows (no replay; the oracle kept warm across points).",
        "The surface is flat along a ridge (a higher plateau with a larger k overhead); the chosen",
        "point keeps the k overhead physical (under 300 steps of k, so that a head-dimension GEMM of",
        "k = 96..160 keeps a plausible 30-40% of the plateau).",
        "",
        "```",
    ]
    best = [l for l in fit_text.splitlines() if l.startswith(("best on", "fit on"))]
    lines += best
    lines += [
        "```",
        "",
        "The leave-one-table-out lines fit on one paper and judge the other with those constants:",
        "the model carries from one software generation to the other through the configuration",
        "alone (asynchronous TP communication, DDP kind, gradient-accumulation fusion).",
        "",
        "Grid (mean |error| over all rows, max, per table):",
        "",
        "```",
    ]
    lines += [l for l in fit_text.splitlines() if l.startswith("gemm")]
    lines += ["```", ""]
    with open(out, "w") as f:
        f.write("\n".join(lines))


def main():
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    rows = rows_of(sys.argv[1])
    fit_text = open(sys.argv[2]).read()
    layer_text = open(sys.argv[3]).read()
    out_dir = sys.argv[4]
    plot(rows, os.path.join(out_dir, "training_validation.png"))
    report(rows, fit_text, layer_text, os.path.join(out_dir, "training_validation.md"))
    print(f"wrote {out_dir}/training_validation.png and {out_dir}/training_validation.md")


if __name__ == "__main__":
    main()
