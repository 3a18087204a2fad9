#include "nest/placer/variants.h"

#include <optional>

#include "nest/core/error.h"

namespace nest::placer {

std::vector<workload::ParallelConfig> candidate_configs(const workload::Model& model,
                                                        const workload::BuildOptions& build,
                                                        const CandidateOptions& options) {
  std::vector<int> experts = options.expert_parallel;
  if (experts.empty()) {
    experts.push_back(1);
    if (model.is_moe()) {
      for (int e = 2; e <= options.max_expert_parallel && e <= model.experts; e *= 2) {
        experts.push_back(e);
      }
    }
  }
  std::vector<int> tensors = options.tensor_parallel;
  if (tensors.empty()) {
    for (int t = 1; t <= options.max_tensor_parallel; t *= 2) tensors.push_back(t);
  }
  std::vector<workload::ParallelConfig> out;
  std::optional<Error> first;
  for (const int mb : options.micro_batches) {
    for (const int t : tensors) {
      for (const int c : options.context_parallel) {
        for (const int e : experts) {
          const bool sp = options.sequence_parallel.value_or(t > 1) && t > 1;
          const workload::ParallelConfig config{
              .tensor = t, .context = c, .expert = e, .sequence = sp, .micro_batch = mb};
          try {
            workload::check_parallel_config(model, config, build);
          } catch (const Error& error) {
            if (!first) first = error;
            continue;  // this model cannot run this configuration
          }
          out.push_back(config);
        }
      }
    }
  }
  if (out.empty() && first) throw *first;
  return out;
}

}  // namespace nest::placer
