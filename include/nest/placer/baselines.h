#pragma once
/// \file
/// Baselines, each judged by the same cost model as the NEST search (nest/placer/cost_model.h)
/// so that comparisons are fair:
/// - `manual`: Megatron-LM practice. Tensor parallel = the scale-up domain (the largest t of the
///   profile not above it, smallest micro-batch), the fewest pipeline stages whose even split
///   fits memory (transformer blocks split ceil(B/S) per stage, the last stage taking the rest,
///   leading and trailing non-block layers joined to the first and last stages), recomputation
///   only when needed, the distributed optimizer (ZeRO-1; none under the nest-artifact rules),
///   the rest data parallel (d = min(M, floor(N / (S · t)))), Megatron's rank order (tp-dp-pp).
/// - `topology-agnostic`: the NEST search on a flat network (Phaze-like), its plan then priced
///   on the real network.
/// - `anneal`: seeded simulated annealing over (variant, S, d, recomputation, ZeRO stage, order,
///   partition), MCMC-like (FlexFlow); moves a boundary by one layer, adds or removes a stage
///   (re-split evenly), changes d, the variant (re-split evenly), recomputation, ZeRO or the
///   order; plans that overflow memory are penalized (so the walk may cross them) and the best
///   plan that fits is kept. The walk prices on event-free bounds (one group of each layout
///   moved to device 0, its contention-free pass; collectives of 64 MiB and more on a line
///   through two sizes; transfers on their bound), as FlexFlow's simulator ignored link
///   contention, so its budget is its steps (`AnnealOptions::iterations`), not simulated
///   events; the manual plan is priced exactly, and so is the plan the walk keeps unless the
///   search's ways of ruling plans out (`SearchOptions::pass_bounds`: its event-free bounds,
///   then its syncs a step at a time) show that the manual plan beats it. The bounds answer
///   from what `comm` already holds, so a walk is deterministic for a seed and a network state
///   (the job gives it an oracle of its own).
/// - `fixed`: a plan the user gives ("how good is my current configuration?").

#include <cstdint>

#include "nest/placer/comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/placer/search.h"
#include "nest/workload/layer_profile.h"

namespace nest::placer {

/// The manual (Megatron practice) plan, or why none fits. `options.cost` and `options.variants`
/// are used.
[[nodiscard]] BaselineResult manual_baseline(const workload::LayerProfile& profile, CommCost& comm,
                                             const SearchOptions& options);

/// The search's plan on `flat`, priced on `comm`.
[[nodiscard]] BaselineResult topology_agnostic_baseline(const workload::LayerProfile& profile,
                                                        CommCost& comm, FlatCommCost& flat,
                                                        const SearchOptions& options);

/// Settings of the annealer.
struct AnnealOptions {
  std::uint64_t seed = 1;
  int iterations = 2000;
  /// Start and end temperature as fractions of the first plan's iteration time (geometric
  /// cooling between them).
  double start_temperature = 0.1;
  double end_temperature = 1e-5;
};

/// Simulated annealing from the manual plan (or, when none fits, from one stage per layer at
/// the smallest replica). Deterministic for a seed. O(iterations · (n + S)) plus network queries.
[[nodiscard]] BaselineResult anneal_baseline(const workload::LayerProfile& profile, CommCost& comm,
                                             const SearchOptions& options,
                                             const AnnealOptions& anneal = {});

/// A given plan, evaluated (validated first; a plan that does not fit is reported with a note).
[[nodiscard]] BaselineResult fixed_baseline(const workload::LayerProfile& profile,
                                            const PlanChoice& choice, CommCost& comm,
                                            const CostOptions& options);

/// The even split of the manual baseline: blocks (the longest run of identical layers, or all
/// layers) ceil(B/S) per stage with the last stage taking the rest, leading layers joined to the
/// first stage and trailing ones to the last. Empty when S stages cannot all get a block.
[[nodiscard]] std::vector<std::size_t> even_partition(const workload::Variant& variant, int stages);

/// Megatron-LM's split into `parts` model chunks: the blocks (as in `even_partition`) spread as
/// evenly as possible, chunk c taking blocks [c·B/parts, (c+1)·B/parts), the leading layers (the
/// embedding) joined to the first chunk and the trailing ones (the head) to the last. `parts` + 1
/// boundaries; empty when a chunk would get no block.
[[nodiscard]] std::vector<std::size_t> block_partition(const workload::Variant& variant, int parts);

/// The chunks of interleaved 1F1B with `virtual_stages` chunks per stage (Megatron-LM: every
/// chunk the same number of blocks): `block_partition` into S·v chunks, empty unless S·v divides
/// the blocks. With v = 1, Megatron's uniform 1F1B split (when S divides the blocks).
[[nodiscard]] std::vector<std::size_t> interleaved_partition(const workload::Variant& variant,
                                                             int stages, int virtual_stages);

}  // namespace nest::placer
