#pragma once
/// \file
/// The memory model: bytes a device of a pipeline stage needs, under one of two rule sets
/// (docs/architecture.md, "Workloads"). One implementation serves the placer's feasibility check
/// and the replay's memory trace.

#include <cstdint>

#include "nest/core/units.h"
#include "nest/workload/layer_profile.h"

namespace nest::workload {

enum class MemoryRules : std::uint8_t {
  /// Mixed-precision Adam: 2 (weights) + 2 (gradients) + 12 (fp32 master, momentum, variance)
  /// bytes per parameter; ZeRO-1 divides the optimizer part by the data-parallel degree, ZeRO-2
  /// the gradients too, ZeRO-3 the weights too. Activations: `in_flight` × the stage's
  /// activations; with full recomputation `in_flight` × the stages' layer inputs + the largest
  /// layer's activations (the working set while recomputing); with selective recomputation
  /// `in_flight` × the stage's `selective_activation_bytes` + the largest layer's attention
  /// core (recomputed while its backward runs).
  kMegatron,
  /// The rule of the published NEST numbers (tests/validation/reference/README.md): 2·P + A
  /// constant,
  /// plus (in_flight − 1) × (first layer's input under recomputation, else A). No optimizer.
  /// Split as weights = gradients = P (Σ parameter_bytes), optimizer = 0, activations =
  /// A + (in_flight − 1) × stash, so `total()` is exactly the artifact's figure.
  kNestArtifact,
};

/// How to count a stage's memory.
struct MemoryOptions {
  MemoryRules rules = MemoryRules::kMegatron;
  int zero_stage = 0;     ///< 0..3 (megatron rules only)
  int data_parallel = 1;  ///< the ZeRO sharding degree (>= 1); sharded parts are rounded up
  Recompute recompute = Recompute::kNone;
};

/// Memory of one device of a stage, split by category.
struct StageMemory {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer;
  /// Activation bytes held at the peak (all in-flight microbatches, recompute working set).
  Bytes activations;
  [[nodiscard]] Bytes total() const noexcept {
    return weights + gradients + optimizer + activations;
  }
  friend bool operator==(const StageMemory&, const StageMemory&) = default;
};

/// Peak memory of a device running layers [first, last) of `variant` as the stage that holds
/// `in_flight` microbatches (1F1B: the stage s-th from the end holds s).
///
/// Megatron rules count parameters by `Layer::parameters` (a layer that left it 0 counts
/// `parameter_bytes / 2`, i.e. 2-byte weights), so the weights are 2 bytes per parameter
/// whatever precision a profile reported. O(last − first). Throws `Error` (internal) when the
/// range is empty or outside the chain or `in_flight` < 1, and `Error` (input) when
/// `zero_stage` is not 0..3 or `data_parallel` < 1.
[[nodiscard]] StageMemory stage_memory(const Variant& variant, std::size_t first, std::size_t last,
                                       int in_flight, const MemoryOptions& options);

}  // namespace nest::workload
