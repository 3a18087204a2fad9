#!/usr/bin/env bash
# Measured training runs stated on the command line: all 19 rows of
# tests/validation/reference/measured/training-runs.tsv (Narayanan et al. 2021 Table 1,
# Korthikanti et al. 2022 Table 5 and its 530B/2,240-GPU run) as `nest place --tp --pp --dp
# --vp --mb --zero --recompute --sp --order --partition` plus the software flags of their table
# (--tp-overlap, --grad-accumulation-bytes, --grad-buckets, --grad-overlap, --p2p-overlap), each priced within
# a picosecond of what `nest validate` gives for the same row through the library
# (nest/validate/training_runs.h). The kinds: 1F1B with full recomputation, interleaved 1F1B,
# sequence parallelism with selective recomputation, the 530B run with data parallelism,
# Narayanan's 2021 software with and without a pipeline (PyTorch DDP buckets). Two plan files
# replay (`nest simulate --plan`) as `nest validate` replays the row, and a changed flag changes
# the figure (the comparison can fail). Usage: place_training_runs.sh <nest> <source-dir>
set -u
nest="$1"
src="$2"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
fail() { echo "FAIL $*"; failed=1; }

tsv="$src/tests/validation/reference/measured/training-runs.tsv"
mapfile -t rows < <(tail -n +2 "$tsv" | cut -f1)
[ "${#rows[@]}" -eq 19 ] || fail "expected the 19 rows of training-runs.tsv, got ${#rows[@]}"

# `nest validate` on these rows only (the layout of tests/validation/reference/).
mkdir -p "$tmp/ref/nest-artifact" "$tmp/ref/measured"
cp "$src"/workloads/profiles/gpt3-175b-*.yaml "$tmp/ref/nest-artifact/"
cp "$src"/tests/validation/reference/measured/nccl-*.tsv "$tmp/ref/measured/"
cp "$src/tests/validation/reference/nest-artifact/expected-nest.tsv" "$tmp/ref/nest-artifact/"
{
  head -1 "$tsv"
  for id in "${rows[@]}"; do grep "^$id	" "$tsv"; done
} >"$tmp/ref/measured/training-runs.tsv"
"$nest" validate --reference "$tmp/ref" --source "$src" --json >"$tmp/validate.json"
[ $? -le 1 ] || fail "nest validate: $(head -3 "$tmp/validate.json")"

# Per row: a model file from its columns (as validate::gpt_model builds it) and the flags.
/usr/bin/python3 - "$tmp" "$tmp/ref/measured/training-runs.tsv" <<'PY'
import csv, os, sys
tmp, tsv = sys.argv[1:3]
for r in csv.DictReader(open(tsv), delimiter="\t"):
    h = int(r["hidden"])
    open(os.path.join(tmp, r["id"] + ".yaml"), "w").write(f"""kind: model
name: {r["id"]}
layers: {r["layers"]}
hidden: {h}
heads: {r["heads"]}
ffn_hidden: {4 * h}
activation: gelu
norm: layernorm
position_embedding: learned
max_positions: {r["sequence"]}
vocabulary: {r["vocabulary"]}
tied_embeddings: true
bias: true
dropout: true
sequence_length: {r["sequence"]}
global_batch: {r["global_batch"]}
""")
    flags = ["--devices", r["gpus"], "--precision", r["precision"],
             "--tp", r["tensor"], "--pp", r["pipeline"], "--dp", r["data"],
             "--vp", r["virtual_stages"], "--mb", r["micro_batch"], "--zero", "0",
             "--recompute", r["recompute"], "--sp", "on" if r["sequence_parallel"] == "1" else "off",
             "--order", "tp-dp-pp", "--partition", "uniform"]
    # The software of the row's table (validate::software_of): Megatron-LM of 2022 (local DDP
    # after the backward), or of early 2021: no asynchronous tensor-parallel communication, the
    # local DDP with a pipeline, PyTorch DDP without (25 MiB buckets beside the backward; the
    # bucket count is set below from the plan's weights).
    ddp = r["source"].startswith("Narayanan") and r["pipeline"] == "1"
    if r["source"].startswith("Narayanan"):
        flags += ["--tp-overlap", "off", "--grad-accumulation-bytes", "6" if ddp else "10"]
    flags += ["--grad-overlap", "on"] if ddp else ["--grad-buckets", "1", "--grad-overlap", "off"]
    # Both tables' Megatron-LM waits for its stage-boundary sends (no overlap_p2p_comm yet).
    flags += ["--p2p-overlap", "off"]
    open(os.path.join(tmp, r["id"] + ".flags"), "w").write(" ".join(flags))
    if ddp:
        open(os.path.join(tmp, r["id"] + ".ddp"), "w").write("")
PY

# validate's figure for a row: predicted or replayed.
figure() {
  /usr/bin/python3 - "$tmp/validate.json" "$1" "$2" <<'PY'
import json, sys
cases, row, what = json.load(open(sys.argv[1]))["cases"], sys.argv[2], sys.argv[3]
name = f"{row}: iteration time, predicted (s)" if what == "predicted" else \
    f"{row}: iteration time, replayed against predicted (s)"
print(repr(next(c["got"] for c in cases if c["group"] == "training" and c["name"] == name)))
PY
}
same() {  # two times in seconds within a picosecond
  /usr/bin/python3 -c "import sys; sys.exit(abs(float(sys.argv[1]) - float(sys.argv[2])) > 1e-12)" "$1" "$2"
}
json_field() {  # file, python expression on the document d
  /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(repr($2))" "$1"
}

for id in "${rows[@]}"; do
  read -r -a flags <"$tmp/$id.flags"
  if [ -e "$tmp/$id.ddp" ]; then
    # PyTorch DDP's buckets: the stage's 2-byte gradients (its weights) in 25 MiB.
    "$nest" place --json --model "$tmp/$id.yaml" --accelerator a100-80gb --topology selene_4480 \
      --baselines none "${flags[@]}" >"$tmp/$id.first.json" 2>"$tmp/$id.err" ||
      { fail "$id: nest place: $(cat "$tmp/$id.err")"; continue; }
    buckets=$(json_field "$tmp/$id.first.json" \
      "-(-d['partition'][0]['memory']['weights_bytes'] // (25 * 2**20))")
    flags+=(--grad-buckets "$buckets")
  fi
  "$nest" place --json --model "$tmp/$id.yaml" --accelerator a100-80gb --topology selene_4480 \
    --baselines none "${flags[@]}" -o "$tmp/$id.plan.yaml" >"$tmp/$id.json" 2>"$tmp/$id.err" ||
    { fail "$id: nest place: $(cat "$tmp/$id.err")"; continue; }
  want=$(figure "$id" predicted)
  got=$(json_field "$tmp/$id.json" "d['predicted']['iteration_time_s']")
  same "$got" "$want" || fail "$id: nest place ${flags[*]}: $got s, nest validate $want s"
  [ "$(json_field "$tmp/$id.json" "d['predicted']['iteration_time_s'] > 0")" = True ] ||
    fail "$id: no iteration time"
done

# The plan files reload with the flags they were made with: the replay of the plan is the
# replay `nest validate` makes of the row (same buckets, same reduction after the backward).
for id in korthikanti-t5-22b-sp-sel korthikanti-530b-2240; do
  "$nest" simulate --plan "$tmp/$id.plan.yaml" -o "$tmp/$id.h5" --json >"$tmp/$id.sim.json" \
    2>"$tmp/$id.sim.err" || { fail "$id: nest simulate: $(cat "$tmp/$id.sim.err")"; continue; }
  want=$(figure "$id" replayed)
  got=$(json_field "$tmp/$id.sim.json" "d['summary']['iteration_time_s']")
  same "$got" "$want" || fail "$id: nest simulate --plan: $got s, nest validate replays $want s"
done

# A flag that changes the configuration changes the figure: the 530B run with the default
# reduction (4 buckets beside the last backward) is not the measured setup's price.
read -r -a flags < <(sed 's/--grad-buckets 1 --grad-overlap off/--grad-buckets 4 --grad-overlap on/' \
  "$tmp/korthikanti-530b-2240.flags")
"$nest" place --json --model "$tmp/korthikanti-530b-2240.yaml" --accelerator a100-80gb \
  --topology selene_4480 --baselines none "${flags[@]}" \
  >"$tmp/other.json" 2>&1 || fail "530B with the default reduction: $(cat "$tmp/other.json")"
same "$(json_field "$tmp/other.json" "d['predicted']['iteration_time_s']")" \
  "$(figure korthikanti-530b-2240 predicted)" && fail "the reduction flags change nothing"
# So does letting the stages send beside the compute (the 530B run's 1.1 s of transfers).
read -r -a flags < <(sed 's/--p2p-overlap off/--p2p-overlap on/' "$tmp/korthikanti-530b-2240.flags")
"$nest" place --json --model "$tmp/korthikanti-530b-2240.yaml" --accelerator a100-80gb \
  --topology selene_4480 --baselines none "${flags[@]}" \
  >"$tmp/p2p.json" 2>&1 || fail "530B with overlapped sends: $(cat "$tmp/p2p.json")"
same "$(json_field "$tmp/p2p.json" "d['predicted']['iteration_time_s']")" \
  "$(figure korthikanti-530b-2240 predicted)" && fail "--p2p-overlap changes nothing"
exit $failed
