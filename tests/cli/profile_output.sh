#!/usr/bin/env bash
# `nest profile` output: the --json object (keys and figures checked against closed forms) and
# the text table. Usage: bash profile_output.sh <path-to-nest> <source-dir>
set -u
nest=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$nest" profile --model gpt3-175b --accelerator h100 --tp 8 --sp --json >"$tmp/gpt3.json" ||
  { echo "FAIL: nest profile --json exited $?"; exit 1; }
"$nest" profile --profile gpt3-175b-h100 --tp 8 --json >"$tmp/file.json" ||
  { echo "FAIL: nest profile --profile --json exited $?"; exit 1; }

/usr/bin/python3 - "$tmp/gpt3.json" "$tmp/file.json" <<'PY' || exit 1
import json, sys

gpt3 = json.load(open(sys.argv[1]))
failures = []

def check(name, got, expected, rel=0.0):
    ok = got == expected if rel == 0.0 else abs(got - expected) <= rel * abs(expected)
    if not ok:
        failures.append(f"{name}: got {got!r}, expected {expected!r}")

check("parameters", gpt3["parameters"], 174604259328)
check("global_batch", gpt3["global_batch"], 1536)
# 3 × forward GEMM FLOPs (Narayanan et al. 2021 without recomputation), vocabulary padded to 50304.
B, s, l, h, V = 1536, 2048, 96, 12288, 50304
check("flops_per_iteration", gpt3["flops_per_iteration"],
      72 * B * s * l * h * h * (1 + s / (6 * h)) + 6 * B * s * h * V, rel=1e-12)
layers = gpt3["layers"]
check("layer count", len(layers), 98)
check("layer names", [layers[0]["name"], layers[1]["name"], layers[97]["name"]],
      ["embedding", "transformer_block", "head"])
# Korthikanti et al. 2022 with sequence parallelism: s·b·h/t·(34 + 5·a·s/h), t = 8.
check("block activation_bytes", layers[1]["activation_bytes"], 2048 * 12288 // 8 * (34 + 80))
check("block parameter_bytes", layers[1]["parameter_bytes"], 2 * layers[1]["parameters"])
for key in ("parameter_bytes", "activation_bytes", "forward_s", "backward_s"):
    if any(key not in layer for layer in layers):
        failures.append(f"a layer lacks {key}")
# The backward from each operator's own kernels: the input- and weight-gradient GEMMs at their
# shapes and the memory-bound operators' backward traffic (not 2 x the forward).
check("backward > forward", layers[1]["backward_s"] > 1.5 * layers[1]["forward_s"], True)
totals = {}
for c in layers[1]["collectives"]:
    totals[c["op"]] = totals.get(c["op"], 0) + c["count"]
check("collectives", sorted(totals.items()), [("allgather", 6), ("reducescatter", 4)])
# Megatron-LM's asynchronous TP communication: 2 re-gathers and 2 reduce-scatters of the
# backward run beside the column-parallel GEMMs' gradient GEMMs.
check("overlapped", sum(c["count"] for c in layers[1]["collectives"] if c["overlap_s"] > 0), 4)

f = json.load(open(sys.argv[2]))
check("file parameters", f["parameters"], None)
check("file variants", len(f["variants"]), 1)
check("file layers", len(f["layers"]), 97)
check("file block forward_s", f["layers"][1]["forward_s"], 0.00809, rel=1e-12)
check("file block activation_bytes", f["layers"][1]["activation_bytes"], 3281179702)

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
PY

"$nest" profile --model gpt3-175b --accelerator h100 --tp 8 >"$tmp/table.txt" ||
  { echo "FAIL: nest profile exited $?"; exit 1; }
for line in \
  'model        gpt3-175b: 174604259328 parameters (174.6G)' \
  'accelerator  h100-sxm: 989 TFLOP/s bf16, 80 GiB HBM at 3.35 TB/s' \
  'variant t=8 sp=off c=1 e=1 micro-batch 1: 8 devices per replica, 1536 microbatches per iteration'; do
  grep -qxF "$line" "$tmp/table.txt" || { echo "FAIL: no line: $line"; cat "$tmp/table.txt"; exit 1; }
done
grep -q '^1-96 *transformer_block x96 .* allreduce(tensor) 48 MiB x4$' "$tmp/table.txt" ||
  { echo "FAIL: no block row"; cat "$tmp/table.txt"; exit 1; }
echo "profile output tests passed"
