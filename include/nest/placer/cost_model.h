#pragma once
/// \file
/// The placer's cost model (docs/architecture.md, "Placer"), the one definition that the search,
/// the baselines and `fixed` plans share. Iteration time:
///
///   pipeline = ceil(M/d) · max_p work(p) + (S − 1) · max_c work(c) + exposed transfers
///   T = max_p [ max(end_p, sync_done_p) + optimizer_p ]
///
/// where work is compute + collectives (below) per microbatch. Under 1F1B a stage is one chunk,
/// so the first two terms are (ceil(M/d) + S − 1) · max stage work; interleaved (v chunks per
/// stage) the bubble is S − 1 chunk works (Narayanan et al. 2021 §2.2.1).
///
/// Boundary transfers (`CostOptions::overlap_boundary_transfers`, issue 15): the replay sends an
/// activation or gradient when its operation ends, or once the stage's previous send to the same
/// peer stage has arrived, and lets the stage go on; only the operation that needs it waits.
/// `detail::pipeline_makespan` runs that schedule (each stage's Megatron-LM order on the chunks'
/// `pass_times`, each send one way half its chunk's transfer) with the sends and without; the
/// exposed transfers are max(0, with − max(without, the first two terms)): zero when nothing is
/// sent (today's figures to the picosecond), and the pipeline is never below its transfer-free
/// terms, which is what the search's bounds use. With the option off, each stage's transfer adds
/// into every microbatch slot as before: ceil(M/d) · max_p (work + transfer) + (S − 1) · max_c
/// (work + transfer). Stage p's last backward ends at end_p = pipeline − Σ_{q<p} (last backward of
/// q + its gradient transfer): the cooldown reaches stage 0 last. Its gradients are reduced in
/// `gradient_buckets` buckets, one after another, bucket i ready (i + 1)/k of the way through its
/// last backward (as the replay runs them), or all at end_p without overlap; sync_done_p is when
/// the last bucket is reduced, and the optimizer step follows.
///
/// Stage p (0-based from the first; position s = S − p from the end, holding s microbatches)
/// costs per microbatch, on its devices:
/// - compute: Σ forward + backward of its layers, + Σ recompute under recomputation (under the
///   nest-artifact rules only when s > 1: the last stage never recomputes);
/// - collectives: each layer's intra-layer collectives `count` times (+ `recompute_count` when
///   recomputing), priced on the stage's groups with every replica's group running at once;
///   under ZeRO-3 two all-gathers of the stage's weights across the replicas (forward, backward);
/// - transfer (s > 1): the last layer's output to the next stage and its gradient back, each
///   device to the same shard of the next stage, all pairs at once.
/// Data-parallel sync of a stage: an allreduce of its gradient bytes (= parameter bytes) across
/// the d replicas, all shards at once (a reduce-scatter under ZeRO-3), in buckets as above; the
/// breakdown's data-parallel sync is what of it the backward does not hide. Optimizer step
/// (megatron rules, when a memory bandwidth is given): `kOptimizerBytesPerParameter` bytes of
/// memory traffic per parameter held, divided by d under ZeRO-1..3. Memory:
/// `workload::stage_memory` for position s (interleaved: the peak of its schedule).
///
/// Joint sync (the replay runs every stage's reduction on the shared network at once): after
/// the schedule above is priced with each stage's sync alone, stage p's bucket time is scaled by
/// `detail::joint_sync_factor` of the contiguous run of stages around p whose reductions
/// (first bucket ready .. last reduced) overlap p's in time: the time of all their groups'
/// syncs in one multi-group oracle query over the slowest stage's alone, at 256 MiB. In 1F1B
/// the last stage's gradients are ready first and each earlier stage's one backward later, so
/// on a fast network the reductions do not overlap and nothing changes; where the stages'
/// groups share no link the factor is exactly 1 (today's figures), and where routing shows that
/// no stage's groups can share a link with another's (`CommCost::groups_apart`) nothing is asked;
/// under `tp-pp-dp` on a thin spine every stage's rings cross the same leaf up-links and the factor
/// approaches the number of stages whose rings cross them. Not for placement-independent networks
/// (flat, zero).
///
/// ZeRO-3 gathers, whose size varies with the stage, are priced on the line through the exact
/// prices at 256 MiB and 1 GiB (a collective on a fixed layout is affine in its size in the flow
/// model; exact for the zero and flat networks up to 1 ps of rounding), so that the search's
/// O(1) stage cost needs two queries per layout. The search uses these same functions, so its
/// figures equal `evaluate`'s.

#include <cstdint>

#include "nest/core/units.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/memory.h"

namespace nest::placer {

/// Settings of the cost model shared by every plan of one run.
struct CostOptions {
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  /// Devices available; a plan may use at most this many. Must be > 0.
  std::int64_t devices = 0;
  /// Device memory bandwidth for the optimizer step; zero leaves the step out (not modeled).
  Bandwidth memory_bandwidth;
  /// Buckets of the data-parallel gradient reduction (the replay's `gradient_buckets`), >= 1.
  int gradient_buckets = 4;
  /// Whether the reduction runs beside the last backward pass (PyTorch DDP, Megatron-Core's
  /// overlap_grad_reduce); false: it starts when the stage's backward ends (Megatron-LM's local
  /// DDP of 2021).
  bool overlap_gradient_sync = true;
  /// Price the data-parallel syncs of the stages that run at the same time together (see the
  /// file comment, "Joint sync"); false: each stage's alone, as before issue 15.
  bool joint_data_parallel_sync = true;
  /// Price the stage-boundary transfers as the schedule runs them (see the file comment,
  /// "Boundary transfers"): a send overlaps its stage's next operation and delays only what
  /// waits for it; false: each adds into every microbatch slot of its stage, as before issue 15.
  bool overlap_boundary_transfers = true;
};

/// A chunk's time per microbatch split into the two tasks the replay runs: forward = Σ forward
/// of its layers + the forward share of its collectives; backward = the rest of its compute and
/// collectives. Collectives split in proportion to count × size of the runs of each pass (a
/// collective's `count` covers forward and backward evenly; `recompute_count` reruns in the
/// backward under full recomputation, `applied`).
struct PassTimes {
  Time forward;
  Time backward;
};
[[nodiscard]] PassTimes pass_times(const workload::Variant& variant, const ChunkReport& chunk,
                                   workload::Recompute applied);

/// One operation of a pipeline stage's order: a forward or backward of `chunk` (the virtual
/// stage; stage g holds chunks g, g + S, ...) on `microbatch`.
struct PipelineOp {
  bool forward = true;
  std::int64_t chunk = 0;
  std::int64_t microbatch = 0;
};

/// Operation `i` (0 <= i < 2 · microbatches · v) of stage `stage`'s order among `stages`, with
/// `v` chunks per stage: Megatron-LM's 1F1B, and for v > 1 its interleaved form
/// (forward_backward_pipelining_with_interleaving; Narayanan et al. 2021 §2.2): warm-up forwards
/// ((S − g − 1) · 2 + (v − 1) · S for v > 1, S − g − 1 for v = 1, at most all), then one forward
/// one backward, then the remaining backwards; forward k runs local chunk (k / S) mod v and
/// microbatch (k / (S·v))·S + k mod S, backward k local chunk v − 1 − (k / S) mod v. The cost
/// model's pipeline and the replay run this one order. O(1).
[[nodiscard]] PipelineOp pipeline_op(std::int64_t stages, std::int64_t stage, std::int64_t v,
                                     std::int64_t microbatches, std::int64_t i) noexcept;

/// Memory traffic of one mixed-precision Adam step per parameter held, in bytes, as Megatron-LM's
/// fp16/bf16 optimizer runs it (megatron/optimizer/optimizer.py, apex's multi-tensor kernels):
/// copy the model gradient into the fp32 main gradient (read 2, write 4), unscale it and check
/// for inf/nan (read 4, write 4), its norm for clipping (read 4), Adam (read the fp32 weight,
/// gradient, momentum and variance, write the weight, momentum and variance: 28), copy the fp32
/// weight into the model's (read 4, write 2) and zero the gradient buffer (write 2): 54.
inline constexpr std::int64_t kOptimizerBytesPerParameter = 54;

/// Checks `choice` against `profile` and `options` (variant index, boundaries, degrees, ZeRO
/// stage, recomputation allowed, devices, expert groups); throws `Error` (input) naming the
/// field, the value and what was expected.
void validate_choice(const workload::LayerProfile& profile, const PlanChoice& choice,
                     const CostOptions& options);

/// Evaluates `choice` (validated first) with `comm` pricing the network. A plan whose stages do
/// not fit memory is still evaluated (`Plan::fits()` is false): "how good is my current
/// configuration" must answer even then. O(n + S) plus the network queries.
[[nodiscard]] Plan evaluate(const workload::LayerProfile& profile, const PlanChoice& choice,
                            CommCost& comm, const CostOptions& options);

}  // namespace nest::placer
