#pragma once
/// \file
/// The operator graph of one layer on one device: the operators (GEMMs, attention, norms,
/// element-wise ops, embedding lookups, router and experts, loss) in a topological order of the
/// DAG that the tensors between them form, with each operator's FLOPs, HBM traffic, saved
/// activations and roofline times, and the collectives that the tensor edges carry.
///
/// The DAG is built and sorted with Boost.Graph inside src/workload/; this header only holds
/// the result.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/workload/layer_profile.h"

namespace nest::workload {

/// How an operator is timed.
enum class OperatorKind : std::uint8_t {
  kMatmul,  ///< GEMM or batched GEMM: tensor-core rate; its FLOPs are model FLOPs
  kMemory,  ///< element-wise, norm, softmax, lookup, permutation: vector rate
};

/// One operator of a layer, per microbatch on one device.
struct Operator {
  std::string name;
  OperatorKind kind = OperatorKind::kMemory;
  Flops forward_flops;
  Bytes forward_bytes;  ///< HBM traffic: weights read + input tensors read + outputs written
  Bytes saved_bytes;    ///< tensors kept for the backward pass (Korthikanti et al. 2022 §4)
  /// Backward FLOPs as a multiple of the forward's: 2 for GEMMs (the input and the weight
  /// gradient, each a GEMM of the forward's size), 2.5 for flash attention (its backward
  /// recomputes the scores: 5 GEMMs against 2).
  double backward_factor = 2;
  Bytes backward_bytes;  ///< HBM traffic of the backward
  Time forward;          ///< roofline time of the forward
  /// Roofline time of the backward, from the operator's own backward kernels: a GEMM's input-
  /// and weight-gradient GEMMs at their own shapes' rates, a memory-bound operator's traffic.
  Time backward;
  Time input_gradient;   ///< of `backward`, the input-gradient GEMMs (matmuls)
  Time weight_gradient;  ///< of `backward`, the weight-gradient GEMMs (matmuls)
  /// Part of the attention core, run again under selective recomputation (Korthikanti et al.
  /// 2022 §4.2).
  bool attention_core = false;
  /// Of `saved_bytes`, what selective recomputation frees (and recomputes).
  Bytes recomputed_bytes;
};

/// A tensor between two operators (indices into `LayerGraph::operators`).
struct TensorEdge {
  std::size_t from = 0;
  std::size_t to = 0;
  Bytes bytes;  ///< the tensor as `to` reads it (after any collective on the edge)
};

/// One layer's operators and what the placer needs of it.
struct LayerGraph {
  std::string name;
  std::vector<Operator> operators;  ///< in topological order
  std::vector<TensorEdge> edges;
  /// Collectives per microbatch (forward + backward counts), merged by (op, axis, size).
  std::vector<LayerCollective> collectives;
  Bytes input_bytes;            ///< what full recomputation keeps
  Bytes output_bytes;           ///< what a stage boundary after this layer sends, per device
  Bytes output_gather;          ///< the next stage's all-gather of it (`Layer::output_gather`)
  std::int64_t parameters = 0;  ///< held by one device
  std::int64_t expert_parameters = 0;  ///< of `parameters`, expert weights
  bool recomputed = false;             ///< re-run under full activation recomputation

  /// Σ forward_flops of the matmul operators.
  [[nodiscard]] Flops forward_matmul_flops() const;
  /// Σ saved_bytes: the layer's activation bytes.
  [[nodiscard]] Bytes saved_bytes() const;
  /// Σ forward of the attention-core operators: what selective recomputation adds.
  [[nodiscard]] Time attention_core_forward() const;
  /// Σ recomputed_bytes: what selective recomputation frees.
  [[nodiscard]] Bytes recomputed_bytes() const;
};

}  // namespace nest::workload
