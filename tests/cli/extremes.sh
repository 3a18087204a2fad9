#!/usr/bin/env bash
# Models and accelerators at the edges of their ranges (issue 17, defect 3) place with sound
# numbers: a positive finite iteration time and throughput, and MFU in (0, 1]. Before the
# ranges, an efficiency of 1e-300 gave MFU 2745.5% and a peak of 1e-300 MFU inf%, both with
# status 0. Under the sanitizer build (scripts/test.sh --sanitize) the same runs prove that no
# integer or float-to-integer conversion overflows on the way.
# Usage: extremes.sh <nest> <source-dir>
set -u
nest="$1"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cd "$tmp" || exit 1
failed=0

model() {  # name, then key: value lines that replace the small base model's
  local name=$1
  shift
  {
    echo "kind: model"
    echo "name: $name"
    printf '%s\n' "$@"
    for kv in "layers: 2" "hidden: 64" "heads: 4" "ffn_hidden: 256" "activation: gelu" \
      "norm: layernorm" "position_embedding: rotary" "vocabulary: 1000" "tied_embeddings: true" \
      "bias: true" "dropout: true" "sequence_length: 128" "global_batch: 8"; do
      local key=${kv%%:*}
      printf '%s\n' "$@" | grep -q "^$key:" || echo "$kv"
    done
  } > "$name.yaml"
}

accelerator() {  # name, peak, efficiency, hbm, hbm bandwidth
  printf 'kind: accelerator\nname: %s\npeak_flop_rate:\n  bf16: %s\nhbm: %s\nhbm_bandwidth: %s\nefficiency:\n  gemm: %s\n  memory: %s\n' \
    "$1" "$2" "$4" "$5" "$3" "$3" > "$1.yaml"
}

model global_batch "global_batch: 1073741824"
model vocabulary "vocabulary: 16777216"
model experts "experts: 65536" "top_k: 1"
model head_dim "head_dim: 65536"
model token_types "token_types: 16777216"
model heads "heads: 65536" "hidden: 65536"
model ffn "ffn_hidden: 4194304"
model padding "vocabulary_padding: 1048576"
model sequence "sequence_length: 16777216" "global_batch: 1" "heads: 1"
accelerator fastest "1e21 FLOP/s" 1 "1 EiB" "1e18 B/s"
accelerator typical "989 TFLOP/s" 0.8 "80 GiB" "3.35 TB/s"
accelerator slowest "1e6 FLOP/s" 0.001 "1 EiB" "1 MB/s"

check() {  # model, accelerator, expected status
  local out status
  out=$("$nest" place --model "$1.yaml" --accelerator "$2.yaml" --network zero --devices 64 \
    --baselines none --micro-batches 1 --json 2>"$1-$2.err")
  status=$?
  if [ "$status" -ne "$3" ]; then
    echo "FAIL $1 on $2: status $status, expected $3: $(cat "$1-$2.err")"
    failed=1
    return
  fi
  [ "$3" -ne 0 ] && return
  if ! printf '%s' "$out" | python3 -c '
import json, math, sys
j = json.load(sys.stdin)
p = j["predicted"]
t, mfu, tok = p["iteration_time_s"], p["mfu"], p["tokens_per_second"]
ok = 0 < t < 1e7 and math.isfinite(tok) and tok > 0 and 0 < mfu <= 1
sys.exit(0 if ok else "iteration %r s, mfu %r, tokens/s %r" % (t, mfu, tok))'; then
    echo "FAIL $1 on $2: unsound numbers"
    failed=1
  fi
}

for m in global_batch vocabulary experts head_dim token_types heads ffn padding; do
  check "$m" typical 0
  check "$m" fastest 0
done
check sequence fastest 0
# One microbatch through a 2-layer model at 1e6 FLOP/s and 1 MB/s takes longer than Time
# holds: refused, not wrapped.
check vocabulary slowest 2
grep -q '^nest place: .*one microbatch of this configuration would take too long' \
  vocabulary-slowest.err || { echo "FAIL: $(cat vocabulary-slowest.err)"; failed=1; }
exit $failed
