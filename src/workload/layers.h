#pragma once
// Private to src/workload: the operator graphs of the embedding, a transformer block and the
// head, for one device under one parallel configuration.

#include <cstdint>

#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/operator_graph.h"
#include "nest/workload/roofline.h"

namespace nest::workload::detail {

/// Tensor dimensions on one device (names follow Korthikanti et al. 2022).
struct Dims {
  int t = 1, c = 1, e = 1;
  bool sp = false;
  bool flash = false;
  bool causal = true;      ///< decoder attention (flash attention skips the masked blocks)
  bool tp_overlap = true;  ///< asynchronous tensor-parallel communication in the backward
  std::int64_t s = 0;      ///< full sequence (the keys each query attends to)
  std::int64_t S = 0;      ///< local sequence: s / c
  std::int64_t Sr = 0;     ///< rows outside the tensor-parallel region: S / t under SP, else S
  std::int64_t b = 0;
  std::int64_t T = 0;   ///< local tokens S·b
  std::int64_t Tr = 0;  ///< Sr·b
  std::int64_t h = 0;
  std::int64_t heads = 0;  ///< query heads on this device
  std::int64_t kv = 0;     ///< KV heads on this device (replicated when fewer than t)
  std::int64_t hd = 0;
  std::int64_t ffn = 0;      ///< FFN width on this device: ffn_hidden / t
  std::int64_t up = 0;       ///< first FFN matrix width: ffn, or 2·ffn for SwiGLU
  std::int64_t vocab = 0;    ///< padded vocabulary rows on this device
  std::int64_t experts = 0;  ///< experts on this device
  std::int64_t top_k = 0;
  std::int64_t act_bytes = 2;  ///< bytes per activation element
  std::int64_t param_bytes = 2;
  std::int64_t gemm_bytes = 2;  ///< operand bytes of the linear layers' GEMMs (1 under fp8)
};

/// Dimensions of `config` (already checked).
[[nodiscard]] Dims make_dims(const Model& model, const ParallelConfig& config,
                             const BuildOptions& options);

[[nodiscard]] LayerGraph embedding_graph(const Model& model, const Dims& d, const Roofline& r);
[[nodiscard]] LayerGraph block_graph(const Model& model, const Dims& d, const Roofline& r);
[[nodiscard]] LayerGraph head_graph(const Model& model, const Dims& d, const Roofline& r);

}  // namespace nest::workload::detail
