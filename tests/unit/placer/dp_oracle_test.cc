// The dynamic program against exhaustive enumeration on random small instances: chains of up to
// 10 layers, up to 16 devices, random times, sizes, collectives and capacities.

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>
#include <vector>

#include "nest/core/rng.h"
#include "nest/placer/baselines.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/search.h"
#include "nest/workload/layer_profile.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::MemoryRules;
using workload::Recompute;

std::int64_t uniform(Rng& rng, std::int64_t lo, std::int64_t hi) {
  return lo + static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(hi - lo + 1)));
}

workload::LayerProfile random_profile(Rng& rng) {
  workload::LayerProfile p;
  p.model = "random";
  p.recompute_allowed = rng.below(4) != 0;
  p.selective_recompute_allowed = rng.below(2) == 0;
  p.hbm = Bytes::mebibytes(uniform(rng, 150, 1500));
  const int n = static_cast<int>(uniform(rng, 2, 10));
  const std::int64_t microbatches = uniform(rng, 1, 16);
  // A run of identical layers in the middle half of the time exercises the O(1) run shortcut.
  const bool runs = rng.below(2) == 0;
  std::vector<workload::Layer> base;
  for (int i = 0; i < n; ++i) {
    workload::Layer l;
    l.name = "layer" + std::to_string(i);
    l.forward = Time::microseconds(static_cast<double>(uniform(rng, 1, 1000)));
    l.backward = Time::microseconds(static_cast<double>(uniform(rng, 0, 2000)));
    l.recompute = Time::microseconds(static_cast<double>(uniform(rng, 0, 1000)));
    l.parameters = uniform(rng, 0, 8) << 20;
    l.parameter_bytes = Bytes(2 * l.parameters);
    l.activation_bytes = Bytes::mebibytes(uniform(rng, 1, 200));
    l.selective_recompute = Time::microseconds(static_cast<double>(uniform(rng, 0, 300)));
    l.selective_activation_bytes = Bytes::mebibytes(uniform(
        rng, (l.activation_bytes.count() >> 20) / 8, (l.activation_bytes.count() >> 20) / 2));
    l.input_bytes = Bytes::mebibytes(uniform(rng, 0, 40));
    l.output_bytes = Bytes::mebibytes(uniform(rng, 0, 40));
    if (rng.below(2) == 0) {
      l.collectives.push_back({.op = workload::CollectiveOp::kAllReduce,
                               .axis = workload::ParallelAxis::kTensor,
                               .size = Bytes::mebibytes(uniform(rng, 1, 64)),
                               .count = 2,
                               .recompute_count = 1});
    }
    if (runs && i > 0 && i < n - 1 && rng.below(3) != 0) {
      l = base.back();
      l.name = "copy";
    }
    base.push_back(l);
  }
  for (const int dpr : {1, 2, 4}) {
    if (rng.below(3) == 0 && !p.variants.empty()) continue;
    workload::Variant v;
    v.tensor_parallel = dpr;
    v.devices_per_replica = dpr;
    v.microbatches = microbatches;
    v.layers = base;
    for (auto& l : v.layers) {
      l.forward = Time::picoseconds(l.forward.ps() / dpr);
      l.backward = Time::picoseconds(l.backward.ps() / dpr);
      l.parameters /= dpr;
      l.parameter_bytes = Bytes(l.parameter_bytes.count() / dpr);
      l.activation_bytes = Bytes(l.activation_bytes.count() / dpr);
      l.selective_activation_bytes = Bytes(l.selective_activation_bytes.count() / dpr);
    }
    p.variants.push_back(v);
  }
  return p;
}

// Every composition of n layers into `stages` parts, as boundary lists.
std::vector<std::vector<std::size_t>> partitions(std::size_t n, int stages) {
  std::vector<std::vector<std::size_t>> out;
  for (std::uint32_t mask = 0; mask < (1U << (n - 1)); ++mask) {
    if (std::popcount(mask) != stages - 1) continue;
    std::vector<std::size_t> b{0};
    for (std::size_t i = 1; i < n; ++i) {
      if ((mask >> (i - 1)) & 1U) b.push_back(i);
    }
    b.push_back(n);
    out.push_back(b);
  }
  return out;
}

struct Exhaustive {
  std::optional<Plan> best;
  std::int64_t plans = 0;
};

Exhaustive enumerate(const workload::LayerProfile& profile, CommCost& comm,
                     const SearchOptions& options) {
  Exhaustive ex;
  const bool artifact = options.cost.rules == MemoryRules::kNestArtifact;
  for (std::size_t vi = 0; vi < profile.variants.size(); ++vi) {
    const auto& v = profile.variants[vi];
    const std::size_t n = v.layers.size();
    for (const Recompute rec : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
      if (rec != Recompute::kNone && !profile.recompute_allowed) continue;
      if (rec == Recompute::kSelective && (artifact || !profile.selective_recompute_allowed)) {
        continue;
      }
      for (const int zero : artifact ? std::vector<int>{0} : options.zero_stages) {
        for (int d = 1; d <= v.microbatches; ++d) {
          if (!options.data_parallel.empty() &&
              std::find(options.data_parallel.begin(), options.data_parallel.end(), d) ==
                  options.data_parallel.end()) {
            continue;
          }
          for (int s = 1; s <= static_cast<int>(n); ++s) {
            if (static_cast<std::int64_t>(s) * v.devices_per_replica * d > options.cost.devices) {
              break;
            }
            for (const auto& b : partitions(n, s)) {
              const PlanChoice choice{.variant = vi,
                                      .boundaries = b,
                                      .data_parallel = d,
                                      .zero_stage = zero,
                                      .recompute = rec,
                                      .order = options.orders.front()};
              Plan plan = evaluate(profile, choice, comm, options.cost);
              ++ex.plans;
              if (!plan.fits()) continue;
              if (!ex.best || plan.iteration_time < ex.best->iteration_time) {
                ex.best = std::move(plan);
              }
            }
            // Interleaved 1F1B: its chunks follow from (S, v); Megatron-LM runs microbatches in
            // groups of S.
            const bool groups = v.microbatches % d == 0 && (v.microbatches / d) % s == 0;
            for (int vs = 2; !artifact && groups && s > 1 && s * vs <= static_cast<int>(n); ++vs) {
              const auto b = interleaved_partition(v, s, vs);
              if (b.empty()) continue;
              const PlanChoice choice{.variant = vi,
                                      .boundaries = b,
                                      .data_parallel = d,
                                      .zero_stage = zero,
                                      .recompute = rec,
                                      .virtual_stages = vs,
                                      .order = options.orders.front()};
              Plan plan = evaluate(profile, choice, comm, options.cost);
              ++ex.plans;
              if (!plan.fits()) continue;
              if (!ex.best || plan.iteration_time < ex.best->iteration_time) {
                ex.best = std::move(plan);
              }
            }
          }
        }
      }
    }
  }
  return ex;
}

SearchOptions random_options(Rng& rng) {
  SearchOptions o;
  o.cost.rules = rng.below(2) == 0 ? MemoryRules::kNestArtifact : MemoryRules::kMegatron;
  o.cost.devices = uniform(rng, 1, 16);
  o.zero_stages = {0, static_cast<int>(uniform(rng, 1, 3))};
  return o;
}

TEST(DynamicProgram, EqualsExhaustiveEnumerationOnTheZeroNetwork) {
  Rng rng(20260);
  int feasible = 0;
  int selective = 0;
  for (int instance = 0; instance < 40; ++instance) {
    SCOPED_TRACE("instance " + std::to_string(instance));
    const auto profile = random_profile(rng);
    SearchOptions options = random_options(rng);
    // Every data-parallel degree, so that even ties in ceil(M/d) are compared with the same d.
    options.all_data_parallel_degrees = true;
    ZeroCommCost zero;
    const SearchResult dp = search(profile, zero, options);
    const Exhaustive ex = enumerate(profile, zero, options);
    ASSERT_EQ(dp.best.has_value(), ex.best.has_value()) << dp.infeasible_reason;
    if (!ex.best) {
      EXPECT_FALSE(dp.infeasible_reason.empty());
      continue;
    }
    ++feasible;
    if (ex.best->choice.recompute == Recompute::kSelective) ++selective;
    EXPECT_EQ(dp.best->iteration_time, ex.best->iteration_time);
    EXPECT_TRUE(dp.best->fits());
    for (const auto& stage : dp.best->stages) EXPECT_LE(stage.memory.total(), profile.hbm);
  }
  // The generator must give both outcomes a fair share, and selective optima.
  EXPECT_GE(feasible, 15);
  EXPECT_LE(feasible, 39);
  EXPECT_GE(selective, 1);  // 1 with this seed
}

// Chains of an embedding, 4, 6 or 8 identical blocks and a head, where interleaving often wins.
TEST(DynamicProgram, InterleavedPipelinesEqualExhaustiveEnumerationOnTheZeroNetwork) {
  Rng rng(515);
  int interleaved = 0;
  int feasible = 0;
  for (int instance = 0; instance < 80; ++instance) {
    SCOPED_TRACE("instance " + std::to_string(instance));
    auto profile = random_profile(rng);
    const auto blocks = static_cast<std::size_t>(2 * uniform(rng, 2, 4));
    const std::int64_t microbatches = 4 * uniform(rng, 1, 4);
    for (auto& v : profile.variants) {
      std::vector<workload::Layer> layers{v.layers.front()};
      layers.insert(layers.end(), blocks, v.layers[v.layers.size() / 2]);
      layers.push_back(v.layers.back());
      v.layers = std::move(layers);
      v.microbatches = microbatches;
    }
    SearchOptions options = random_options(rng);
    options.cost.rules = MemoryRules::kMegatron;
    if (rng.below(2) == 0) options.data_parallel = {1};  // pipelines take the devices
    options.all_data_parallel_degrees = true;
    ZeroCommCost zero;
    const SearchResult dp = search(profile, zero, options);
    const Exhaustive ex = enumerate(profile, zero, options);
    ASSERT_EQ(dp.best.has_value(), ex.best.has_value()) << dp.infeasible_reason;
    if (!ex.best) continue;
    ++feasible;
    if (ex.best->choice.virtual_stages > 1) ++interleaved;
    EXPECT_EQ(dp.best->iteration_time, ex.best->iteration_time);
    EXPECT_TRUE(dp.best->fits());
  }
  // Both kinds of optimum occur (66 feasible instances, 6 interleaved optima with this seed).
  EXPECT_GE(feasible, 40);
  EXPECT_GE(interleaved, 4);
}

// Equal optima go to the first stage end a scan over the ends finds, whether the table scans or
// searches for the crossing point. Layers of 1, 0, 0, 10 and 10 us in three stages: the best
// pipeline's slowest stage takes 10 us with the first stage ending after layer 0, 1 or 2. The
// two-stage rest costs 10 us from each of those three starts, the first stage less, so the
// search for the crossing point ends past them; a scan takes the first, one layer.
TEST(DynamicProgram, EqualOptimaGoToTheFirstStageEndAScanFinds) {
  workload::LayerProfile p;
  p.model = "ties";
  p.recompute_allowed = false;
  p.hbm = Bytes::gibibytes(80);
  workload::Variant v;
  v.microbatches = 64;
  for (const std::int64_t us : {1, 0, 0, 10, 10}) {
    workload::Layer l;
    l.name = "layer" + std::to_string(v.layers.size());
    l.forward = Time::microseconds(static_cast<double>(us));
    l.activation_bytes = Bytes::mebibytes(1);
    v.layers.push_back(l);
  }
  p.variants.push_back(v);
  SearchOptions options;
  options.cost.devices = 3;
  options.data_parallel = {1};
  options.stages = {3};
  options.zero_stages = {0};
  options.recompute_modes = {Recompute::kNone};
  options.orders = {options.orders.front()};
  ZeroCommCost zero;
  const SearchResult r = search(p, zero, options);
  ASSERT_TRUE(r.best.has_value()) << r.infeasible_reason;
  EXPECT_EQ(r.best->choice.boundaries, (std::vector<std::size_t>{0, 1, 4, 5}));
}

TEST(DynamicProgram, PrunedDataParallelDegreesLoseNothingOnTheZeroNetwork) {
  Rng rng(77);
  for (int instance = 0; instance < 40; ++instance) {
    const auto profile = random_profile(rng);
    SearchOptions options = random_options(rng);
    ZeroCommCost zero;
    const SearchResult pruned = search(profile, zero, options);
    options.all_data_parallel_degrees = true;
    const SearchResult all = search(profile, zero, options);
    ASSERT_EQ(pruned.best.has_value(), all.best.has_value());
    if (all.best) {
      EXPECT_EQ(pruned.best->iteration_time, all.best->iteration_time);
    }
  }
}

// On a flat network the per-stage prices are positive, so the min-max over the partition is the
// part the DP solves exactly; the data-parallel sync is added afterwards.
TEST(DynamicProgram, BestPartitionEqualsExhaustiveMinMaxOnAFlatNetwork) {
  Rng rng(4242);
  std::int64_t compared = 0;
  for (int instance = 0; instance < 25; ++instance) {
    SCOPED_TRACE("instance " + std::to_string(instance));
    const auto profile = random_profile(rng);
    const SearchOptions options = random_options(rng);
    FlatCommCost flat(Bandwidth::gigabytes_per_second(25), Time::microseconds(3));
    for (std::size_t vi = 0; vi < profile.variants.size(); ++vi) {
      const auto& v = profile.variants[vi];
      const std::size_t n = v.layers.size();
      for (const Recompute rec : {Recompute::kNone, Recompute::kFull}) {
        if (rec != Recompute::kNone && !profile.recompute_allowed) continue;
        for (int d = 1; d <= std::min<std::int64_t>(v.microbatches, 4); ++d) {
          for (int s = 1; s <= static_cast<int>(n); ++s) {
            if (static_cast<std::int64_t>(s) * v.devices_per_replica * d > options.cost.devices) {
              break;
            }
            const int zero = options.cost.rules == MemoryRules::kNestArtifact ? 0 : 3;
            std::optional<Time> exhaustive;
            for (const auto& b : partitions(n, s)) {
              const PlanChoice c{.variant = vi,
                                 .boundaries = b,
                                 .data_parallel = d,
                                 .zero_stage = zero,
                                 .recompute = rec};
              const Plan plan = evaluate(profile, c, flat, options.cost);
              if (plan.fits() && (!exhaustive || plan.max_stage_time < *exhaustive)) {
                exhaustive = plan.max_stage_time;
              }
            }
            const auto choice =
                best_partition(profile, vi, s, d, zero, rec, PlacementOrder::kTensorPipelineData,
                               flat, options.cost);
            ASSERT_EQ(choice.has_value(), exhaustive.has_value());
            if (!choice) continue;
            ++compared;
            const Plan plan = evaluate(profile, *choice, flat, options.cost);
            EXPECT_TRUE(plan.fits());
            EXPECT_EQ(plan.max_stage_time, *exhaustive);
          }
        }
      }
    }
  }
  EXPECT_GE(compared, 100);
}

TEST(DynamicProgram, SearchOnAFlatNetworkNeverBeatsExhaustiveAndFitsMemory) {
  Rng rng(99);
  for (int instance = 0; instance < 20; ++instance) {
    SCOPED_TRACE("instance " + std::to_string(instance));
    const auto profile = random_profile(rng);
    SearchOptions options = random_options(rng);
    options.all_data_parallel_degrees = true;
    FlatCommCost flat(Bandwidth::gigabytes_per_second(25), Time::microseconds(3));
    const SearchResult dp = search(profile, flat, options);
    const Exhaustive ex = enumerate(profile, flat, options);
    ASSERT_EQ(dp.best.has_value(), ex.best.has_value());
    if (!ex.best) continue;
    EXPECT_GE(dp.best->iteration_time, ex.best->iteration_time);
    EXPECT_TRUE(dp.best->fits());
  }
}

}  // namespace
}  // namespace nest::placer
