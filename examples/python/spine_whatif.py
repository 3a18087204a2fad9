"""What does a thinner spine cost? GPT-3 175B on 512 H100s (64 DGX-style nodes with 100 Gb/s
NICs, 16 nodes per leaf), placed by NEST and by Megatron practice (the manual baseline) on
rail-optimized clusters whose spine is 1:1, 2:1, 4:1 and 8:1 oversubscribed; throughput
plotted against the oversubscription.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/spine_whatif.py OUT.png
"""
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import nest  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "spine.png"
rows = []
# A rail leaf serves 16 nodes (16 ports down); 16 spines (one uplink each) make it 1:1.
for oversubscription in (1, 2, 4, 8):
    cluster = nest.topology.rail_optimized(
        name=f"rail-{oversubscription}to1", nodes=64, gpus_per_node=8, nodes_per_leaf=16,
        spines=16 // oversubscription, nvlink_bandwidth="450 GB/s", nvlink_latency="0.5 us",
        nic_bandwidth="100 Gb/s", nic_latency="1 us", spine_bandwidth="100 Gb/s",
        spine_latency="1 us")
    job = nest.Job(model="gpt3-175b", accelerator="h100", topology=cluster, baselines=["manual"])
    plan = job.place()
    manual = job.baselines()["manual"]
    rows.append((oversubscription, plan.tokens_per_second, manual.tokens_per_second))
    print(f"{oversubscription}:1  NEST {plan.tokens_per_second / 1e6:.4f} M tokens/s "
          f"(t={plan.tensor_parallel} S={plan.stages} d={plan.data_parallel}, "
          f"{plan.placement_order})   manual {manual.tokens_per_second / 1e6:.4f} M tokens/s")

fig, ax = plt.subplots(figsize=(6, 4))
x = [r[0] for r in rows]
ax.plot(x, [r[1] / 1e6 for r in rows], "o-", label="NEST")
ax.plot(x, [r[2] / 1e6 for r in rows], "s--", label="manual (Megatron practice)")
ax.set_xscale("log", base=2)
ax.set_xticks(x, [f"{v}:1" for v in x])
ax.set_xlabel("spine oversubscription")
ax.set_ylabel("M tokens/s")
ax.set_title("GPT-3 175B on 512 H100, 100 Gb/s NICs")
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
