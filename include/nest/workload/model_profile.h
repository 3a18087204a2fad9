#pragma once
/// \file
/// Model + accelerator → `LayerProfile`: for each intra-layer parallel configuration, the layer
/// chain (layer 0 the embedding, layers 1..L the transformer blocks, layer L+1 the head: final
/// norm, pooler, output projection and loss) with roofline times, parameters, activations and
/// collectives, all per microbatch on one device.
///
/// Conventions (each one a choice; see the README of the workload module):
/// - Tensor parallelism t is Megatron's: QKV and first MLP matrices split by columns, output
///   projection and second MLP matrix by rows; one all-reduce forward and one backward per
///   block half, or with sequence parallelism an all-gather and a reduce-scatter forward and
///   the same backward plus the re-gather of the saved input (Korthikanti et al. 2022 §4.2).
///   KV heads fewer than t are replicated. The vocabulary is padded to a multiple of
///   `vocabulary_padding · t` and split by rows.
/// - Context parallelism c splits the sequence: each device holds s/c queries and all-gathers
///   K and V (forward; backward all-gathers them again and reduce-scatters their gradients).
/// - Expert parallelism e: a stage replica is t·c·e devices; each of its e groups of t·c runs
///   its own `micro_batch` sequences through the dense parts (so a replica step is e·b
///   sequences) and holds experts/e experts; tokens move by all-to-all (dispatch and combine,
///   forward and backward). Mixture of experts with t > 1 needs sequence parallelism (as in
///   Megatron-Core).
/// - Activations are bf16/fp16 (2 bytes; 4 for fp32/tf32), dropout masks 1 byte, the loss's
///   logits fp32.

#include <cstdint>
#include <string>
#include <vector>

#include "nest/workload/accelerator.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/model.h"
#include "nest/workload/operator_graph.h"

namespace nest::workload {

/// One intra-layer parallel configuration.
struct ParallelConfig {
  int tensor = 1;
  int context = 1;
  int expert = 1;
  bool sequence = false;  ///< sequence parallelism (no effect when tensor == 1)
  int micro_batch = 1;    ///< sequences per microbatch (per expert group)
};

/// What does not vary between variants.
struct BuildOptions {
  /// A key of the accelerator's peak_flop_rate. Under "fp8" the linear layers' GEMMs run at the
  /// fp8 rate with fp8's own efficiency on 1-byte operands; the attention core, activations and
  /// weights stay 2-byte (Transformer Engine's recipe).
  std::string precision = "bf16";
  bool flash_attention = false;      ///< fused attention: no s×s tensors kept
  std::int64_t sequence_length = 0;  ///< 0: the model's
  std::int64_t global_batch = 0;     ///< sequences per iteration; 0: the model's (or none)
  /// Megatron-LM's asynchronous tensor-parallel communication: in the backward pass the
  /// all-reduce (sequence parallel: reduce-scatter) of a column-parallel GEMM's input gradient
  /// runs beside its weight-gradient GEMM, and the sequence-parallel re-gather of its input
  /// beside its input-gradient GEMM (`LayerCollective::overlap`). Megatron-LM since 2021-09
  /// (LinearWithGradAccumulationAndAsyncCommunication); off for older code.
  bool tp_comm_overlap = true;
  /// Memory traffic per parameter and microbatch of adding a microbatch's weight gradients to
  /// the accumulated ones (a memory-bound pass in each layer's backward): 10 in Megatron-LM's
  /// local DDP without gradient-accumulation fusion (read the fp16 gradient, read and write the
  /// fp32 main_grad; megatron/model/distributed.py before 2022-02), 6 for PyTorch DDP's fp16
  /// .grad accumulation, 0 with the fusion (--gradient-accumulation-fusion: the weight-gradient
  /// GEMM accumulates into main_grad itself, Megatron-LM since 2022-02).
  std::int64_t gradient_accumulation_bytes = 0;
};

/// Throws `Error` (input) when `config` cannot run `model` (heads, KV heads, FFN size, experts
/// or sequence not divisible, expert parallelism on a dense model, ...); the key names the
/// parallel degree at fault ("tensor_parallel", "expert_parallel", "context_parallel",
/// "sequence_parallel", "micro_batch", "global_batch").
void check_parallel_config(const Model& model, const ParallelConfig& config,
                           const BuildOptions& options);

/// The operator graphs of the three kinds of layer: [0] embedding, [1] transformer block (all
/// blocks are alike), [2] head. Checks the configuration first.
[[nodiscard]] std::vector<LayerGraph> layer_graphs(const Model& model, const Accelerator& device,
                                                   const ParallelConfig& config,
                                                   const BuildOptions& options);

/// The `Layer` a graph stands for (recompute time = forward time for recomputed layers).
[[nodiscard]] Layer to_layer(const LayerGraph& graph, std::int64_t parameter_bytes_each);

/// The variant of one configuration: layers 0..L+1. O(L + operators).
[[nodiscard]] Variant build_variant(const Model& model, const Accelerator& device,
                                    const ParallelConfig& config, const BuildOptions& options);

/// The profile of every configuration in `configs`, with the model's totals: parameters
/// (unpadded, tied embeddings once), and model FLOPs per iteration (3 × the forward GEMM FLOPs
/// of one sequence without any split, × global batch; 0 without a global batch).
[[nodiscard]] LayerProfile build_profile(const Model& model, const Accelerator& device,
                                         const std::vector<ParallelConfig>& configs,
                                         const BuildOptions& options);

}  // namespace nest::workload
