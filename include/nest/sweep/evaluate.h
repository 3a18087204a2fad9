#pragma once
/// \file
/// The evaluator of real studies: a point becomes a topology (from its generator parameters), a
/// placer search on it (the NEST dynamic program, priced by the collective oracle under the
/// megatron rules or by the zero network under the nest-artifact rules), the study's baselines
/// priced by the same cost model, and optionally a replay of the chosen plan on the simulator.
///
/// Output columns (after point, inputs, status, error); a missing value is an empty CSV field:
///
/// | column                       | unit  | meaning                                              |
/// |------------------------------|-------|------------------------------------------------------|
/// | topology_devices             |       | devices of the built topology                        |
/// | devices_available            |       | the placer's budget (the `devices` axis, or all)     |
/// | devices_used                 |       | S · devices per replica · d of the chosen plan       |
/// | tensor_parallel ... micro_batch |    | the chosen variant: t, e, c, sequence parallel (0/1), |
/// |                              |       | sequences per microbatch                             |
/// | pipeline_stages, data_parallel, zero_stage, recompute (0/1), order | | the chosen plan       |
/// | partition                    |       | layers per stage, first stage first ("2 12 12 ...")  |
/// | iteration_s                  | s     | predicted iteration time                             |
/// | compute_s, bubble_s, collectives_s, transfers_s, dp_sync_s, optimizer_s | s | its breakdown |
/// | sequences_per_s, tokens_per_s | 1/s  | predicted throughput: the global batch (its tokens)  |
/// |                              |       | over the predicted iteration time                    |
/// | mfu                          |       | model FLOPs utilization (when FLOPs and peak known)  |
/// | peak_memory_bytes            | B     | the largest stage's memory per device                |
/// | memory_capacity_bytes        | B     | memory of one device                                 |
/// | replay_iteration_s           | s     | replayed iteration time (replay: true)               |
/// | replay_error                 |       | (replayed − predicted) / predicted                   |
/// | replay_tokens_per_s          | 1/s   | replayed throughput                                  |
/// | replay_mfu, replay_bubble_fraction |  | from the replay                                     |
/// | replay_peak_memory_bytes     | B     | the highest device peak of the replay                |
/// | oracle_simulations           |       | collective simulations the search needed             |
/// | <baseline>_iteration_s       | s     | per baseline of the study: its iteration time        |
/// | <baseline>_tokens_per_s      | 1/s   | its throughput                                       |
/// | <baseline>_plan              |       | "t8 pp12 dp10 mb1 zero1 recompute" or empty          |
/// | <baseline>_note              |       | how it was made, or why it has no plan               |
/// | speedup_vs_<baseline>        |       | <baseline>_iteration_s / iteration_s                 |
///
/// With `placer.verify: K` > 0 (megatron points; the chosen plan is then the replay's best of
/// the K candidates, `Job::placement`), after the baselines' columns:
///
/// | column                       | unit  | meaning                                              |
/// |------------------------------|-------|------------------------------------------------------|
/// | verified_candidates          |       | candidates replayed                                  |
/// | estimate_rank                |       | the chosen plan's rank by estimate (1 = best)        |
/// | replay_rank                  |       | the estimate's best plan's rank by replay            |
/// | regret                       |       | the estimate's best replayed / the chosen replayed-1 |
/// | estimate_best_iteration_s    | s     | the estimate's best plan: its estimate               |
/// | estimate_best_replay_s       | s     | and its replay                                       |
/// | verified_replay_s            | s     | the chosen plan's replay                             |
///
/// With `placer.verify: K` > 0 or any point with `replay: true`, last, per baseline (filled where
/// the chosen plan was replayed and the baseline's plan fits in memory):
///
/// | column                       | unit  | meaning                                              |
/// |------------------------------|-------|------------------------------------------------------|
/// | <baseline>_replay_s          | s     | the baseline's plan replayed                         |
/// | replay_speedup_vs_<baseline> |       | <baseline>_replay_s / the chosen plan's replay       |
///
/// A baseline name's '-' becomes '_' in column names (topology_agnostic_iteration_s).

#include <memory>
#include <string>
#include <vector>

#include "nest/sweep/runner.h"
#include "nest/sweep/study.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"

namespace nest::sweep {

/// Builds the topology of `point`: its generator with the point's parameters (see
/// `topology_parameters`), or its file. Throws `Error` (input) for a bad parameter value, with
/// the key `topology.<parameter>`. Cost: the generator's (linear in cables).
[[nodiscard]] topo::Topology build_topology(const Study& study, const Point& point);

/// Evaluates the points of one study. Construction loads every workload of the study (so a
/// malformed workload file fails before any work); `evaluate` is then safe to call from many
/// threads at once (each call builds its own topology, oracle and simulator).
class StudyEvaluator final : public PointEvaluator {
 public:
  /// `study` must outlive the evaluator. Throws `Error` (input) naming the workload file.
  explicit StudyEvaluator(const Study& study);

  [[nodiscard]] std::vector<Column> columns() const override;
  [[nodiscard]] Outcome evaluate(const Point& point) const override;
  /// Devices of the budget (or of the topology's size parameters), times 3 with a replay.
  [[nodiscard]] double cost(const Point& point) const override;

  /// The profile of a workload of the study (by `WorkloadEntry::name`).
  [[nodiscard]] const workload::LayerProfile& profile(const std::string& workload) const;

 private:
  struct Loaded {
    std::string name;
    std::shared_ptr<const workload::LayerProfile> profile;
    Bandwidth memory_bandwidth;  ///< for the optimizer step; zero for layer profiles
  };
  const Study& study_;
  std::vector<Loaded> workloads_;
};

}  // namespace nest::sweep
