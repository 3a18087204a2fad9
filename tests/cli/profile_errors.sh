#!/usr/bin/env bash
# Negative tests of `nest profile`: exact message on stderr, exit status 2, nothing on stdout.
# Usage: bash profile_errors.sh <path-to-nest> <source-dir>
set -u
nest=$1
cd "$2" || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

expect_error() {
  local expected=$1
  shift
  local out err status
  out=$("$nest" profile "$@" 2>"$tmp/err")
  status=$?
  err=$(cat "$tmp/err")
  if [[ $status -ne 2 || "$err" != "$expected" || -n "$out" ]]; then
    echo "FAIL: nest profile $*"
    echo "  status $status (expected 2)"
    echo "  got:      $err"
    echo "  expected: $expected"
    failures=$((failures + 1))
  fi
}

expect_error 'nest profile: --accelerator: unknown accelerator (got "h200"; expected one of a100-80gb, b200, h100-sxm, tpuv4, or the path of a YAML file)' \
  --model gpt3-175b --accelerator h200
expect_error 'nest profile: --model: unknown model (got "gpt4"; expected one of bert-large, gpt3-175b, llama2-7b, llama3-70b, llama3.1-405b, mixtral-8x7b, or the path of a YAML file)' \
  --model gpt4 --accelerator h100
expect_error 'nest profile: --model: ambiguous model name (got "llama"; expected one of llama2-7b, llama3-70b, llama3.1-405b)' \
  --model llama --accelerator h100
expect_error 'nest profile: --tp: attention heads not divisible by the tensor-parallel degree (got "7"; expected a divisor of 96 (heads))' \
  --model gpt3-175b --accelerator h100 --tp 7
expect_error 'nest profile: --ep: experts not divisible by the expert-parallel degree (got "3"; expected a divisor of 8 (experts))' \
  --model mixtral-8x7b --accelerator h100 --ep 3
expect_error 'nest profile: --ep: expert parallelism on a model without experts (got "2"; expected 1 for a dense model)' \
  --model llama2-7b --accelerator h100 --ep 2
expect_error 'nest profile: --cp: sequence length not divisible by the context-parallel degree (got "3"; expected a divisor of 2048 (sequence length))' \
  --model gpt3-175b --accelerator h100 --cp 3
expect_error 'nest profile: --sp: mixture of experts with tensor parallelism needs sequence parallelism (got "false"; expected true when tensor_parallel > 1 (as in Megatron-Core))' \
  --model mixtral-8x7b --accelerator h100 --tp 2
expect_error 'nest profile: --seq: longer than the learned position table (got "4096"; expected at most 2048 (max_positions))' \
  --model gpt3-175b --accelerator h100 --seq 4096
expect_error 'nest profile: --precision: precision not offered by accelerator tpuv4 (got "fp8"; expected one of bf16)' \
  --model gpt3-175b --accelerator tpuv4 --precision fp8
expect_error 'nest profile: --accelerator: missing --accelerator (expected --model M --accelerator A, or --profile FILE)' \
  --model gpt3-175b
expect_error 'nest profile: --tp: no variant of the profile matches the parallel degrees given (expected one of: t=4 e=1 c=1 sp=off; t=8 e=1 c=1 sp=off)' \
  --profile gpt3-175b-h100 --tp 2

# Bad model files: unknown key, heads that do not divide the hidden size, missing top_k.
cat >"$tmp/typo.yaml" <<'YAML'
kind: model
name: typo
layers: 2
hidden: 64
heads: 4
ffn_hiden: 256
YAML
expect_error "nest profile: $tmp/typo.yaml:6: ffn_hiden: unknown key \"ffn_hiden\" (expected one of kind, name, layers, hidden, heads, kv_heads, head_dim, ffn_hidden, activation, norm, position_embedding, max_positions, token_types, vocabulary, vocabulary_padding, tied_embeddings, bias, dropout, embedding_norm, final_norm, pooler, causal, experts, top_k, sequence_length, global_batch)" \
  --model "$tmp/typo.yaml" --accelerator h100
cat >"$tmp/heads.yaml" <<'YAML'
kind: model
name: heads
layers: 2
hidden: 100
heads: 3
ffn_hidden: 400
activation: gelu
norm: layernorm
position_embedding: rotary
vocabulary: 1000
tied_embeddings: true
bias: false
dropout: false
sequence_length: 128
YAML
expect_error "nest profile: $tmp/heads.yaml:5: heads: hidden size not divisible by heads (got \"3\"; expected a divisor of hidden, or an explicit head_dim)" \
  --model "$tmp/heads.yaml" --accelerator h100
sed -e 's/^heads: 3/heads: 4/' -e '$a experts: 4' "$tmp/heads.yaml" >"$tmp/moe.yaml"
expect_error "nest profile: $tmp/moe.yaml:1: (document): missing required key \"top_k\" (expected top_k with experts)" \
  --model "$tmp/moe.yaml" --accelerator h100
sed -e 's/^heads: 3/heads: 24/' -e 's/^hidden: 100/hidden: 96/' -e '$a kv_heads: 6' \
  "$tmp/heads.yaml" >"$tmp/gqa.yaml"
expect_error 'nest profile: --tp: KV heads and the tensor-parallel degree do not divide (got "4"; expected a divisor or a multiple of 6 (KV heads))' \
  --model "$tmp/gqa.yaml" --accelerator h100 --tp 4
cat >"$tmp/accel.yaml" <<'YAML'
kind: accelerator
name: slow
peak_flop_rate: {bf16: 100 TFLOP/s}
hbm: 16 GiB
hbm_bandwidth: 1 TB/s
efficiency: {gemm: 1.5, memory: 0.8}
YAML
expect_error "nest profile: $tmp/accel.yaml:6: efficiency.gemm: out of range (got \"1.5\"; expected a number in [0.001, 1])" \
  --model gpt3-175b --accelerator "$tmp/accel.yaml"

if [[ $failures -ne 0 ]]; then
  echo "$failures failure(s)"
  exit 1
fi
echo "all profile error tests passed"
