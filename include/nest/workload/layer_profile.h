#pragma once
/// \file
/// `LayerProfile`: all the placer sees of a workload. Per intra-layer parallel variant (tensor t,
/// expert e, context c, sequence parallel, micro-batch size), the chain of layers with the time
/// and memory of one microbatch on one device of a stage replica, and the collectives each layer
/// issues inside its replica. Built from a model + accelerator (nest/workload/model.h) or read
/// from a layer-profile file (nest/workload/profile_file.h); both give this same structure.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "nest/core/units.h"

namespace nest::workload {

/// Activation recomputation (Korthikanti et al. 2022 §4): none keeps every activation for the
/// backward pass; selective recomputes only the attention core (QK^T, softmax, softmax dropout,
/// attention over V) and keeps the rest; full keeps each recomputed layer's input and runs its
/// forward again in the backward pass.
enum class Recompute : std::uint8_t { kNone, kSelective, kFull };

/// "none", "selective", "full".
[[nodiscard]] std::string_view to_string(Recompute mode) noexcept;
/// Inverse of `to_string`; also "true" (full) and "false" (none), the older boolean form.
/// Throws `Error` (input, key "recompute") naming the accepted values.
[[nodiscard]] Recompute parse_recompute(std::string_view text);

/// Collective operations a layer issues inside its stage replica.
enum class CollectiveOp : std::uint8_t {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kAllToAll,
};
/// "allreduce", "allgather", "reducescatter", "alltoall" (nccl-tests' names).
[[nodiscard]] std::string_view to_string(CollectiveOp op) noexcept;

/// The parallel axis whose device group runs a collective.
enum class ParallelAxis : std::uint8_t { kTensor, kExpert, kContext };
/// "tensor", "expert", "context".
[[nodiscard]] std::string_view to_string(ParallelAxis axis) noexcept;

/// One collective of one layer, per microbatch. `size` follows nccl-tests: the full buffer for
/// allreduce, the gathered size for all-gather/reduce-scatter, what each rank sends for
/// all-to-all. `count` is how many times it runs per microbatch in forward + backward (e.g. a
/// Megatron attention block: 1 allreduce forward + 1 backward = 2).
struct LayerCollective {
  CollectiveOp op = CollectiveOp::kAllReduce;
  ParallelAxis axis = ParallelAxis::kTensor;
  Bytes size;
  int count = 1;
  /// Runs again when the layer is recomputed (forward collectives do).
  int recompute_count = 0;
  /// Per run, compute it runs beside (Megatron-LM's asynchronous tensor-parallel communication
  /// in the backward pass: the input gradient's all-reduce beside the weight-gradient GEMM);
  /// only the excess of its time over this costs time. Zero: not overlapped.
  Time overlap;
};

/// One layer of the chain, on one device of a stage replica, per microbatch.
struct Layer {
  std::string name;
  Time forward;
  Time backward;
  /// Extra time when the layer's activations are recomputed in the backward pass.
  Time recompute;
  /// Extra time under selective recomputation: the forward of the attention core (QK^T,
  /// softmax, softmax dropout, attention over V) run again in the backward pass (Korthikanti et
  /// al. 2022 §4.2). Zero for a layer without one, and with flash attention (whose backward
  /// recomputes the scores anyway).
  Time selective_recompute;
  Bytes parameter_bytes;        ///< weights held by one device (fp16/bf16 as profiled)
  std::int64_t parameters = 0;  ///< parameter count held by one device (for optimizer state)
  /// Of `parameters`, those of experts (sharded over the expert-parallel group). Their
  /// gradients are reduced over the d data-parallel replicas only; the other parameters are
  /// also replicated over the c·e context/expert groups inside a replica, so their gradients
  /// are reduced over c·e·d devices.
  std::int64_t expert_parameters = 0;
  Bytes activation_bytes;  ///< activations kept for backward, one microbatch, no recompute
  /// Of `activation_bytes`, what selective recomputation keeps: all but the attention core's
  /// s×s tensors (softmax output, dropout mask and output), i.e. sbh·34/t with sequence
  /// parallelism (Korthikanti et al. 2022 §4.2). Equal to `activation_bytes` without a core.
  Bytes selective_activation_bytes;
  Bytes input_bytes;   ///< the layer's input, what full recomputation keeps
  Bytes output_bytes;  ///< what the layer sends on when a stage boundary follows it
  /// When the output is replicated over the tensor-parallel group (no sequence parallelism):
  /// the gathered size the next stage all-gathers after each shard sent its 1/t slice
  /// (`output_bytes`), the scatter-gather of Narayanan et al. 2021 §4.1; zero otherwise.
  Bytes output_gather;
  Flops flops;  ///< forward + backward FLOPs of one microbatch on one device (0 if unknown)
  std::vector<LayerCollective> collectives;
};

/// One intra-layer parallel configuration and its layer chain.
struct Variant {
  int tensor_parallel = 1;
  int expert_parallel = 1;
  int context_parallel = 1;
  bool sequence_parallel = false;
  int micro_batch = 1;          ///< sequences per microbatch
  int devices_per_replica = 1;  ///< devices running one stage replica (t·c, or as profiled)
  /// Microbatches per iteration before the data-parallel split (global batch / micro batch).
  std::int64_t microbatches = 1;
  std::vector<Layer> layers;
};

/// A workload: its variants and what is known of the whole model.
struct LayerProfile {
  std::string model;
  std::string accelerator;
  std::int64_t sequence_length = 0;
  std::int64_t global_batch = 0;  ///< sequences per iteration
  Bytes hbm;                      ///< memory capacity of one device
  bool recompute_allowed = true;  ///< whether plans may use full activation recomputation
  /// Whether the layers carry selective-recomputation figures (`Layer::selective_recompute`,
  /// `selective_activation_bytes`); plans recompute selectively only then (and when
  /// `recompute_allowed`).
  bool selective_recompute_allowed = false;
  std::int64_t total_parameters = 0;  ///< whole model (0 if unknown)
  /// Model FLOPs per iteration (forward + backward, no recompute), for MFU; 0 if unknown.
  Flops flops_per_iteration;
  FlopRate peak_flop_rate;  ///< per device, for MFU; 0 if unknown
  std::vector<Variant> variants;
};

}  // namespace nest::workload
