#pragma once
// Fixed workloads the model and accelerator fuzzers pair their input with: the bundled H100
// and Llama-2-7B files' figures (workloads/accelerators/h100-sxm.yaml,
// workloads/models/llama2-7b.yaml), built in code so that a fuzzer reads no file.

#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"

namespace nest::fuzz {

inline workload::Accelerator h100() {
  return workload::parse_accelerator(R"(kind: accelerator
name: h100-sxm
peak_flop_rate: {bf16: 989 TFLOP/s, fp16: 989 TFLOP/s, fp8: 1979 TFLOP/s, tf32: 494.5 TFLOP/s}
vector_flop_rate: 67 TFLOP/s
hbm: 80 GiB
hbm_bandwidth: 3.35 TB/s
efficiency: {gemm: 0.803, memory: 0.8}
)",
                                     "h100-sxm.yaml");
}

inline workload::Model llama2_7b() {
  return workload::parse_model(R"(kind: model
name: llama2-7b
layers: 32
hidden: 4096
heads: 32
ffn_hidden: 11008
activation: swiglu
norm: rmsnorm
position_embedding: rotary
vocabulary: 32000
tied_embeddings: false
bias: false
dropout: false
sequence_length: 4096
global_batch: 1024
)",
                               "llama2-7b.yaml");
}

}  // namespace nest::fuzz
