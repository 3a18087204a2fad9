#pragma once
/// \file
/// The NEST dynamic program (docs/architecture.md, "Placer"): the plan with the smallest iteration
/// time under the cost model of nest/placer/cost_model.h.
///
/// For each variant, recomputation setting, ZeRO stage, placement order and data-parallel degree
/// d, a DP over suffixes of the layer chain computes f[s][i], the smallest achievable maximum
/// stage time when layers [i, n) form s stages at positions s..1 from the pipeline's end (the
/// stage at position s holds s microbatches and must fit memory there):
///
///   f[1][i] = cost(i, n, 1)                      if [i, n) fits at position 1
///   f[s][i] = min_j max(cost(i, j, s), f[s−1][j]) over the j for which [i, j) fits at s
///
/// Because the device map lays stages out from the pipeline's end, a stage's devices (and so its
/// network cost) depend only on its position s — not on the pipeline depth S — whenever the
/// pipeline axis is outermost or the network is placement-independent; one table then answers
/// every S at once (f[S][0]). Otherwise the table is rebuilt per S with that S's layout.
///
/// Speed: stage costs are O(1) from per-position prefix sums; the largest feasible stage end per
/// (first layer, position) is found by binary search on memory (monotone in the stage's end and
/// position) and carried along runs of identical layers in O(1); when cost(i, ·, s) is
/// non-decreasing and f[s−1][·] non-increasing (checked per row, true for transformer chains),
/// the min-max over j is a binary search for the crossing point, else a scan pruned by the
/// lower bound of the compute part. Tables are shared between all d whose costs coincide (zero
/// and flat networks without ZeRO-1..3 give one table per variant and recomputation setting).
/// Data-parallel degrees are pruned to the smallest and the largest d of each value of ceil(M/d)
/// (any other d uses more devices than the smallest for the same pipeline length, and has more
/// memory than the largest); (S, d) pairs whose pipeline term alone cannot beat the best plan
/// are skipped before the data-parallel sync is priced.
/// Interleaved 1F1B (v ≥ 2) and the uniform 1F1B split are not partitioned by the DP: their
/// chunks are fixed by (S, v), so each (configuration, d, order, S, v) is bounded from below by
/// (ceil(M/d)·v + S − 1) × the average chunk's compute and evaluated in full when the bound can
/// win.
/// Complexity per table: O(S_max · n · log n) (monotone rows) or O(S_max · n²) (scan), plus
/// O(S_max · n · log n) memory queries of O(n) each; tables: variants × 2 × ZeRO stages ×
/// orders × d-candidates × (S_max when the layout depends on S) in the worst case, far fewer with
/// the sharing above. The data-parallel sync and the optimizer step are added to the best
/// partition of each (S, d); they are not minimized inside the DP (they depend on the whole
/// partition, not on one stage), so with a non-zero network the search is exact for the
/// pipeline term and a heuristic for those two.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"

namespace nest::placer {

/// What the search may choose from.
struct SearchOptions {
  CostOptions cost;
  /// Placement orders to try; a placement-independent network prices the first one only.
  std::vector<PlacementOrder> orders = {PlacementOrder::kTensorPipelineData,
                                        PlacementOrder::kTensorDataPipeline};
  /// ZeRO stages to try (the nest-artifact rules have no optimizer state and use 0 only).
  std::vector<int> zero_stages = {0, 1, 2, 3};
  /// Recomputation modes to try, in this order (modes other than none only when the profile
  /// allows recomputation; selective only with the profile's selective figures and not under
  /// the nest-artifact rules).
  std::vector<workload::Recompute> recompute_modes = {
      workload::Recompute::kNone, workload::Recompute::kSelective, workload::Recompute::kFull};
  /// Indices of the variants to try; empty means all.
  std::vector<std::size_t> variants;
  /// Upper bound on pipeline stages; 0 means the number of layers.
  int max_stages = 0;
  /// Keep every data-parallel degree instead of the two per value of ceil(M/d).
  bool all_data_parallel_degrees = false;
  /// Pipeline depths S to try; empty: 1..max_stages.
  std::vector<int> stages;
  /// Data-parallel degrees to try; empty: the candidates above.
  std::vector<int> data_parallel;
  /// Virtual stages v to try (interleaved 1F1B: chunks per stage, 1 = 1F1B); empty: 1 and, under
  /// the megatron rules, every v ≥ 2 for which S·v divides the blocks. Interleaved chunks hold
  /// equal blocks (`interleaved_partition`).
  std::vector<int> virtual_stages;
  /// Megatron-LM's 1F1B split (every stage the same blocks, the embedding and head on the ends,
  /// `interleaved_partition` with v = 1) instead of the partition of the least stage time.
  bool uniform_partition = false;
  /// Price plans whatever their memory: no capacity check (the plan still reports its memory).
  bool ignore_memory = false;
  /// Keep the best `keep_per_order` distinct plans of each placement order in
  /// `SearchResult::candidates` (for verification by replay, `nest place --verify`). 0: only
  /// the best plan (the branch and bound prunes against it alone). With k > 0 an entry is
  /// pruned only against the k-th best plan of its order, so the search slows down; `best` is
  /// the same plan either way.
  int keep_per_order = 0;
  /// Before a plan is priced in full, try four sharper ways to rule it out, cheapest first:
  /// `plan_lower_bound` on the network's event-free bounds (`CommCost::collective_pass_bound`);
  /// stage 0's bucket reduction asked `CommCost::collective_within` the room that bound's second
  /// form leaves; its exact price with every stage's data-parallel sync alone (the joint factor
  /// is at least 1); its exact price with the joint syncs at their event-free bounds
  /// (`CommCost::collective_like_bound`). None changes what the search finds (the best plan, its
  /// price and the kept candidates are the same); they only spare simulations. false: the layout
  /// bounds only (tests, measurements).
  bool pass_bounds = true;
  /// Estimate-only searches (`keep_per_order` and `replay_candidates` 0) and searches for
  /// `replay_candidates`: run the branch and bound with a cap on the best time, each pass ruling
  /// out every plan that cannot beat its cap, until a pass finds a plan (for
  /// `replay_candidates`: until every order's verification cut is at most the cap). Caps: the
  /// least entry bound times 1.25; after an estimate-only pass that priced plans but found none
  /// below its cap, one more than the least price it met; else times 1.5, 2, 3, 5; finally
  /// none. Before each of these, after a pass that does not end the search, a guessed cap when
  /// below it: 10% above the least bound on which the pass's sync checks ruled a plan out
  /// against its cap (`SearchStats::last_cap` is the last pass's). The best plan, its price and the
  /// candidates are the uncapped search's (proof at the passes in search.cc); a good cap spares the
  /// pricing of the poor plans an uncapped search meets first. false: one uncapped pass (tests,
  /// measurements).
  bool capped_passes = true;
  /// Estimate-only searches in capped passes (not with `replay_candidates`, whose cuts stay high
  /// while plans wait, so that more plans reach their joint syncs): a plan on at least this many
  /// devices whose checks (`pass_bounds`) come to price its joint syncs exactly (a simulation of
  /// many stages' syncs at once per run of stages, seconds each at 131,072 GPUs) waits instead,
  /// keyed by its price with every joint sync at its event-free bound; once every other entry
  /// below the cut has come up the waiting plans are priced least key first, so that a cheaper
  /// plan met later in the pass can set the cut before a costlier one is priced in full. A pass
  /// that requeued a plan and would end the search is followed by one capped one above its best
  /// time, without requeueing, which confirms the plan in the search's own order: the result is
  /// the uncapped search's (the capped passes' proof). 0: never.
  int requeue_joint_from = 32768;
  /// Keep exactly the plans `nest place --verify K` replays, K = `replay_candidates`: the best
  /// distinct plan of each placement order, then the best K − n of the other distinct plans (n:
  /// the orders with a plan that fits memory), by (time, order found), in
  /// `SearchResult::candidates`. An entry is pruned against `verification_cut` of its order, the
  /// least it must beat to enter that set: never lower than the best plan's time, and no higher
  /// than the K-th best plan of its order (the `keep_per_order` K cut), so this search is at
  /// least as fast and the set is the one that the K best of each order would yield. Plans over
  /// memory (with `ignore_memory`) are not candidates (a replay cannot run them). 0: off; not
  /// with `keep_per_order` > 0.
  int replay_candidates = 0;
};

/// Counters of one search, for benchmarks and reports.
struct SearchStats {
  std::int64_t tables = 0;           ///< DP tables built
  std::int64_t states = 0;           ///< (s, i) states solved
  std::int64_t memory_queries = 0;   ///< calls of workload::stage_memory
  std::int64_t candidates = 0;       ///< (configuration, S, d) pipelines priced in full, once
                                     ///< per pass (a later pass takes an earlier price)
  std::int64_t network_queries = 0;  ///< distinct queries sent to the CommCost
  std::int64_t pass_bounded = 0;     ///< plans ruled out by their price on the event-free bounds
  std::int64_t sync_bounded = 0;     ///< plans ruled out by the later steps of
                                     ///< `SearchOptions::pass_bounds` (their first bucket, or
                                     ///< their syncs priced a step at a time: `syncs_rule_out`)
  std::int64_t syncs_spared = 0;     ///< of those, the plans `syncs_rule_out` ruled out after
                                     ///< raising some of their syncs, before pricing all
  std::int64_t passes = 0;           ///< branch-and-bound passes (`SearchOptions::capped_passes`)
  std::int64_t last_cap = 0;         ///< the last pass's cap in ps (0: uncapped)
  std::int64_t requeued = 0;         ///< plans that waited for their joint syncs at their bound
                                     ///< (`SearchOptions::requeue_joint_from`), once per pass
};

/// The outcome: the best plan, or why nothing fits.
struct SearchResult {
  std::optional<Plan> best;
  /// When `best` is empty: one line saying why (the smallest stage's memory against the
  /// capacity, or the devices the smallest feasible pipeline needs; with the pipeline depth and
  /// the data-parallel degree fixed, the stage of the best plan ignoring memory that exceeds it
  /// and by how much).
  std::string infeasible_reason;
  /// With the depth and the data-parallel degree fixed and nothing fitting: that plan, priced
  /// with `ignore_memory` (so that a caller can show its breakdown beside the reason).
  std::optional<Plan> over_memory;
  /// With `keep_per_order` k > 0: the best k plans of each placement order (fewer when fewer
  /// fit), all of them priced by the cost model, by iteration time (ties: in the order found);
  /// `candidates.front()` is `best`. With `replay_candidates` K > 0: the plans to replay (see
  /// there), ordered the same way, `best` first (when it fits memory). Empty with both 0.
  std::vector<Plan> candidates;
  SearchStats stats;
};

/// The partition of the layer chain into `stages` stages with the smallest maximum stage time
/// for fixed `variant`, `data_parallel`, `zero_stage`, `recompute` and `order` (the DP above for
/// one configuration; the data-parallel sync and optimizer step are not part of its objective).
/// Returns the choice, or nothing when no partition fits memory. Throws `Error` (input) when the
/// configuration is invalid (as `validate_choice`). O(stages · n · log n) typically.
[[nodiscard]] std::optional<PlanChoice> best_partition(const workload::LayerProfile& profile,
                                                       std::size_t variant, int stages,
                                                       int data_parallel, int zero_stage,
                                                       workload::Recompute recompute,
                                                       PlacementOrder order, CommCost& comm,
                                                       const CostOptions& options);

/// The iteration time a new plan of one placement order must beat (strictly: of equal times
/// the one found first ranks first) to be replayed by `nest place --verify k` (see
/// `SearchOptions::replay_candidates`), given the distinct plans kept so far: `first_of_order`
/// the time of the best kept plan of its order (none: `Time::max()`, the plan would be that
/// order's best), `orders_with_plans` (n) the orders that have one, `rest` the times of every
/// other kept plan. The set is the best plan of each order plus the best k − n of the others, so
/// the cut is max(first_of_order, the (k − n)-th smallest of `rest`), just `first_of_order` when
/// n >= k, and `Time::max()` while `rest` has fewer than k − n. It never rises as plans are added
/// (the firsts only fall, and a displaced first joins `rest`), so an entry whose lower bound
/// reaches it can never yield a plan of the final set. O(|rest|).
[[nodiscard]] Time verification_cut(std::optional<Time> first_of_order,
                                    std::size_t orders_with_plans, std::vector<Time> rest, int k);

/// Which of `plans` (best first) a verification replays (`replay_candidates` K = `k`): the
/// first that fits memory of each placement order, then the next ones that fit, in order,
/// until `k` in all (more when more orders have plans). O(|plans| · orders).
[[nodiscard]] std::vector<bool> replay_selection(std::span<const Plan> plans, std::size_t k);

/// The search's bounding networks: every collective at `exact`'s `collective_bound` (arithmetic
/// on the layout, no routing) or, `event_free`, at its `collective_pass_bound` (the oracle's
/// answer where it knows it without events, else an event-free bound of it); transfers at
/// `transfer_bound`; both points of the ZeRO-3 gathers' line at the layout bound, so that the
/// line through them keeps its proportion to the bytes (an exact answer at one point and a bound
/// at the other would draw a line that, read outside them, is no bound: see
/// `plan_lower_bound`). Nothing is simulated. `exact` must outlive it.
class BoundNetwork final : public CommCost {
 public:
  BoundNetwork(CommCost& exact, bool event_free) : exact_(exact), event_free_(event_free) {}
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  Time gather_point(Bytes size, const GroupLayout& layout) override;
  bool placement_independent() const noexcept override { return exact_.placement_independent(); }
  bool zero() const noexcept override { return exact_.zero(); }
  int scale_up_size() const noexcept override { return exact_.scale_up_size(); }
  std::string describe() const override;

 private:
  CommCost& exact_;
  bool event_free_;
};

/// A lower bound of `evaluate(profile, choice, exact, options).iteration_time` for any network
/// `exact` whose answers `bounds` never exceeds (collectives and, with blocking stage-boundary
/// transfers, transfers; the joint data-parallel sync is left out: its factor is at least 1).
/// With the pipeline P = K·W + (S−1)·C + X (K microbatches per replica, W the busiest stage's
/// work per microbatch, C the bubble's chunk, X >= 0 the exposed transfers) and stage 0, which
/// ends it, reducing B buckets of R each before its optimizer step O: T >= P + R + O (the last
/// bucket is ready at P; P + B·R + O without overlapping the sync), and with overlap also
/// T >= (K−1)·W + (S−1)·C + B·R + O (the buckets run one after another from when the first is
/// ready, P − L + L/B, and stage 0's last backward L is part of its work, L <= W). Each term is
/// priced on `bounds`; the reductions less 0.1% for rounding. One `evaluate` on `bounds`, which
/// is asked for stage 0's sync only (the bound reads no other).
/// ZeRO-3 weight gathers are priced on the line through two sizes (256 MiB and 1 GiB); drawn
/// through bounds and read at a stage's bytes outside them, that line bounds the exact one only
/// when the exact all-gather's time grows per byte between those sizes at least at the bound's
/// rate: the search's bounds (`CommCost::collective_bound`, in proportion to the bytes) assume
/// it, which holds when the tuner runs one algorithm at both sizes (a test checks it on the
/// bundled clusters).
struct PlanBound {
  Time bound;  ///< the lower bound
  /// The plan priced on `bounds`, stage 0's sync alone; the other stages' syncs, which the
  /// bound does not read, are not asked of `bounds` (zero here).
  Plan plan;
  /// With the sync overlapped in two or more buckets: the second form without its B·R,
  /// (K−1)·W + (S−1)·C + O, against which stage 0's exact R can be tested.
  std::optional<Time> before_buckets;
};
[[nodiscard]] PlanBound plan_lower_bound(const workload::LayerProfile& profile,
                                         const PlanChoice& choice, CommCost& bounds,
                                         const CostOptions& options);

/// Whether the exact price `evaluate(profile, choice, exact, options).iteration_time` is at
/// least `at`, found while pricing the plan's data-parallel syncs a step at a time, each round
/// raising one sync (the first the cost model asks for, stage 0's first: the one the pipeline's
/// end exposes most) and pricing the plan again: first each stage's sync alone (priced as with
/// `CostOptions::joint_data_parallel_sync` off) from its event-free bound
/// (`CommCost::collective_pass_bound`) to its price (`collective`); then, if the option is on,
/// the joint syncs (runs of stages whose syncs overlap) from a factor of 1 to their event-free
/// bounds (`collective_like_bound`), every one, and then to their prices (`collective_like`).
/// The price grows with each sync, so each round's price is a lower bound of the exact one,
/// until one reaches `at` or every sync is priced (then the last is the exact price).
/// `priced`: the syncs it priced exactly; `spared`: ruled out after raising at least one sync
/// while some were not yet priced (those are never simulated); `price`: the last round's price
/// (a lower bound of the exact one), which is the exact price when `exact` (ruled out once
/// every sync was priced).
/// With `stop_before_joint`, a check that would go on to price joint syncs stops there:
/// `joint_pending`, and `price` is the plan's price with every joint sync at its event-free
/// bound (a lower bound of the exact one, below `at`).
struct SyncCheck {
  bool ruled_out = false;
  bool spared = false;
  bool exact = false;
  bool joint_pending = false;
  int priced = 0;
  Time price;
};
[[nodiscard]] SyncCheck syncs_rule_out(const workload::LayerProfile& profile,
                                       const PlanChoice& choice, CommCost& exact,
                                       const CostOptions& options, Time at,
                                       bool stop_before_joint = false);

/// Runs the search. Throws `Error` (input) on inconsistent options or profile. Deterministic:
/// of plans with equal iteration times, the first found in the fixed loop order wins (variants
/// in profile order, recomputation modes in the given order, ZeRO stages in the given order, orders
/// in the given order, d descending, S ascending).
[[nodiscard]] SearchResult search(const workload::LayerProfile& profile, CommCost& comm,
                                  const SearchOptions& options);
/// One branch-and-bound pass of a search (`SearchOptions::capped_passes`), as it ends.
struct PassReport {
  std::int64_t pass = 0;    ///< 1 for the first
  std::optional<Time> cap;  ///< the pass's cap; nullopt: uncapped
  bool guessed = false;     ///< capped near the least bound a failed pass's sync checks met
  bool confirms = false;    ///< capped one above the best time the last pass found, to confirm it
  bool ends = false;        ///< the search ends with it (its plans are the uncapped search's)
  bool to_confirm = false;  ///< found plans with requeued ones: the next pass confirms them
  SearchStats stats;        ///< the search's counters so far (`network_queries` included)
};

/// What a running search tells its caller, on the caller's thread; either may be empty.
struct SearchHooks {
  /// Every plan that a search for `replay_candidates` keeps, as it keeps it (in a later pass the
  /// same plan again): what a caller may replay before the search ends (`Job::placement`). Every
  /// plan of the final candidates is among them.
  std::function<void(const Plan&)> kept;
  /// Every pass, as it ends (what `nest -v place` logs of a long search).
  std::function<void(const PassReport&)> pass;
};

/// `search`, telling `hooks` as it runs. The search and its result are those without them.
[[nodiscard]] SearchResult search(const workload::LayerProfile& profile, CommCost& comm,
                                  const SearchOptions& options, const SearchHooks& hooks);

}  // namespace nest::placer
