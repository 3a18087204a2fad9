#pragma once
/// \file
/// A placement plan: what the placer decides (`PlanChoice`: variant, contiguous stage partition,
/// data-parallel degree, ZeRO stage, recomputation mode, interleaved virtual stages, placement
/// order) and what the cost model says
/// of it (`Plan`: per-stage time and memory, the iteration time and its breakdown). The device
/// of every (stage, replica, shard) follows from the choice through `DeviceMap`.

#include <compare>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nest/core/units.h"
#include "nest/placer/comm_cost.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/memory.h"

namespace nest::placer {

/// How the three parallel axes nest in the physical device numbering, innermost first: in
/// `kTensorPipelineData` ("tp-pp-dp") the shards of a stage replica are consecutive devices, the
/// stages of a replica come next and replicas are outermost; in `kTensorDataPipeline`
/// ("tp-dp-pp") the replicas of a stage are neighbours and the pipeline is outermost.
/// "tp" stands for all the shards of one stage replica (tensor, context and in-replica expert).
enum class PlacementOrder : std::uint8_t {
  kTensorPipelineData,
  kTensorDataPipeline,
  kPipelineTensorData,
  kPipelineDataTensor,
  kDataTensorPipeline,
  kDataPipelineTensor,
};

/// "tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp", "dp-tp-pp", "dp-pp-tp".
[[nodiscard]] std::string_view to_string(PlacementOrder order) noexcept;
/// Inverse of `to_string`; throws `Error` (input) listing the accepted names.
[[nodiscard]] PlacementOrder parse_placement_order(std::string_view text);
/// Every order, in enum order.
[[nodiscard]] std::vector<PlacementOrder> all_placement_orders();
/// True when the pipeline axis is outermost, so that a stage's devices depend only on the
/// stages after it (and not on the pipeline's depth).
[[nodiscard]] bool pipeline_outermost(PlacementOrder order) noexcept;

/// Device numbering of a plan. Stages are laid out from the pipeline's end: the last stage
/// (position 1) takes slot 0, so a stage's devices depend only on the stages after it. Device of
/// (stage p counted from the first, replica k, shard m) = (S−1−p)·stage_stride + k·replica_stride
/// + m·shard_stride. All devices of a plan are in [0, S·devices_per_replica·d).
struct DeviceMap {
  int stages = 1;
  int data_parallel = 1;
  int devices_per_replica = 1;
  std::uint32_t shard_stride = 1;
  std::uint32_t stage_stride = 1;
  std::uint32_t replica_stride = 1;

  /// The map for `order`. O(1).
  [[nodiscard]] static DeviceMap make(PlacementOrder order, int stages, int data_parallel,
                                      int devices_per_replica);
  /// The device of (stage `stage` counted from the first, replica, shard).
  [[nodiscard]] topo::DeviceId device(int stage, int replica, int shard) const noexcept;
  /// All devices of stage `stage` as one group per replica (members = shards).
  [[nodiscard]] GroupLayout stage_layout(int stage) const noexcept;
};

/// The intra-layer parallel degrees of the variant a plan uses (a copy, so a plan outlives the
/// profile it came from).
struct VariantDegrees {
  int tensor_parallel = 1;
  int expert_parallel = 1;
  int context_parallel = 1;
  bool sequence_parallel = false;
  int micro_batch = 1;
  int devices_per_replica = 1;
  friend bool operator==(const VariantDegrees&, const VariantDegrees&) = default;
};

/// What a plan decides. Everything else in `Plan` is derived from it by the cost model.
struct PlanChoice {
  std::size_t variant = 0;  ///< index into `LayerProfile::variants`
  /// Model-chunk boundaries in layer indices, in model order: chunk c holds layers
  /// [boundaries[c], boundaries[c+1]) and runs on stage c mod S. S·v + 1 strictly increasing
  /// entries from 0 to the number of layers (v = `virtual_stages`; with v = 1, chunk p is stage p).
  std::vector<std::size_t> boundaries;
  int data_parallel = 1;
  int zero_stage = 0;  ///< 0..3
  workload::Recompute recompute = workload::Recompute::kNone;
  /// Model chunks per device under interleaved 1F1B (Narayanan et al. 2021 §2.2); 1 = 1F1B.
  int virtual_stages = 1;
  PlacementOrder order = PlacementOrder::kTensorPipelineData;

  /// S: the pipeline's device stages.
  [[nodiscard]] int stages() const noexcept {
    if (boundaries.empty()) return 0;
    return (static_cast<int>(boundaries.size()) - 1) / (virtual_stages > 0 ? virtual_stages : 1);
  }
  /// S·v: the model chunks.
  [[nodiscard]] int chunks() const noexcept {
    return boundaries.empty() ? 0 : static_cast<int>(boundaries.size()) - 1;
  }
  friend bool operator==(const PlanChoice&, const PlanChoice&) = default;
  /// Field by field, in declaration order (an order for maps keyed by choice).
  friend auto operator<=>(const PlanChoice&, const PlanChoice&) = default;
};

/// Time of one stage per microbatch, by part.
struct StageTime {
  Time compute;      ///< forward + backward (+ recompute) of its layers
  Time collectives;  ///< intra-layer collectives (TP/SP/CP/EP, ZeRO-3 gathers)
  Time transfer;     ///< activations to the next stage and their gradients back
  [[nodiscard]] Time total() const noexcept { return compute + collectives + transfer; }
  friend bool operator==(const StageTime&, const StageTime&) = default;
};

/// One model chunk of a stage.
struct ChunkReport {
  std::size_t first_layer = 0;  ///< first layer of the chunk
  std::size_t last_layer = 0;   ///< one past its last layer
  /// Per microbatch; `transfer` is the chunk's output to the next chunk's stage and its gradient
  /// back (zero for the model's last chunk).
  StageTime time;
  friend bool operator==(const ChunkReport&, const ChunkReport&) = default;
};

/// One stage of an evaluated plan.
struct StageReport {
  /// The stage's layers: under 1F1B [first_layer, last_layer); interleaved, the first layer of
  /// its first chunk and the end of its last (the layers between belong to other stages too).
  std::size_t first_layer = 0;
  std::size_t last_layer = 0;
  /// The stage's model chunks in the order it holds them (chunk j is model chunk p + j·S): one
  /// under 1F1B, v interleaved.
  std::vector<ChunkReport> chunks;
  /// Microbatch-chunks held at the memory peak: S − p for stage p under 1F1B; interleaved, the
  /// warm-up forwards + 1, min((S − p − 1)·2 + (v − 1)·S + 1, v·ceil(M/d)) (Narayanan et al.
  /// 2021 §2.2.1).
  int in_flight = 1;
  StageTime time;                ///< per microbatch: Σ of its chunks
  Time data_parallel_sync;       ///< gradient reduction across the replicas, per iteration
  Time optimizer;                ///< optimizer step, per iteration
  workload::StageMemory memory;  ///< per device
  [[nodiscard]] bool fits(Bytes capacity) const noexcept { return memory.total() <= capacity; }
  friend bool operator==(const StageReport&, const StageReport&) = default;
};

/// The iteration time split so that the parts add up to it: with b the stage of the most work
/// (compute + collectives) and K = ceil(M/d) microbatches per replica, compute = K·compute_b,
/// collectives = K·collectives_b, bubble = (S−1) × the largest chunk work, transfers = the
/// boundary transfers the schedule does not hide (cost_model.h), plus the exposed data-parallel
/// sync and the optimizer step. (With `overlap_boundary_transfers` off, b is the slowest stage
/// with its transfer, transfers = K·transfer_b and the bubble counts the chunk's transfer.)
struct Breakdown {
  Time compute;
  Time bubble;
  Time collectives;
  Time transfers;
  Time data_parallel_sync;
  Time optimizer;
  [[nodiscard]] Time total() const noexcept {
    return compute + bubble + collectives + transfers + data_parallel_sync + optimizer;
  }
  friend bool operator==(const Breakdown&, const Breakdown&) = default;
};

/// An evaluated plan.
/// One collective of a plan as the collective oracle priced it: which group runs it, where,
/// and what the tuner chose (filled by `plan_collectives`, nest/placer/plan_collectives.h).
struct PlanCollective {
  std::string group;  ///< "tensor", "expert", "context" (intra-layer) or "data" (gradient sync)
  int stage = 0;      ///< the pipeline stage whose devices run it
  workload::CollectiveOp op = workload::CollectiveOp::kAllReduce;
  Bytes size;             ///< nccl-tests convention (a gradient bucket for "data")
  int group_size = 0;     ///< devices per group
  int groups = 0;         ///< groups running it at once
  std::string algorithm;  ///< coll's name ("ring", "tree", "nvls", ...)
  std::string protocol;   ///< NCCL's: "LL", "LL128", "Simple" (Simple on the ideal network)
  int channels = 1;
  bool tuned = false;  ///< chosen by the tuner, not fixed by an option
  Time time;           ///< one run, every group at once
  friend bool operator==(const PlanCollective&, const PlanCollective&) = default;
};

struct Plan {
  PlanChoice choice;
  VariantDegrees degrees;
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  std::int64_t microbatches = 1;              ///< M, per iteration
  std::int64_t microbatches_per_replica = 1;  ///< ceil(M/d)
  std::int64_t devices_used = 0;              ///< S · devices_per_replica · d
  std::int64_t devices_available = 0;         ///< the budget the plan was made for
  Bytes capacity;                             ///< memory per device
  std::vector<StageReport> stages;
  int bottleneck_stage = 0;  ///< the slowest stage (first of equals)
  Time max_stage_time;
  Breakdown breakdown;
  Time iteration_time;             ///< == breakdown.total()
  bool optimizer_modeled = false;  ///< false when no memory bandwidth was given
  double sequences_per_second = 0;
  double tokens_per_second = 0;  ///< 0 when the sequence length is unknown
  std::optional<double> mfu;     ///< model FLOPs utilization, when FLOPs and peak are known
  /// The collectives the oracle priced for this plan, by stage (empty on other networks and
  /// until `plan_collectives` fills it).
  std::vector<PlanCollective> collectives;

  /// True when every stage fits its devices' memory.
  [[nodiscard]] bool fits() const noexcept;
  /// The device map of the plan.
  [[nodiscard]] DeviceMap device_map() const noexcept {
    return DeviceMap::make(choice.order, choice.stages(), choice.data_parallel,
                           degrees.devices_per_replica);
  }
  /// Field by field (doubles by value).
  friend bool operator==(const Plan&, const Plan&) = default;
};

/// True when a verification counts `a` and `b` as one candidate (`nest place --verify`): the
/// same choice, or choices that differ only in their ZeRO stage at the same price (the replay
/// times them alike).
[[nodiscard]] bool same_candidate(const Plan& a, const Plan& b);

/// A baseline's outcome beside the chosen plan: its plan, or why it has none.
struct BaselineResult {
  std::string name;          ///< "manual", "topology-agnostic", "anneal", "fixed"
  std::optional<Plan> plan;  ///< empty when nothing fits under the baseline's rule
  std::string note;          ///< how the baseline was made, or why it does not fit
};

/// One plan of a placement verified by replay (`nest place --verify K`): its estimate is
/// `plan.iteration_time`, its link-level replay `replayed`.
struct VerifiedCandidate {
  Plan plan;
  Time replayed;
  int estimate_rank = 0;  ///< 1 = the smallest estimate of the candidates
  int replay_rank = 0;    ///< 1 = the smallest replayed time (ties: the smaller estimate)
};

/// The candidates a placement replayed and the one it chose (the replay's fastest).
struct Verification {
  int requested = 0;                          ///< K of `--verify K`
  std::vector<VerifiedCandidate> candidates;  ///< by estimate, the search's best first
  std::size_t chosen = 0;                     ///< index into `candidates`
  /// The regret of the estimate-only choice (`candidates.front()`) under replay: its replayed
  /// time over the chosen candidate's − 1 (the chosen plan's own regret is 0 by construction).
  [[nodiscard]] double estimate_regret() const noexcept {
    if (candidates.empty()) return 0;
    return candidates.front().replayed.to_seconds() / candidates[chosen].replayed.to_seconds() - 1;
  }
};

/// "megatron" or "nest-artifact".
[[nodiscard]] std::string_view to_string(workload::MemoryRules rules) noexcept;
/// Inverse of `to_string`; throws `Error` (input, key "rules").
[[nodiscard]] workload::MemoryRules parse_rules(std::string_view text);

/// The index of the variant of `profile` with `degrees`; throws `Error` (input, key "variant")
/// naming the degrees when there is none.
[[nodiscard]] std::size_t find_variant(const workload::LayerProfile& profile,
                                       const VariantDegrees& degrees);

}  // namespace nest::placer
