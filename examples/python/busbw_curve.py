"""nccl-tests' allreduce curve of a DGX H100 node, in one call: NEST's calibrated busbw against
its closed form (the alpha-beta model under the same collective model) and against the ideal
network (line rates), size by size.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/busbw_curve.py OUT.png
"""
import sys

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import nest  # noqa: E402

out = sys.argv[1] if len(sys.argv) > 1 else "busbw.png"
node = nest.Topology.load("dgx_h100")
calibrated = nest.collective_sweep(node, "allreduce", "1K:16G")
ideal = nest.collective_sweep(node, "allreduce", "1K:16G", ideal=True)
ranks = node.devices
factor = 2 * (ranks - 1) / ranks  # nccl-tests' bus bandwidth factor of allreduce
closed_busbw = calibrated["size_bytes"] / calibrated["closed_form_s"] * factor

print(f"{'size':>12} {'algorithm':>10} {'proto':>6} {'busbw GB/s':>11} {'closed form':>12} "
      f"{'ideal':>8}")
for i in range(0, len(calibrated), 4):
    r = calibrated.iloc[i]
    print(f"{int(r['size_bytes']):>12} {r['algorithm']:>10} {r['protocol']:>6} "
          f"{r['busbw_bytes_per_s'] / 1e9:>11.1f} {closed_busbw.iloc[i] / 1e9:>12.1f} "
          f"{ideal['busbw_bytes_per_s'].iloc[i] / 1e9:>8.1f}")

fig, ax = plt.subplots(figsize=(7, 4))
ax.plot(calibrated["size_bytes"], calibrated["busbw_bytes_per_s"] / 1e9, "o-", ms=3,
        label="NEST, NCCL-calibrated (simulated)")
ax.plot(calibrated["size_bytes"], closed_busbw / 1e9, "--", label="closed form (same model)")
ax.plot(ideal["size_bytes"], ideal["busbw_bytes_per_s"] / 1e9, ":", label="ideal network (ring)")
ax.set_xscale("log", base=2)
ax.set_xlabel("size (bytes)")
ax.set_ylabel("busbw (GB/s)")
ax.set_title("allreduce on a DGX H100 node (8 GPUs)")
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=100)
print(f"wrote {out}")
