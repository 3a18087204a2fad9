#pragma once
/// \file
/// The replay: one training iteration of a plan, simulated event by event on the network
/// simulator. Compute runs on each stage replica's compute stream in schedule order (1F1B or
/// GPipe); stage-to-stage activation and gradient transfers and the data-parallel gradient
/// reduction run as flows on a `net::Simulator`, so traffic of different stages and replicas
/// contends where it shares links; the optimizer step follows the reduction.
///
/// What is simulated in full and what is reused (exact symmetry, never an approximation):
/// - every microbatch of every stage of every replica is scheduled individually, and every
///   stage-to-stage transfer and gradient bucket is a set of flows on the shared network;
/// - the shards of a stage replica (its t·c devices) compute in lockstep, so one compute stream
///   stands for all of them, and their rows in the timeline are copies of it;
/// - intra-layer collectives (TP/SP/EP/CP) are priced once per stage by the collective oracle
///   (which simulates all concurrent groups of the stage replica together) and occupy the
///   compute stream inside `StageSpec::forward`/`backward`; this is exact when those groups'
///   links carry no other traffic (TP inside a scale-up domain), which the plan adapter checks.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/net/simulator.h"
#include "nest/replay/run_record.h"
#include "nest/topo/topology.h"

namespace nest::replay {

/// Pipeline schedule of one iteration.
enum class Schedule : std::uint8_t {
  kOneFOneB,  ///< PipeDream-Flush / Megatron 1F1B: warm-up forwards, then one forward one backward
  kGPipe,     ///< all forwards, then all backwards
  /// Interleaved 1F1B (Narayanan et al. 2021): each device group runs v model chunks (virtual
  /// stages), chunk c on group c mod S; microbatches per replica must be a multiple of S.
  kInterleaved,
};

/// One pipeline stage, per microbatch, per device of a stage replica.
struct StageSpec {
  std::int32_t first_layer = 0;  ///< layer range [first_layer, last_layer)
  std::int32_t last_layer = 0;
  Time forward;              ///< compute and intra-layer collectives of the forward pass
  Time backward;             ///< backward compute (+ recompute) and its intra-layer collectives
  Time forward_collectives;  ///< the part of `forward` spent in intra-layer collectives
  Time backward_collectives;
  Bytes activation_out;  ///< each shard sends this to its counterpart in the next stage
  Bytes gradient_out;    ///< each shard sends this to its counterpart in the previous stage
  Bytes gradient_sync;   ///< bytes each shard all-reduces across the data-parallel replicas
  Time optimizer;        ///< optimizer step after the gradient reduction
  // Memory of one device (nest/workload/memory.h, split for a trace):
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_state;
  Bytes stash;    ///< held per microbatch from its forward start to its backward end
  Bytes working;  ///< held while a backward runs (recompute working set, artifact constant part)
};

/// Everything the replay needs of a plan.
struct ReplayInput {
  /// The (virtual) stages in model order: S of them, or S x v under the interleaved schedule,
  /// where stage c runs on device group c mod S.
  std::vector<StageSpec> stages;
  /// devices[r][g]: the devices of device group (plan stage) g in data-parallel replica r,
  /// shards in the same order in every group (shard k sends to shard k of the next stage).
  std::vector<std::vector<std::vector<topo::DeviceId>>> devices;
  /// Microbatches each replica runs (they may differ by one when d does not divide M).
  std::vector<std::int64_t> microbatches;
  Schedule schedule = Schedule::kOneFOneB;
  int gradient_buckets = 4;  ///< the reduction is split into this many buckets, last layers first
  /// Buckets become ready as the last backward produces them; false: when it ends.
  bool overlap_gradient_sync = true;
  /// A stage runs its next operation while its send is on the network (its sends to one peer
  /// stage leave one after another, each once the one before it has arrived); false: its
  /// compute stream waits until the send arrived (Megatron-LM's p2p of 2021-22:
  /// `batch_isend_irecv`, then `wait` and `torch.cuda.synchronize`).
  bool overlap_boundary_transfers = true;
  Time estimate;  ///< the placer's prediction, reported beside the replayed time
  double sequences_per_iteration = 0;
  double tokens_per_iteration = 0;
  Flops flops_per_iteration;  ///< model FLOPs (0 if unknown)
  FlopRate peak_flop_rate;    ///< per device (0 if unknown)
};

/// Starts an allreduce of `size` bytes over `group` at the simulator's current time, calls
/// `done` when it completes, and returns the name of the algorithm it runs (recorded in the
/// collective rows); bound to the collective layer (nest/coll) by the caller.
using AllreduceLauncher = std::function<std::string(std::span<const topo::DeviceId> group,
                                                    Bytes size, std::function<void()> done)>;

/// How to replay.
struct ReplayOptions {
  /// Transfers and reductions take no time (the reference run for "exposed communication").
  bool zero_network = false;
  std::uint64_t seed = 0;  ///< ECMP path choice of the transfers
  /// Latency before a stage-to-stage transfer of the given size starts moving (a collective
  /// model's send base latency); none: zero.
  std::function<Time(Bytes)> transfer_latency;
  /// Simulate the flows of shard 0 only (its stage-to-stage transfers and its data-parallel
  /// reductions) and let them stand for every shard: exact only when the caller has shown that
  /// the shards' traffic forms link-disjoint, isomorphic planes (`replay_plan` checks it; see
  /// `shard_planes` in src/replay/plan_replay.cc). The record is the same as without it, except
  /// that the simulator's link statistics cover plane 0 only.
  bool one_shard_plane = false;
  /// When set (the topology's links long), the replay counts into it, before it starts, the
  /// stage-to-stage transfer flows it will start over each link (routed as it routes them), and
  /// takes each flow off as it starts: a link at zero carries no transfer from then on. For the
  /// caller's launcher (`replay_plan` times reductions that run alone without the simulator's
  /// events); not read when `zero_network`.
  std::vector<std::uint32_t>* transfers_ahead = nullptr;
};

/// The ECMP flow key of every shard's flow of one stage-boundary transfer: `microbatch`'s
/// activation or gradient leaving `chunk` in `replica`. The shard-plane check routes with it.
[[nodiscard]] std::uint64_t transfer_flow_key(std::int64_t microbatch, std::size_t chunk,
                                              std::size_t replica) noexcept;

/// One stage-to-stage send of an iteration: chunk `chunk` of replica `replica` sends
/// `microbatch`'s activation (forward) or gradient (back) from each shard of the devices `from`
/// to the same shard of `to`, every shard's flow with the ECMP key `key`.
struct Send {
  std::size_t replica = 0;
  std::size_t chunk = 0;
  bool forward = true;
  std::int64_t microbatch = 0;
  std::span<const topo::DeviceId> from;
  std::span<const topo::DeviceId> to;
  std::uint64_t key = 0;
};

/// Calls `visit` on every send the replay of `input` launches (a chunk whose bytes are zero
/// sends nothing), replica by replica, chunk by chunk, forward first, microbatch by microbatch;
/// stops at the first `false` and returns false then. What the shard-plane check and the
/// transfers' count (`ReplayOptions::transfers_ahead`) route.
bool for_each_send(const ReplayInput& input, const std::function<bool(const Send&)>& visit);

/// Bucket `b` (0 <= b < k) of a stage's `total` gradient bytes reduced in `k` buckets: the
/// replay's split, floor(total·(b + 1)/k) − floor(total·b/k), computed without overflow.
[[nodiscard]] Bytes bucket_size(Bytes total, int b, int k) noexcept;

/// Replays one iteration on `sim` (which must be idle, at time 0, over the plan's topology).
/// Fills the timeline, memory, peaks, collectives, summary, placement and stages of the record;
/// links, the topology table and meta are the caller's (it owns the simulator). Throws `Error`
/// (input) when `input` is inconsistent (no stage, a replica without devices, shard counts
/// differing between stages, a device out of range or in two stage replicas).
[[nodiscard]] RunRecord replay(const ReplayInput& input, net::Simulator& sim,
                               const AllreduceLauncher& allreduce, const ReplayOptions& options);

}  // namespace nest::replay
