#include "nest/placer/baselines.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/core/unit_parse.h"
#include "nest/placer/cost_model.h"
#include "placer/stage_model.h"

namespace nest::placer {
namespace {

std::vector<std::size_t> variant_indices(const workload::LayerProfile& profile,
                                         const SearchOptions& options) {
  if (!options.variants.empty()) return options.variants;
  std::vector<std::size_t> all;
  for (std::size_t i = 0; i < profile.variants.size(); ++i) all.push_back(i);
  return all;
}

// The recomputation modes the options allow on `profile`, in the options' order (none at least).
std::vector<workload::Recompute> allowed_modes(const workload::LayerProfile& profile,
                                               const SearchOptions& options) {
  std::vector<workload::Recompute> out;
  for (const workload::Recompute mode : options.recompute_modes) {
    if (mode != workload::Recompute::kNone && !profile.recompute_allowed) continue;
    if (mode == workload::Recompute::kSelective &&
        (!profile.selective_recompute_allowed ||
         options.cost.rules == workload::MemoryRules::kNestArtifact)) {
      continue;
    }
    if (std::find(out.begin(), out.end(), mode) == out.end()) out.push_back(mode);
  }
  if (out.empty()) out.push_back(workload::Recompute::kNone);
  return out;
}

int largest_data_parallel(const workload::Variant& v, int stages, std::int64_t devices) {
  const std::int64_t fit = devices / (static_cast<std::int64_t>(stages) * v.devices_per_replica);
  int d = static_cast<int>(std::min<std::int64_t>(fit, v.microbatches));
  const bool span =
      v.expert_parallel > 1 &&
      v.tensor_parallel * v.context_parallel * v.expert_parallel != v.devices_per_replica;
  if (span) d = d / v.expert_parallel * v.expert_parallel;
  return d;
}

std::string describe(const PlanChoice& c, const VariantDegrees& degrees) {
  return fmt::format("S {} d {} t {} mb {} ZeRO-{} recompute {} {}", c.stages(), c.data_parallel,
                     degrees.tensor_parallel, degrees.micro_batch, c.zero_stage,
                     workload::to_string(c.recompute), to_string(c.order));
}

std::string describe(const Plan& p) { return describe(p.choice, p.degrees); }

}  // namespace

namespace {

// The body: the longest run of identical layers (the transformer blocks), as (first, length);
// the whole chain when no two neighbours are alike.
std::pair<std::size_t, std::size_t> block_run(const workload::Variant& variant) {
  const std::size_t n = variant.layers.size();
  std::size_t first = 0;
  std::size_t length = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t j = i + 1;
    while (j < n && detail::same_layer(variant.layers[i], variant.layers[j])) ++j;
    if (j - i > length) {
      first = i;
      length = j - i;
    }
    i = j;
  }
  if (length < 2) return {0, n};
  return {first, length};
}

}  // namespace

std::vector<std::size_t> block_partition(const workload::Variant& variant, int parts) {
  const std::size_t n = variant.layers.size();
  const auto [first, length] = block_run(variant);
  if (parts < 1 || static_cast<std::size_t>(parts) > length) return {};
  const auto c = static_cast<std::size_t>(parts);
  std::vector<std::size_t> b{0};
  for (std::size_t i = 1; i < c; ++i) b.push_back(first + i * length / c);
  b.push_back(n);
  return b;
}

std::vector<std::size_t> interleaved_partition(const workload::Variant& variant, int stages,
                                               int virtual_stages) {
  if (stages < 1 || virtual_stages < 1) return {};
  const std::size_t parts = static_cast<std::size_t>(stages) * virtual_stages;
  if (block_run(variant).second % parts != 0) return {};
  return block_partition(variant, static_cast<int>(parts));
}

std::vector<std::size_t> even_partition(const workload::Variant& variant, int stages) {
  const std::size_t n = variant.layers.size();
  if (stages < 1 || static_cast<std::size_t>(stages) > n) return {};
  const auto [first, length] = block_run(variant);
  const std::size_t s = static_cast<std::size_t>(stages);
  const std::size_t per = (length + s - 1) / s;
  if (per * (s - 1) >= length) return {};  // the last stage would get no block
  std::vector<std::size_t> b{0};
  for (std::size_t p = 1; p < s; ++p) b.push_back(first + p * per);
  b.push_back(n);
  return b;
}

BaselineResult manual_baseline(const workload::LayerProfile& profile, CommCost& comm,
                               const SearchOptions& options) {
  BaselineResult r{.name = "manual"};
  const auto indices = variant_indices(profile, options);
  // The largest t not above the scale-up domain, then the smallest micro-batch.
  const int domain = comm.scale_up_size();
  std::optional<std::size_t> pick;
  for (const std::size_t i : indices) {
    const auto& v = profile.variants[i];
    if (v.tensor_parallel > domain) continue;
    if (!pick) {
      pick = i;
      continue;
    }
    const auto& b = profile.variants[*pick];
    if (v.tensor_parallel > b.tensor_parallel ||
        (v.tensor_parallel == b.tensor_parallel && v.micro_batch < b.micro_batch)) {
      pick = i;
    }
  }
  if (!pick) {
    r.note = fmt::format("no variant has tensor parallel <= the scale-up domain ({})", domain);
    return r;
  }
  const auto& v = profile.variants[*pick];
  const bool artifact = options.cost.rules == workload::MemoryRules::kNestArtifact;
  // Memory does not depend on the network (workload::stage_memory): the fit is checked on the
  // zero network and only the plan that fits is priced (the same plan; Llama-3.1-405B on 1,024
  // H100s: 0.36-0.46 s -> 0.02 s).
  ZeroCommCost memory_only(domain);
  for (int stages = 1; stages <= static_cast<int>(v.layers.size()); ++stages) {
    const int d = largest_data_parallel(v, stages, options.cost.devices);
    if (d < 1) break;
    const auto b = even_partition(v, stages);
    if (b.empty()) continue;
    for (const workload::Recompute rec : allowed_modes(profile, options)) {
      const PlanChoice choice{.variant = *pick,
                              .boundaries = b,
                              .data_parallel = d,
                              .zero_stage = artifact ? 0 : 1,
                              .recompute = rec,
                              .order = PlacementOrder::kTensorDataPipeline};
      if (!evaluate(profile, choice, memory_only, options.cost).fits()) continue;
      Plan plan = evaluate(profile, choice, comm, options.cost);
      if (!plan.fits()) continue;
      r.note = "Megatron practice: " + describe(plan);
      r.plan = std::move(plan);
      return r;
    }
  }
  r.note = fmt::format("no even split of the tensor-parallel-{} variant fits memory on {} devices",
                       v.tensor_parallel, options.cost.devices);
  return r;
}

BaselineResult topology_agnostic_baseline(const workload::LayerProfile& profile, CommCost& comm,
                                          FlatCommCost& flat, const SearchOptions& options) {
  BaselineResult r{.name = "topology-agnostic"};
  // Only its best plan is used: keeping candidates (for --verify) would only cost, and the
  // search without them runs in capped passes (`SearchOptions::capped_passes`), the same plan.
  SearchOptions estimate = options;
  estimate.replay_candidates = 0;
  estimate.keep_per_order = 0;
  const SearchResult found = search(profile, flat, estimate);
  if (!found.best) {
    r.note = found.infeasible_reason;
    return r;
  }
  Plan plan = evaluate(profile, found.best->choice, comm, options.cost);
  r.note = fmt::format("searched on a {}: {} (predicted there {})", flat.describe(), describe(plan),
                       format_time(found.best->iteration_time));
  r.plan = std::move(plan);
  return r;
}

namespace {

// A digest of a choice, for the annealer's memo of energies.
struct ChoiceHash {
  std::size_t operator()(const PlanChoice& c) const noexcept {
    std::uint64_t h = hash_mix(c.variant, static_cast<std::uint64_t>(c.data_parallel));
    h = hash_mix(h, static_cast<std::uint64_t>(c.zero_stage));
    h = hash_mix(h, static_cast<std::uint64_t>(c.recompute));
    h = hash_mix(h, static_cast<std::uint64_t>(c.virtual_stages));
    h = hash_mix(h, static_cast<std::uint64_t>(c.order));
    for (const std::size_t b : c.boundaries) h = hash_mix(h, b);
    return static_cast<std::size_t>(h);
  }
};

// One annealing state and its energy.
struct State {
  PlanChoice choice;
  double energy = std::numeric_limits<double>::infinity();
};

// The annealer's network: the walk prices plans without simulating contention, as FlexFlow's
// MCMC search priced them on a simulator of task graphs without link contention (on a network
// whose answers do not depend on the devices, zero or flat, the walk asks that network itself).
// A collective is priced on one group of its layout moved to device 0 (in a symmetric cluster
// every group and stage sees the same links, up to ECMP's hashing; other groups' traffic is
// ignored, as contention is), by the network's event-free bound (`collective_pass_bound`: the
// contention-free pass of the fastest algorithm, exact for a group that shares no link, or the
// network's answer when it already holds one: the anneal's own oracle holds the manual plan's
// exact prices), a joint data-parallel sync as its groups' collective, and a collective of at
// least 64 MiB on the line through its layout's times at 64 MiB and 256 MiB (affine in the size
// on a fixed layout; OracleOptions::interpolate_sizes). Transfers are priced by the network's
// `transfer_bound`. So a step costs passes over one group's transfers, not event simulations;
// the plan the walk keeps is priced exactly unless its bounds show the manual plan beats it
// (`cannot_match`).
class ApproximateCommCost final : public ForwardingCommCost {
 public:
  using ForwardingCommCost::ForwardingCommCost;

  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& at) override {
    GroupLayout layout = at;
    layout.base = 0;
    for (LayoutAxis& axis : layout.groups) axis = LayoutAxis{};
    if (size < kLow) return inner().collective_pass_bound(op, size, layout);
    const Time a = inner().collective_pass_bound(op, kLow, layout);
    const Time b = inner().collective_pass_bound(op, kHigh, layout);
    const long double f = static_cast<long double>((size - kLow).count()) /
                          static_cast<long double>((kHigh - kLow).count());
    return a + Time::picoseconds(static_cast<std::int64_t>(
                   std::llroundl(static_cast<long double>((b - a).ps()) * f)));
  }
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override {
    return inner().transfer_bound(size, from, to);
  }
  // The groups together, as one collective: one group at device 0 (`collective`).
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& at,
                       const GroupLayout& /*like*/) override {
    return collective(op, size, at);
  }
  // The walk's joint syncs are its own approximation (`collective_like`), priced in every case.
  bool groups_apart(workload::CollectiveOp, Bytes, const GroupLayout&, int) override {
    return false;
  }

 private:
  static constexpr Bytes kLow{std::int64_t{64} << 20};
  static constexpr Bytes kHigh{std::int64_t{256} << 20};
};

class Annealer {
 public:
  Annealer(const workload::LayerProfile& profile, CommCost& comm, const SearchOptions& options,
           std::uint64_t seed)
      : profile_(profile),
        comm_(comm),
        options_(options),
        rng_(seed),
        indices_(variant_indices(profile, options)),
        modes_(allowed_modes(profile, options)) {
    if (options.cost.rules == workload::MemoryRules::kNestArtifact) {
      zeros_ = {0};
    } else {
      zeros_ = options.zero_stages.empty() ? std::vector<int>{0} : options.zero_stages;
    }
    orders_ = comm.placement_independent() ? std::vector<PlacementOrder>{options.orders.front()}
                                           : options.orders;
  }

  // Plans that do not fit cost more by how far they overflow, so the walk can cross them.
  // Memoized by choice: the walk proposes the same neighbours again and again, and a choice's
  // energy is a function of the choice (the network's answers are). A repeated choice cannot
  // change `fitting` either: its plan was compared when first met, and only a strictly faster
  // plan replaces the one kept.
  double energy(const PlanChoice& c, std::optional<Plan>& fitting) {
    if (const auto it = energies_.find(c); it != energies_.end()) return it->second;
    const double e = fresh_energy(c, fitting);
    energies_.emplace(c, e);
    return e;
  }

  double fresh_energy(const PlanChoice& c, std::optional<Plan>& fitting) {
    try {
      validate_choice(profile_, c, options_.cost);
    } catch (const Error&) {
      return std::numeric_limits<double>::infinity();
    }
    Plan plan = evaluate(profile_, c, comm_, options_.cost);
    double worst = 0;
    for (const auto& s : plan.stages) {
      worst = std::max(worst, s.memory.total().as_double() / plan.capacity.as_double());
    }
    const double t = plan.iteration_time.to_seconds();
    if (worst <= 1) {
      if (!fitting || plan.iteration_time < fitting->iteration_time) fitting = std::move(plan);
      return t;
    }
    return t * (1.5 + 4 * (worst - 1));
  }

  std::optional<PlanChoice> neighbour(const PlanChoice& c) {
    PlanChoice next = c;
    const auto& v = profile_.variants[c.variant];
    const int stages = c.stages();
    switch (rng_.below(7)) {
      case 0:
      case 1: {  // move a boundary
        if (stages < 2) return std::nullopt;
        const std::size_t p = 1 + rng_.below(static_cast<std::uint64_t>(stages - 1));
        auto& b = next.boundaries[p];
        const bool up = rng_.below(2) == 0;
        if (up && b + 1 < next.boundaries[p + 1]) ++b;
        if (!up && b - 1 > next.boundaries[p - 1]) --b;
        break;
      }
      case 2:
      case 3: {  // one stage more or fewer, re-split evenly
        const int depth = stages + (rng_.below(2) == 0 ? 1 : -1);
        auto even = even_partition(v, depth);
        if (even.empty()) return std::nullopt;
        next.boundaries = std::move(even);
        break;
      }
      case 4: {  // data-parallel degree
        const int dmax = largest_data_parallel(v, stages, options_.cost.devices);
        if (dmax < 1) return std::nullopt;
        next.data_parallel = 1 + static_cast<int>(rng_.below(static_cast<std::uint64_t>(dmax)));
        break;
      }
      case 5: {  // variant, re-split evenly at the same depth
        const std::size_t vi = indices_[rng_.below(indices_.size())];
        auto even = even_partition(profile_.variants[vi], stages);
        if (even.empty()) return std::nullopt;
        next.variant = vi;
        next.boundaries = std::move(even);
        break;
      }
      default: {  // recomputation, ZeRO stage or order
        const auto what = rng_.below(3);
        if (what == 0 && modes_.size() > 1) {
          // The next mode in the list (with none and full: a flip).
          const auto at = std::find(modes_.begin(), modes_.end(), next.recompute);
          next.recompute =
              at == modes_.end() || at + 1 == modes_.end() ? modes_.front() : *(at + 1);
        } else if (what == 1) {
          next.zero_stage = zeros_[rng_.below(zeros_.size())];
        } else {
          next.order = orders_[rng_.below(orders_.size())];
        }
        break;
      }
    }
    // A new depth or replica size fills the devices with replicas (the rest data parallel);
    // otherwise d stays within what they leave.
    const auto& nv = profile_.variants[next.variant];
    const int dmax = largest_data_parallel(nv, next.stages(), options_.cost.devices);
    if (dmax < 1) return std::nullopt;
    const bool reshaped = next.stages() != stages || next.variant != c.variant;
    next.data_parallel = reshaped ? dmax : std::min(next.data_parallel, dmax);
    if (next == c) return std::nullopt;
    return next;
  }

  // `a.iterations` steps (none when the start does not fit the walk's pricing at all).
  std::optional<Plan> run(PlanChoice start, const AnnealOptions& a) {
    std::optional<Plan> fitting;
    steps_ = 0;
    State cur{start, energy(start, fitting)};
    if (!std::isfinite(cur.energy)) return fitting;
    const double t0 = a.start_temperature * cur.energy;
    const double t1 = a.end_temperature * cur.energy;
    steps_ = a.iterations;
    for (int it = 0; it < a.iterations; ++it) {
      const double frac = a.iterations > 1 ? static_cast<double>(it) / (a.iterations - 1) : 1.0;
      const double temperature = t0 * std::pow(t1 / t0, frac);
      const auto next = neighbour(cur.choice);
      if (!next) continue;
      const double e = energy(*next, fitting);
      if (!std::isfinite(e)) continue;
      if (e <= cur.energy || rng_.uniform() < std::exp((cur.energy - e) / temperature)) {
        cur = State{*next, e};
      }
    }
    return fitting;
  }

 private:
  const workload::LayerProfile& profile_;
  CommCost& comm_;
  const SearchOptions& options_;
  Rng rng_;
  std::vector<std::size_t> indices_;
  std::vector<workload::Recompute> modes_;
  std::vector<int> zeros_;
  std::vector<PlacementOrder> orders_;
  std::unordered_map<PlanChoice, double, ChoiceHash> energies_;
  int steps_ = 0;  // steps the last run took

 public:
  [[nodiscard]] int steps() const noexcept { return steps_; }
};

// Whether `choice`'s exact price exceeds `time` (so that it cannot match a plan of that time), told
// as the search rules plans out, and only when the search would (`SearchOptions::pass_bounds`):
// on the network's event-free bounds (`plan_lower_bound` on a `BoundNetwork`, a bound for every
// ZeRO stage: the network prices both points of the ZeRO-3 gathers' line at the layout bound),
// then with its data-parallel syncs priced a step at a time (`syncs_rule_out`). When it does not,
// the plan may still be slower: the caller prices it in full.
bool cannot_match(const workload::LayerProfile& profile, const PlanChoice& choice, CommCost& comm,
                  const SearchOptions& options, Time time) {
  if (!options.pass_bounds) return false;
  const Time at = time + Time::picoseconds(1);
  BoundNetwork bounds(comm, true);
  if (plan_lower_bound(profile, choice, bounds, options.cost).bound >= at) return true;
  const bool joint =
      options.cost.joint_data_parallel_sync && choice.data_parallel > 1 && choice.stages() > 1;
  return joint && syncs_rule_out(profile, choice, comm, options.cost, at).ruled_out;
}

}  // namespace

BaselineResult anneal_baseline(const workload::LayerProfile& profile, CommCost& comm,
                               const SearchOptions& options, const AnnealOptions& anneal) {
  BaselineResult r{.name = "anneal"};
  const BaselineResult manual = manual_baseline(profile, comm, options);
  PlanChoice start;
  if (manual.plan) {
    start = manual.plan->choice;
  } else {
    // One stage per layer of the smallest replica, as many replicas as fit.
    const auto indices = variant_indices(profile, options);
    std::size_t best = indices.front();
    for (const std::size_t i : indices) {
      if (profile.variants[i].devices_per_replica < profile.variants[best].devices_per_replica) {
        best = i;
      }
    }
    const auto& v = profile.variants[best];
    const int stages = static_cast<int>(std::min<std::int64_t>(
        static_cast<std::int64_t>(v.layers.size()), options.cost.devices / v.devices_per_replica));
    if (stages < 1) {
      r.note = "no replica fits the devices";
      return r;
    }
    start.variant = best;
    start.boundaries = even_partition(v, stages);
    if (start.boundaries.empty()) {
      start.boundaries.clear();
      for (int p = 0; p < stages; ++p) start.boundaries.push_back(static_cast<std::size_t>(p));
      start.boundaries.push_back(v.layers.size());
    }
    // The most memory-saving mode allowed: full, else the last one listed.
    const auto modes = allowed_modes(profile, options);
    start.recompute =
        std::find(modes.begin(), modes.end(), workload::Recompute::kFull) != modes.end()
            ? workload::Recompute::kFull
            : modes.back();
    start.order = options.orders.front();
  }
  // On a network whose answers do not depend on the devices the walk asks that network itself,
  // so its plans are priced exactly already.
  const bool exact_walk = comm.placement_independent();
  ApproximateCommCost grid(comm);
  Annealer annealer(profile, exact_walk ? comm : grid, options, anneal.seed);
  auto plan = annealer.run(start, anneal);
  // The walk's best plan, priced exactly, unless its bounds show that the manual plan, where the
  // walk started, beats it (the approximate network may rank the two the other way round); never
  // worse than the manual plan, and it wins a tie.
  const bool manual_fits = manual.plan && manual.plan->fits();
  std::string slower;  // the walk's best, when the manual plan is kept instead
  if (plan && manual_fits && plan->choice == manual.plan->choice) {
    plan = manual.plan;
  } else if (plan && !exact_walk) {
    if (manual_fits &&
        cannot_match(profile, plan->choice, comm, options, manual.plan->iteration_time)) {
      slower = describe(plan->choice, plan->degrees);
      plan.reset();
    } else {
      plan = evaluate(profile, plan->choice, comm, options.cost);
    }
  }
  if (manual_fits && (!plan || manual.plan->iteration_time < plan->iteration_time)) {
    if (plan) slower = describe(*plan);
    plan = manual.plan;
  }
  if (!plan) {
    r.note =
        fmt::format("no fitting plan met in {} steps (seed {})", annealer.steps(), anneal.seed);
    return r;
  }
  r.note = fmt::format("{} steps from {} (seed {}): {}", annealer.steps(),
                       manual.plan ? "the manual plan" : "the smallest replica's deepest pipeline",
                       anneal.seed, describe(*plan));
  if (!slower.empty()) r.note += fmt::format(" (the walk's best is slower: {})", slower);
  r.plan = std::move(plan);
  return r;
}

BaselineResult fixed_baseline(const workload::LayerProfile& profile, const PlanChoice& choice,
                              CommCost& comm, const CostOptions& options) {
  BaselineResult r{.name = "fixed"};
  Plan plan = evaluate(profile, choice, comm, options);
  if (!plan.fits()) {
    const auto worst = std::max_element(plan.stages.begin(), plan.stages.end(),
                                        [](const StageReport& a, const StageReport& b) {
                                          return a.memory.total() < b.memory.total();
                                        });
    r.note = fmt::format("does not fit: stage {} needs {} per device against a capacity of {}",
                         worst - plan.stages.begin(), format_bytes(worst->memory.total()),
                         format_bytes(plan.capacity));
    return r;
  }
  r.note = "given: " + describe(plan);
  r.plan = std::move(plan);
  return r;
}

}  // namespace nest::placer
