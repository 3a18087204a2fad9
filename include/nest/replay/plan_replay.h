#pragma once
/// \file
/// From an evaluated placer plan to a replayed iteration: the stage times, transfers, gradient
/// reduction and memory of `replay::ReplayInput` come from the same cost model and memory model
/// the placer used, so the replay differs from the estimate only where the network and the
/// schedule make it differ.

#include <atomic>
#include <cstdint>
#include <optional>

#include "nest/coll/collective.h"
#include "nest/placer/plan.h"
#include "nest/replay/replay.h"
#include "nest/replay/run_record.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"

namespace nest::coll {
class CollectiveOracle;
}  // namespace nest::coll

namespace nest::replay {

/// How to replay a plan.
/// Most data-parallel gradient buckets per stage.
inline constexpr int kMaxGradientBuckets = 65'536;

struct PlanReplayOptions {
  Schedule schedule = Schedule::kOneFOneB;
  /// Model chunks per device group under `Schedule::kInterleaved` (>= 2, at most the layers).
  int virtual_stages = 2;
  int gradient_buckets = 4;  ///< in [1, kMaxGradientBuckets]
  /// Record the utilization over time of this many of the busiest links (by utilization over
  /// the iteration) into `RunRecord::link_series`, for a trace's counter tracks. 0: none. The
  /// series come from a second replay of the same iteration with `series_links` set, so this
  /// replay's figures are the same with or without them.
  int utilization_links = 0;
  /// Record these links' utilization series (`net::Simulator::record_utilization(links)`: the
  /// same run as without recording).
  std::vector<topo::LinkId> series_links;
  /// The reduction runs beside the last backward pass (as the cost model's
  /// `CostOptions::overlap_gradient_sync`).
  bool overlap_gradient_sync = true;
  /// A stage goes on while its activation or gradient is sent (as the cost model's
  /// `CostOptions::overlap_boundary_transfers`); false: it waits until the send arrived.
  bool overlap_boundary_transfers = true;
  std::uint64_t seed = 0;
  /// Ignore the topology's collective model (line rates, the topology's latencies, ring
  /// buckets): today's replay.
  bool ideal = false;
  /// The algorithm of the data-parallel buckets; none: under a collective model the fastest of
  /// the tuner's candidates for each group alone (as NCCL's tuner picks per communicator), on
  /// the ideal network `coll::default_algorithm` for the group (the ring; hierarchical with
  /// the dimensions' algorithms on a `kind: dimensions` topology, as the placer prices it).
  std::optional<coll::Algorithm> data_parallel_algorithm;
  /// Simulate one shard's transfers and reductions for all the t·c shards of each stage replica
  /// when their traffic provably runs alike (link-disjoint, isomorphic planes; the condition
  /// is stated and checked in src/replay/plan_replay.cc): the same record to the picosecond,
  /// about t times less simulation. false: simulate every shard.
  bool merge_shards = true;
  /// Time a data-parallel reduction with the contention-free evaluation (or, where its own flows
  /// share links, with its event simulation alone, once per bucket: `coll::AloneSimulator`)
  /// instead of flow by flow when no other flow can cross its links until it ends (nothing drains
  /// on them when it starts, no transfer is left to start over them, no other reduction's routes
  /// cross them, and no utilization series records them; the condition and its proof are in
  /// src/replay/plan_replay.cc, with its two caveats: rates equal up to the simulator's refill
  /// rounding, and the order of rows with equal times): the same record on every run compared,
  /// without the simulator's events for it. false: every reduction through the simulator.
  bool alone_reductions = true;
  friend bool operator==(const PlanReplayOptions&, const PlanReplayOptions&) = default;
};

/// Throws `Error` (input, key "--buckets") unless gradient_buckets is in
/// [1, kMaxGradientBuckets]. `replay_input` calls it.
void validate(const PlanReplayOptions& options);

/// The replay's input for `plan` (evaluated on `profile`). Per stage: forward = Σ forward of its
/// layers plus the forward share of its intra-layer collectives; backward = the rest of the
/// cost model's stage compute and collectives (backward, recompute); the collectives' time is
/// split between the passes in proportion to count × size of the collectives each pass runs.
/// Transfers: the stage's last layer's output bytes forward, the previous stage's output back.
/// Gradient reduction: 2 bytes per parameter a device holds, over the d replicas of its shard.
/// Memory: `workload::stage_memory` at in-flight 1 and 2 gives the stash per microbatch and the
/// working set. Microbatches: M split over the replicas, the first M mod d get one more.
/// Interleaved: the chain is cut into S·v chunks of (nearly) equal layer counts, chunk c on the
/// devices of plan stage c mod S; per-layer shares of the stage's collective and optimizer time.
[[nodiscard]] ReplayInput replay_input(const placer::Plan& plan,
                                       const workload::LayerProfile& profile,
                                       const PlanReplayOptions& options);

/// Replays `plan` on `topology` (data-parallel reductions as allreduces through nest/coll), and
/// fills the record's links (every directed link that carried bytes; utilization against line
/// rate) and the collectives' closed forms and algorithms. Meta is left to the caller.
///
/// Under the topology's collective model (unless `ideal`) the network runs at the Simple
/// protocol's calibrated rates and latencies (its transfers and buckets are megabytes to
/// gigabytes), each bucket starts after its protocol's base latency and each stage-to-stage
/// transfer after the send base latency, and each bucket's algorithm is the tuner's choice
/// for its group (or `data_parallel_algorithm`); an NVLS bucket's bytes are scaled by
/// 1 / (NVLS efficiency), which on its scale-up-only routes is exactly NVLS's rate.
///
/// `tuner`: an oracle to choose the buckets' algorithms with (its memo, e.g. the one that
/// priced the plan, answers what it already simulated), which must answer as a fresh
/// `coll::CollectiveOracle(topology, {seed, ideal})` of `options` (`answers_as`; else `Error`,
/// internal); nullptr: a fresh one. The record is the same either way.
///
/// `stop`: when not null, the replay reads it as it goes (its simulator every
/// `net::Simulator::kStopCheckEvents` events, and before each bucket's algorithm is chosen) and
/// throws `net::Stopped` once it is true; while it stays false the record is the one without it.
[[nodiscard]] RunRecord replay_plan(const placer::Plan& plan, const workload::LayerProfile& profile,
                                    const topo::Topology& topology,
                                    const PlanReplayOptions& options,
                                    coll::CollectiveOracle* tuner = nullptr,
                                    const std::atomic<bool>* stop = nullptr);

/// Sets `run.link_series` to the series of the `options.utilization_links` busiest links of `run`
/// (replacing `options.series_links`, if any)
/// (by bytes over bandwidth; ties: the lower link id), from a second replay of `plan` that
/// records those links only: what `replay_plan(plan, ..., options)` adds to its record. `run`
/// must be a `replay_plan` of the same plan, profile, topology and options but
/// `utilization_links` (whose figures do not depend on it), e.g. a verification's replay
/// kept for reuse. Nothing happens with `utilization_links` 0. `stop` as for `replay_plan` (a
/// stopped call leaves `run` as it was).
void add_busiest_series(RunRecord& run, const placer::Plan& plan,
                        const workload::LayerProfile& profile, const topo::Topology& topology,
                        const PlanReplayOptions& options, const std::atomic<bool>* stop = nullptr);

}  // namespace nest::replay
