"""Place GPT-3 175B on the bundled 1,024-GPU H100 rail cluster, replay one iteration and plot the
pipeline timeline of the first data-parallel replica (one row per stage).

    PYTHONPATH=build/python /usr/bin/python3 examples/python/pipeline_timeline.py OUT.png
"""
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import nest  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "timeline.png"
job = nest.Job(model="gpt3-175b", accelerator="h100", topology="h100_rail_1024", baselines=[])
plan = job.place()
run = job.simulate(plan)
print(f"plan: t={plan.tensor_parallel} stages={plan.stages} d={plan.data_parallel} "
      f"estimate {plan.iteration_time_s:.3f} s, replayed {run.summary['iteration_time_s']:.3f} s")

t = run.timeline
first = {p["devices"][0][0]: s for s, p in enumerate(plan.partition)}  # stage -> replica 0
colors = {"forward": "tab:blue", "backward": "tab:orange", "recompute": "tab:purple",
          "gradient_sync": "tab:red", "optimizer": "tab:gray"}
fig, ax = plt.subplots(figsize=(12, 0.4 * plan.stages + 1.5))
for device, stage in first.items():
    rows = t[(t["device"] == device) & (t["stream"] == "compute")]
    for kind, color in colors.items():
        sel = rows[rows["kind"] == kind]
        ax.broken_barh(list(zip(sel["start_s"], sel["end_s"] - sel["start_s"])), (stage - 0.4, 0.8),
                       color=color, label=kind if stage == 0 else None)
ax.set_xlabel("time (s)")
ax.set_ylabel("pipeline stage")
ax.invert_yaxis()
ax.legend(loc="upper right", ncol=len(colors), fontsize="small")
ax.set_title(f"GPT-3 175B on 1,024 H100: one iteration, {run.summary['iteration_time_s']:.3f} s")
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
