#include "nest/placer/variants.h"

#include "nest/core/error.h"

namespace nest::placer {

std::vector<workload::ParallelConfig> candidate_configs(const workload::Model& model,
                                                        const workload::BuildOptions& build,
                                                        const CandidateOptions& options) {
  std::vector<int> experts{1};
  if (model.is_moe()) {
    for (int e = 2; e <= options.max_expert_parallel && e <= model.experts; e *= 2) {
      experts.push_back(e);
    }
  }
  std::vector<workload::ParallelConfig> out;
  for (const int mb : options.micro_batches) {
    for (int t = 1; t <= options.max_tensor_parallel; t *= 2) {
      for (const int c : options.context_parallel) {
        for (const int e : experts) {
          const workload::ParallelConfig config{
              .tensor = t, .context = c, .expert = e, .sequence = t > 1, .micro_batch = mb};
          try {
            workload::check_parallel_config(model, config, build);
          } catch (const Error&) {
            continue;  // this model cannot run this configuration
          }
          out.push_back(config);
        }
      }
    }
  }
  return out;
}

}  // namespace nest::placer
