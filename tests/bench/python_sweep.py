"""A 92-size allreduce sweep of a DGX H100 node (nccl-tests' curve), from Python in one call
against the shell loop over `nest collective --json` it replaces: wall time of each, and the
figures compared. Writes the table to stdout (results/python_bench.md holds a run).

    PYTHONPATH=build/python /usr/bin/python3 tests/bench/python_sweep.py build/nest
"""
import json
import subprocess
import sys
import time

import numpy as np

import nest

NEST = sys.argv[1] if len(sys.argv) > 1 else "build/nest"
# 92 sizes, geometric from 64 B to 32 GiB (whole multiples of 8 bytes: 4-byte floats, 2 ranks).
sizes = sorted({int(round(8 * (2 ** 29) ** (i / 91))) * 8 for i in range(92)})
assert len(sizes) == 92, len(sizes)


def best_of(runs, f):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        out = f()
        times.append(time.perf_counter() - start)
    return min(times), out


topology = nest.Topology.load("dgx_h100")
nest.collective_sweep(topology, "allreduce", sizes[:2])  # imports pandas once
python_s, frame = best_of(3, lambda: nest.collective_sweep(topology, "allreduce", sizes))


def shell_loop():
    out = []
    for s in sizes:
        r = subprocess.run([NEST, "collective", "--topology", "dgx_h100", "--op", "allreduce",
                            "--size", f"{s}B", "--json"], capture_output=True, text=True,
                           check=True)
        out.append(json.loads(r.stdout)["simulated_s"])
    return out


shell_s, shell_times = best_of(1, shell_loop)
same = bool(np.array_equal(np.asarray(frame["time_s"]), np.asarray(shell_times)))
print("| what | wall time | per size |")
print("|---|---:|---:|")
print(f"| `nest.collective_sweep`, 92 sizes, one call (best of 3) | {python_s:.3f} s | "
      f"{1e3 * python_s / 92:.2f} ms |")
print(f"| shell loop over `nest collective --json`, 92 processes | {shell_s:.3f} s | "
      f"{1e3 * shell_s / 92:.2f} ms |")
print(f"\nspeed-up {shell_s / python_s:.1f}x; the 92 simulated times are "
      f"{'identical' if same else 'DIFFERENT'} in both.")
sys.exit(0 if same else 1)
