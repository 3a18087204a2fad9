#pragma once
// Pieces of the cost model (nest/placer/cost_model.h) that `evaluate` and the search share, so
// that both compute every figure the same way: prefix sums over the layer chain, the network
// prices of one stage position, the device groups of each parallel axis, the data-parallel sync
// and the optimizer step.

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "nest/core/units.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"

namespace nest::placer::detail {

/// The intra-layer degrees of `variant`.
VariantDegrees degrees_of(const workload::Variant& variant);

/// Groups that run the collectives of `axis` in stage `stage` of `map`: tensor groups are t
/// consecutive shards; context groups c shards t apart; expert groups e shards t·c apart when
/// the replica holds the experts (t·c·e devices), else e consecutive replicas.
GroupLayout axis_layout(const DeviceMap& map, int stage, workload::ParallelAxis axis,
                        const VariantDegrees& degrees);
/// Groups of the data-parallel sync of stage `stage`: the d replicas of each shard.
GroupLayout sync_layout(const DeviceMap& map, int stage);
/// The data-parallel sync groups of stages [first, last] as one layout: stage `last`'s groups
/// (`sync_layout`) first, then each earlier stage's, so groups g and h are of one stage when
/// g / devices_per_replica == h / devices_per_replica.
GroupLayout stages_sync_layout(const DeviceMap& map, int first, int last);

/// Memoizing, counting front of a `CommCost`.
class PricedNetwork {
 public:
  explicit PricedNetwork(CommCost& comm) : comm_(comm) {}
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout);
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to);
  /// `CommCost::collective_like`, memoized like the others.
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like);
  /// `CommCost::groups_apart` (the network memoizes it).
  [[nodiscard]] bool groups_apart(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                                  int per_part) {
    return comm_.groups_apart(op, size, layout, per_part);
  }
  /// Time of a ZeRO-3 weight all-gather of `size` on `layout` (`CommCost::gather_point`), a
  /// point of the line the cost model draws through 256 MiB and 1 GiB (see cost_model.h).
  Time gather(Bytes size, const GroupLayout& layout);
  [[nodiscard]] bool placement_independent() const noexcept {
    return comm_.placement_independent();
  }
  [[nodiscard]] bool zero() const noexcept { return comm_.zero(); }
  /// Distinct queries sent to the `CommCost`.
  [[nodiscard]] std::int64_t queries() const noexcept { return queries_; }

 private:
  // The memoized answer to `key`, else `ask()` (counted as a query), remembered.
  template <class Ask>
  Time remembered(const LayoutKey& key, Ask ask);

  CommCost& comm_;
  // By `LayoutKey` kind: 0 collective, 1 transfer, 2 collective_like (b: the like layout), 3
  // gather.
  std::unordered_map<LayoutKey, Time, LayoutKey::Hash> memo_;
  std::int64_t queries_ = 0;
};

/// Prefix sums over the layer chain of one variant, in picoseconds and bytes: entry j sums
/// layers [0, j).
struct ChainSums {
  std::vector<std::int64_t> forward_backward;
  std::vector<std::int64_t> recompute;
  std::vector<std::int64_t> selective;  ///< selective recomputation (the attention core)
  std::vector<std::int64_t> parameter_bytes;
  std::vector<std::int64_t> parameters;
  explicit ChainSums(const workload::Variant& variant);
};

/// Network prices of one stage position, in picoseconds.
struct PositionPrices {
  std::vector<std::int64_t> collectives;            ///< prefix Σ count · price
  std::vector<std::int64_t> recompute_collectives;  ///< prefix Σ recompute_count · price
  /// transfer[j]: the output of layer j−1 to the next stage and back (2 transfers); empty for
  /// the last stage.
  std::vector<std::int64_t> transfer;
  /// ZeRO-3 gathers of the stage's weights per microbatch: 2 · gather line.
  bool gathers = false;
  double gather_alpha_ps = 0;
  double gather_beta_ps_per_byte = 0;
  /// The stage's ZeRO-3 gather time for `parameter_bytes` of weights per device.
  [[nodiscard]] std::int64_t gather_ps(std::int64_t parameter_bytes) const {
    if (!gathers || parameter_bytes <= 0) return 0;
    return 2 * rounded_ps(gather_alpha_ps +
                          gather_beta_ps_per_byte * static_cast<double>(parameter_bytes));
  }
};

/// Prices of stage `stage` of `map` (its last stage has no transfer). `zero_stage` = 3 adds the
/// gathers. O(n) plus network queries (identical neighbouring layers reuse their prices).
PositionPrices price_position(const workload::Variant& variant, const VariantDegrees& degrees,
                              const DeviceMap& map, int stage, int zero_stage, PricedNetwork& net);

/// Prices shared by every position of a placement-independent network; `last` leaves out the
/// transfer. Equal to `price_position` of any stage of the same degrees and d.
PositionPrices price_any_position(const workload::Variant& variant, const VariantDegrees& degrees,
                                  int data_parallel, int zero_stage, bool last, PricedNetwork& net);

/// What of an evaluation the data-parallel syncs do not change: the stages' position prices and
/// the boundary transfers the schedule does not hide (which follow from the stages' times).
struct KeptPrices {
  std::vector<PositionPrices> positions;  ///< one per stage, or empty: not priced yet
  std::optional<Time> exposed_transfers;
};

/// `evaluate(profile, choice, comm, options)`, taking from `kept` what it holds and keeping there
/// what it does not (nullptr: `evaluate`). For evaluations of one choice with options that differ
/// at most in `joint_data_parallel_sync`, on a network that answers every query but the syncs'
/// alike each time (`syncs_rule_out`'s rounds).
[[nodiscard]] Plan evaluate_keeping(const workload::LayerProfile& profile, const PlanChoice& choice,
                                    CommCost& comm, const CostOptions& options, KeptPrices* kept);

/// The recomputation the stage at position `in_flight` runs under `mode` (nest-artifact: the
/// last stage never recomputes).
[[nodiscard]] workload::Recompute recompute_applies(workload::MemoryRules rules,
                                                    workload::Recompute mode,
                                                    int in_flight) noexcept;

/// Per-microbatch time of layers [first, last) priced by `prices`, recomputing as `mode` says.
StageTime stage_time(const ChainSums& sums, const PositionPrices& prices, std::size_t first,
                     std::size_t last, workload::Recompute mode) noexcept;

/// Twice (forward and gradient back) the time of sending the output of layer `last_layer` − 1
/// from every device of stage `from` to the same shard of stage `to` (on a placement-independent
/// network, any two stages).
Time boundary_transfer(const workload::Variant& variant, std::size_t last_layer,
                       const DeviceMap& map, int from, int to, const VariantDegrees& degrees,
                       PricedNetwork& net);

/// Microbatch-chunks that stage `stage` of `stages` holds at its memory peak under interleaved
/// 1F1B with `virtual_stages` chunks and `microbatches` per replica: its warm-up forwards + 1.
[[nodiscard]] int interleaved_in_flight(int stages, int stage, int virtual_stages,
                                        std::int64_t microbatches) noexcept;

/// Memory of a device of stage `stage` holding `chunks` under interleaved 1F1B: weights,
/// gradients and optimizer state summed over its chunks, and the activation peak of its
/// schedule (Megatron's interleaved order, as the replay runs it): a forward adds its chunk's
/// stash, a backward holds its chunk's working set while it runs and frees both. Stash and
/// working set per chunk come from `workload::stage_memory` at 1 and 2 in flight. O(v·M).
workload::StageMemory interleaved_memory(const workload::Variant& variant,
                                         const std::vector<ChunkReport>& chunks, int stages,
                                         int stage, std::int64_t microbatches,
                                         const workload::MemoryOptions& options);

/// The bytes of one of a stage's `buckets` gradient buckets: its chunks' parameter bytes per
/// device over `buckets`, rounded up (the largest bucket, at which `evaluate` prices them all).
[[nodiscard]] std::int64_t bucket_bytes(const ChainSums& sums, const StageReport& stage,
                                        int buckets);

/// The collective of a data-parallel sync: reduce-scatter under ZeRO-3, else allreduce.
[[nodiscard]] workload::CollectiveOp sync_operation(int zero_stage) noexcept;

/// Gradient sync of a stage holding `parameter_bytes` per device, across its replicas.
Time sync_time(std::int64_t parameter_bytes, int zero_stage, const DeviceMap& map, int stage,
               PricedNetwork& net);

/// The contention of the data-parallel syncs of stages [first, last] run together: the time of
/// the sync of `kJointSyncReference` bytes on the union of their groups (one multi-group query:
/// the oracle simulates link-disjoint groups apart) over the largest of the same sync on each
/// stage's groups alone. Exactly 1, and nothing priced, when no stage's groups of the whole
/// pipeline can share a link with another stage's whatever algorithm they run
/// (`CommCost::groups_apart`: routing only): the union is then each stage's groups on their own
/// links, as the replay runs them, each with its own algorithm. >= 1 always (clamped).
/// first <= last.
double joint_sync_factor(int zero_stage, const DeviceMap& map, int first, int last,
                         PricedNetwork& net);

/// The size at which `joint_sync_factor` is measured: large enough to be bandwidth-bound, as
/// the buckets of the models the placer is for are (GPT-3 on 1,024 GPUs: 0.4-3 GiB each).
inline constexpr Bytes kJointSyncReference = Bytes::mebibytes(256);

/// The end of one replica's pipeline (its last backward) when 1F1B, or interleaved 1F1B with
/// `virtual_stages` > 1, runs as the replay runs it: each stage runs its order (Megatron-LM's:
/// warm-up forwards, one forward one backward, the remaining backwards) on one compute stream,
/// an operation starts once the one before it on its stage has ended and its input (an
/// activation, or a gradient) has arrived, and a send leaves when its operation ends without
/// holding its stage; a stage's sends to one peer stage leave one after another, each once the
/// one before it has arrived (NCCL runs a peer pair's p2p operations in the order issued: to the
/// next and to the previous stage two queues, one when S = 2, where they are the same). Chunk c
/// (model order; it runs on stage c mod S) takes `forward[c]` and
/// `backward[c]` per microbatch, and `send[c]` one way to chunk c + 1 and back (its activation
/// forward, the gradient of it back; the last chunk's is unused). `microbatches` per replica
/// (interleaved: a multiple of S). O(S·v·microbatches) time and memory. Throws `Error` (input)
/// "duration out of range" when a time passes `kMaxDurationPs`.
Time pipeline_makespan(std::span<const Time> forward, std::span<const Time> backward,
                       std::span<const Time> send, int stages, std::int64_t microbatches);

/// What of the stage-boundary transfers of `stages` (an evaluated plan's, S of them, each
/// chunk's `time.transfer` its send to the next chunk and back) the schedule does not hide:
/// max(0, makespan with the sends − max(makespan without them, `base`)), each makespan by
/// `pipeline_makespan` on the chunks' pass times (`mode[p]`: stage p's recomputation) with the
/// sends one way half their `transfer`. `base` is the cost model's pipeline without transfers,
/// K·max stage time + (S − 1)·max chunk time (>= the makespan without sends under 1F1B), so the
/// pipeline base + exposed is base when nothing is sent and never less than it.
Time exposed_transfers(const workload::Variant& variant, const std::vector<StageReport>& stages,
                       const std::vector<workload::Recompute>& mode, int stage_count,
                       std::int64_t microbatches, Time base);

/// Optimizer step of a stage holding `parameters` per device (0 when not modeled).
Time optimizer_time(std::int64_t parameters, int zero_stage, int data_parallel,
                    const CostOptions& options) noexcept;

/// Whether layers a and b are interchangeable (everything but the name is equal).
bool same_layer(const workload::Layer& a, const workload::Layer& b) noexcept;

}  // namespace nest::placer::detail
