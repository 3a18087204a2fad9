#pragma once
/// \file
/// The intra-layer configurations the placer tries for a model (architecture + accelerator):
/// tensor parallel t a power of two up to a bound (the scale-up domain by default), sequence
/// parallelism whenever t > 1 (it keeps the communication volume and cuts activation memory, as
/// Megatron-LM runs it), expert parallel e a power of two dividing the expert count (MoE
/// models), context parallel c from a list (default 1), and micro-batch sizes from a list.
/// Configurations the model cannot run (`workload::check_parallel_config`) are left out.

#include <optional>
#include <vector>

#include "nest/workload/layer_profile.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

namespace nest::placer {

struct CandidateOptions {
  int max_tensor_parallel = 8;  ///< largest t tried (power of two)
  int max_expert_parallel = 8;  ///< largest e tried for MoE models
  std::vector<int> context_parallel = {1};
  std::vector<int> micro_batches = {1, 2, 4};
  /// Tensor-parallel degrees to try (any, not only powers of two); empty: the powers of two up
  /// to `max_tensor_parallel`.
  std::vector<int> tensor_parallel;
  /// Expert-parallel degrees to try; empty: the powers of two up to `max_expert_parallel`
  /// dividing the experts (1 for a dense model).
  std::vector<int> expert_parallel;
  /// Sequence parallelism fixed on or off (it has no effect at t = 1); empty: on whenever
  /// t > 1.
  std::optional<bool> sequence_parallel;
};

/// The configurations to build, in a fixed order (micro-batch, then t, then c, then e). When no
/// configuration is left, throws the model's reason for the first one tried
/// (`workload::check_parallel_config`: the degree at fault and what would fit).
[[nodiscard]] std::vector<workload::ParallelConfig> candidate_configs(
    const workload::Model& model, const workload::BuildOptions& build,
    const CandidateOptions& options);

}  // namespace nest::placer
