#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <tuple>
#include <vector>

#include "nest/placer/baselines.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/search.h"
#include "nest/workload/profile_file.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::MemoryRules;

workload::Layer layer(const std::string& name, double ms) {
  workload::Layer l;
  l.name = name;
  l.forward = Time::milliseconds(ms);
  l.backward = Time::milliseconds(2 * ms);
  l.recompute = Time::milliseconds(ms);
  l.parameter_bytes = Bytes::mebibytes(10);
  l.parameters = 5 << 20;
  l.activation_bytes = Bytes::mebibytes(100);
  l.input_bytes = Bytes::mebibytes(4);
  l.output_bytes = Bytes::mebibytes(4);
  return l;
}

// Embedding, `blocks` identical blocks, head; tensor-parallel variants t = 1 and 2 (times,
// weights and activations divided by t).
workload::LayerProfile model(int blocks, Bytes hbm) {
  workload::LayerProfile p;
  p.hbm = hbm;
  for (const int t : {1, 2}) {
    workload::Variant v;
    v.tensor_parallel = t;
    v.devices_per_replica = t;
    v.microbatches = 16;
    v.layers.push_back(layer("embedding", 0.5 / t));
    for (int i = 0; i < blocks; ++i) v.layers.push_back(layer("block", 1.0 / t));
    v.layers.push_back(layer("head", 0.25 / t));
    for (auto& l : v.layers) {
      l.parameter_bytes = Bytes(l.parameter_bytes.count() / t);
      l.parameters /= t;
      l.activation_bytes = Bytes(l.activation_bytes.count() / t);
    }
    p.variants.push_back(v);
  }
  return p;
}

TEST(EvenPartition, SplitsBlocksAndJoinsEmbeddingAndHeadToTheEnds) {
  const auto p = model(96, Bytes::gibibytes(1));
  // ceil(96/32) = 3 blocks per stage; stage 0 also has the embedding, the last the head.
  const auto b = even_partition(p.variants[0], 32);
  ASSERT_EQ(b.size(), 33u);
  EXPECT_EQ(b[0], 0u);
  EXPECT_EQ(b[1], 4u);
  EXPECT_EQ(b[31], 1u + 31u * 3u);
  EXPECT_EQ(b[32], 98u);
  // 96 blocks in 40 stages: 3 per stage leaves nothing for the last ones.
  EXPECT_TRUE(even_partition(p.variants[0], 40).empty());
  // 10 blocks in 4 stages: 3, 3, 3, 1.
  EXPECT_EQ(even_partition(model(10, Bytes::gibibytes(1)).variants[0], 4),
            (std::vector<std::size_t>{0, 4, 7, 10, 12}));
}

TEST(Manual, TakesTheScaleUpDomainAndTheFewestEvenStagesThatFit) {
  // Artifact rules without recomputation: a stage at position s needs 120·L + (s − 1)·100·L MiB
  // for L layers. With t = 2 every figure halves. 700 MiB, 8 blocks + 2 (embedding, head):
  // S = 1 (10 layers, 600 MiB at t = 2) fits.
  auto p = model(8, Bytes::mebibytes(700));
  p.recompute_allowed = false;
  ZeroCommCost domain_of_two(2);
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  const BaselineResult r = manual_baseline(p, domain_of_two, options);
  ASSERT_TRUE(r.plan.has_value()) << r.note;
  EXPECT_EQ(r.plan->degrees.tensor_parallel, 2);
  EXPECT_EQ(r.plan->choice.stages(), 1);
  EXPECT_EQ(r.plan->choice.data_parallel, 4);
  EXPECT_EQ(r.plan->choice.order, PlacementOrder::kTensorDataPipeline);
  EXPECT_EQ(r.note, "Megatron practice: S 1 d 4 t 2 mb 1 ZeRO-0 recompute none tp-dp-pp");
  // A scale-up domain of one device forces t = 1: 10 layers at 120 MiB do not fit 700 MiB in
  // one stage; two stages (embedding + 4 blocks = 600 MiB at position 2 is 600 + 500 > 700)
  // do not either; at three stages the first holds 4 layers: 480 + 2·400 > 700; ... none fits.
  ZeroCommCost domain_of_one(1);
  const BaselineResult none = manual_baseline(p, domain_of_one, options);
  EXPECT_FALSE(none.plan.has_value());
  EXPECT_EQ(none.note, "no even split of the tensor-parallel-1 variant fits memory on 8 devices");
}

TEST(Anneal, IsDeterministicFitsAndNeverBeatsTheSearch) {
  const auto p = model(12, Bytes::mebibytes(900));
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  const SearchResult best = search(p, zero, options);
  ASSERT_TRUE(best.best.has_value());
  const BaselineResult a = anneal_baseline(p, zero, options, {.seed = 7, .iterations = 500});
  const BaselineResult b = anneal_baseline(p, zero, options, {.seed = 7, .iterations = 500});
  ASSERT_TRUE(a.plan.has_value()) << a.note;
  ASSERT_TRUE(b.plan.has_value());
  EXPECT_EQ(a.plan->choice, b.plan->choice);
  EXPECT_TRUE(a.plan->fits());
  EXPECT_GE(a.plan->iteration_time, best.best->iteration_time);
  // It improves on its starting point, the manual plan.
  const BaselineResult manual = manual_baseline(p, zero, options);
  ASSERT_TRUE(manual.plan.has_value());
  EXPECT_LE(a.plan->iteration_time, manual.plan->iteration_time);
}

// A network whose collectives cost more the further from device 0 their groups start and grow
// with the square of their size: the annealer's approximate network (stage 0's position, sizes
// on a line) misprices it, and the plan it keeps must still carry the exact price.
class FarAndSquareCommCost final : public CommCost {
 public:
  Time collective(workload::CollectiveOp, Bytes size, const GroupLayout& layout) override {
    if (layout.group_size() <= 1) return Time::zero();
    const double mib = size.as_double() / (1 << 20);
    return Time::microseconds(mib * mib * (1 + layout.base));
  }
  Time transfer(Bytes size, const GroupLayout&, const GroupLayout&) override {
    return Time::microseconds(size.as_double() / (1 << 20));
  }
  bool placement_independent() const noexcept override { return false; }
  int scale_up_size() const noexcept override { return 2; }
  std::string describe() const override { return "far and square"; }
};

TEST(Anneal, KeepsItsPlanAtTheExactPrice) {
  auto p = model(12, Bytes::gibibytes(4));
  for (auto& v : p.variants) {
    for (auto& l : v.layers) l.parameter_bytes = Bytes::mebibytes(40);
  }
  FarAndSquareCommCost net;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 8};
  const BaselineResult a = anneal_baseline(p, net, options, {.seed = 3, .iterations = 300});
  ASSERT_TRUE(a.plan.has_value()) << a.note;
  ASSERT_GT(a.plan->choice.data_parallel, 1);
  const Plan exact = evaluate(p, a.plan->choice, net, options.cost);
  EXPECT_EQ(a.plan->iteration_time, exact.iteration_time);
  EXPECT_EQ(a.plan->breakdown.data_parallel_sync, exact.breakdown.data_parallel_sync);
  // Never worse, priced exactly, than the manual plan it starts from.
  const BaselineResult manual = manual_baseline(p, net, options);
  ASSERT_TRUE(manual.plan.has_value()) << manual.note;
  EXPECT_LE(a.plan->iteration_time, manual.plan->iteration_time);
}

// 1,000 "simulated" events for every collective (operation, size, layout) not priced before, as
// the oracle's memo would spend them.
class EventTally {
 public:
  void charge(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
    const auto key = std::make_tuple(static_cast<int>(op), size.count(), layout.hash());
    if (std::find(seen_.begin(), seen_.end(), key) == seen_.end()) {
      seen_.push_back(key);
      events_ += 1000;
    }
  }
  [[nodiscard]] std::uint64_t events() const noexcept { return events_; }

 private:
  std::vector<std::tuple<int, std::int64_t, std::uint64_t>> seen_;
  std::uint64_t events_ = 0;
};

// A network that "simulates" 1,000 events for every collective layout it has not priced
// before (as the oracle's memo would), the rest as FarAndSquareCommCost; its event-free bounds
// cost nothing and are counted, with the layouts they were asked for.
class CountingCommCost final : public CommCost {
 public:
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    if (layout.group_size() <= 1) return Time::zero();
    tally_.charge(op, size, layout);
    return price(size, layout);
  }
  Time collective_pass_bound(workload::CollectiveOp, Bytes size,
                             const GroupLayout& layout) override {
    ++bounds_;
    if (layout.base != 0 || layout.group_count() != 1) ++bounds_elsewhere_;
    return layout.group_size() <= 1 ? Time::zero() : price(size, layout);
  }
  Time transfer(Bytes size, const GroupLayout&, const GroupLayout&) override {
    return Time::microseconds(size.as_double() / (1 << 20));
  }
  bool placement_independent() const noexcept override { return false; }
  int scale_up_size() const noexcept override { return 2; }
  std::string describe() const override { return "counting"; }
  std::uint64_t simulated_events() const noexcept override { return tally_.events(); }
  [[nodiscard]] int bounds() const noexcept { return bounds_; }
  [[nodiscard]] int bounds_elsewhere() const noexcept { return bounds_elsewhere_; }

 private:
  static Time price(Bytes size, const GroupLayout& layout) {
    const double mib = size.as_double() / (1 << 20);
    return Time::microseconds(mib * (1 + layout.base % 3));
  }

  EventTally tally_;
  int bounds_ = 0;
  int bounds_elsewhere_ = 0;
};

// The walk prices on event-free bounds, one group of each layout where stage 0's sits: it
// simulates nothing, so its steps are its whole budget (all 300 taken), and the only events
// spent are the manual plan's and the kept plan's exact prices, as each costs alone.
TEST(Anneal, WalksOnEventFreeBoundsAndSimulatesOnlyTheManualAndKeptPlans) {
  auto p = model(12, Bytes::gibibytes(4));
  for (auto& v : p.variants) {
    for (auto& l : v.layers) l.parameter_bytes = Bytes::mebibytes(40);
  }
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 8};
  CountingCommCost net;
  const BaselineResult a = anneal_baseline(p, net, options, {.seed = 3, .iterations = 300});
  ASSERT_TRUE(a.plan.has_value()) << a.note;
  EXPECT_EQ(a.note.rfind("300 steps from the manual plan (seed 3): ", 0), 0U) << a.note;
  EXPECT_GT(net.bounds(), 0);
  EXPECT_EQ(net.bounds_elsewhere(), 0);
  CountingCommCost alone;
  const BaselineResult manual = manual_baseline(p, alone, options);
  ASSERT_TRUE(manual.plan.has_value()) << manual.note;
  const Plan kept = evaluate(p, a.plan->choice, alone, options.cost);
  EXPECT_EQ(alone.bounds(), 0);
  EXPECT_GT(alone.simulated_events(), 0U);
  EXPECT_EQ(net.simulated_events(), alone.simulated_events());
  EXPECT_EQ(a.plan->iteration_time, kept.iteration_time);
  // Deterministic: the same walk again.
  CountingCommCost again;
  const BaselineResult b = anneal_baseline(p, again, options, {.seed = 3, .iterations = 300});
  ASSERT_TRUE(b.plan.has_value());
  EXPECT_EQ(b.note, a.note);
  EXPECT_EQ(b.plan->choice, a.plan->choice);
  EXPECT_EQ(again.bounds(), net.bounds());
}

// A network where a layout starting at device 0 costs 50 times less than one starting elsewhere,
// its event-free bounds exact (a plan's bound is its price without the joint syncs): the walk,
// which prices one group moved to device 0, is misled into a deeper pipeline that the manual plan
// beats once priced where its stages sit.
class MisleadingCommCost final : public CommCost {
 public:
  // `loose`: event-free bounds at device 0's price wherever the group sits (still bounds), so
  // they cannot tell the walk's best from the manual plan.
  explicit MisleadingCommCost(bool loose = false) : loose_(loose) {}
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    if (layout.group_size() <= 1) return Time::zero();
    tally_.charge(op, size, layout);
    return price(size, layout);
  }
  Time collective_pass_bound(workload::CollectiveOp, Bytes size,
                             const GroupLayout& layout) override {
    if (layout.group_size() <= 1) return Time::zero();
    if (!loose_) return price(size, layout);
    GroupLayout at_zero = layout;
    at_zero.base = 0;
    return price(size, at_zero);
  }
  Time transfer(Bytes size, const GroupLayout&, const GroupLayout&) override {
    return Time::microseconds(size.as_double() / (1 << 20));
  }
  bool placement_independent() const noexcept override { return false; }
  int scale_up_size() const noexcept override { return 2; }
  std::string describe() const override { return "misleading"; }
  std::uint64_t simulated_events() const noexcept override { return tally_.events(); }

 private:
  static Time price(Bytes size, const GroupLayout& layout) {
    const double mib = size.as_double() / (1 << 20);
    return Time::microseconds(mib * (layout.base == 0 ? 60 : 3000));
  }

  bool loose_ = false;
  EventTally tally_;
};

// The anneal of a 12-layer model on 16 devices of a MisleadingCommCost (seed 2, 300 steps), with
// the manual plan and then the walk's best (S 2 d 4) priced on a fresh network beside it: the
// events each spent.
struct MisleadingWalk {
  BaselineResult anneal;
  BaselineResult manual;
  Plan walks_best;
  std::uint64_t anneal_events = 0;
  std::uint64_t manual_events = 0;
  std::uint64_t both_events = 0;
};

MisleadingWalk misleading_walk(bool loose, bool joint_syncs, bool pass_bounds = true) {
  auto p = model(12, Bytes::gibibytes(4));
  for (auto& v : p.variants) {
    for (auto& l : v.layers) l.parameter_bytes = Bytes::mebibytes(40);
  }
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 16};
  options.cost.joint_data_parallel_sync = joint_syncs;
  options.pass_bounds = pass_bounds;
  MisleadingWalk w;
  MisleadingCommCost net(loose);
  w.anneal = anneal_baseline(p, net, options, {.seed = 2, .iterations = 300});
  w.anneal_events = net.simulated_events();
  MisleadingCommCost alone(loose);
  w.manual = manual_baseline(p, alone, options);
  w.manual_events = alone.simulated_events();
  if (!w.manual.plan) return w;
  PlanChoice walks_best = w.manual.plan->choice;
  walks_best.boundaries = even_partition(p.variants[walks_best.variant], 2);
  walks_best.data_parallel = 4;
  w.walks_best = evaluate(p, walks_best, alone, options.cost);
  w.both_events = alone.simulated_events();
  return w;
}

// The anneal kept the manual plan, its note naming the walk's best.
void expect_manual_kept(const MisleadingWalk& w) {
  ASSERT_TRUE(w.anneal.plan.has_value()) << w.anneal.note;
  ASSERT_TRUE(w.manual.plan.has_value()) << w.manual.note;
  EXPECT_EQ(w.anneal.plan->choice, w.manual.plan->choice);
  EXPECT_EQ(w.anneal.plan->iteration_time, w.manual.plan->iteration_time);
  EXPECT_EQ(w.anneal.note,
            "300 steps from the manual plan (seed 2): S 1 d 8 t 2 mb 1 ZeRO-1 recompute none "
            "tp-dp-pp (the walk's best is slower: S 2 d 4 t 2 mb 1 ZeRO-1 recompute none "
            "tp-dp-pp)");
  ASSERT_TRUE(w.walks_best.fits());
  EXPECT_GT(w.both_events, w.manual_events);
  EXPECT_GT(w.walks_best.iteration_time, w.manual.plan->iteration_time);
}

// The walk's best plan, slower than the manual plan on its bounds already, is ruled out without
// being priced: the only events spent are the manual plan's (priced in full, it would have cost
// events of its own, and it is slower).
TEST(Anneal, RulesOutAWalksBestThatCannotBeatTheManualPlanWithoutPricingIt) {
  const MisleadingWalk w = misleading_walk(false, true);
  expect_manual_kept(w);
  EXPECT_EQ(w.anneal_events, w.manual_events);
}

// When the bounds cannot tell (bounds at device 0's price everywhere, syncs not priced jointly),
// the walk's best is priced in full, found slower, and the manual plan is kept all the same.
TEST(Anneal, KeepsTheManualPlanWhenTheWalksBestPricedInFullIsSlower) {
  const MisleadingWalk w = misleading_walk(true, false);
  expect_manual_kept(w);
  // The walk's best was priced in full: its collectives' events on top of the manual plan's.
  EXPECT_EQ(w.anneal_events, w.both_events);
}

// Without `SearchOptions::pass_bounds` the search rules nothing out before pricing it in full,
// and neither does the anneal: the walk's best of the first case above is priced in full.
TEST(Anneal, RulesNothingOutWithoutPassBounds) {
  const MisleadingWalk w = misleading_walk(false, true, false);
  expect_manual_kept(w);
  EXPECT_EQ(w.anneal_events, w.both_events);
}

// Without a manual plan (no variant within a scale-up domain of one device) the walk starts from
// the smallest replica's deepest pipeline, and its note says so.
TEST(Anneal, StartsFromTheDeepestPipelineWithoutAManualPlan) {
  auto p = model(8, Bytes::mebibytes(700));
  p.variants.erase(p.variants.begin());  // t = 2 only
  ZeroCommCost net(1);
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  const BaselineResult manual = manual_baseline(p, net, options);
  EXPECT_FALSE(manual.plan.has_value());
  EXPECT_EQ(manual.note, "no variant has tensor parallel <= the scale-up domain (1)");
  const BaselineResult a = anneal_baseline(p, net, options, {.seed = 1, .iterations = 200});
  ASSERT_TRUE(a.plan.has_value()) << a.note;
  EXPECT_TRUE(a.plan->fits());
  EXPECT_EQ(a.note.rfind("200 steps from the smallest replica's deepest pipeline (seed 1): ", 0),
            0U)
      << a.note;
}

// The fit is checked without the network (memory does not depend on it): only the plan that
// fits is priced. 8 blocks at t = 2 under the artifact rules (60 MiB per layer, 50 MiB more per
// layer and pipeline position): S = 1 needs 600 MiB, over 560; S = 2 needs 550 at position 2.
TEST(Manual, PricesOnlyThePlanThatFits) {
  auto p = model(8, Bytes::mebibytes(560));
  p.recompute_allowed = false;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  CountingCommCost net;
  const BaselineResult r = manual_baseline(p, net, options);
  ASSERT_TRUE(r.plan.has_value()) << r.note;
  EXPECT_EQ(r.plan->choice.stages(), 2);
  EXPECT_EQ(r.plan->choice.data_parallel, 2);
  CountingCommCost alone;
  const Plan priced = evaluate(p, r.plan->choice, alone, options.cost);
  EXPECT_GT(alone.simulated_events(), 0U);
  EXPECT_EQ(net.simulated_events(), alone.simulated_events());
  EXPECT_EQ(r.plan->iteration_time, priced.iteration_time);
}

TEST(TopologyAgnostic, IsPricedOnTheRealNetworkAndNeverBeatsTheSearchThere) {
  auto p = model(12, Bytes::gibibytes(2));
  for (auto& v : p.variants) {
    for (auto& l : v.layers) {
      l.collectives.push_back(
          {.op = workload::CollectiveOp::kAllReduce, .size = Bytes::mebibytes(8), .count = 2});
    }
  }
  // The "real" network is slow, the flat one believes in a fast one.
  FlatCommCost real(Bandwidth::gigabytes_per_second(1), Time::microseconds(10));
  FlatCommCost believed(Bandwidth::gigabytes_per_second(1000), Time::microseconds(1));
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 8};
  const BaselineResult agnostic = topology_agnostic_baseline(p, real, believed, options);
  const SearchResult aware = search(p, real, options);
  ASSERT_TRUE(agnostic.plan.has_value()) << agnostic.note;
  ASSERT_TRUE(aware.best.has_value());
  const Plan priced = evaluate(p, agnostic.plan->choice, real, options.cost);
  EXPECT_EQ(agnostic.plan->iteration_time, priced.iteration_time);
  EXPECT_GT(agnostic.plan->iteration_time, aware.best->iteration_time);
}

TEST(Fixed, ReportsAPlanThatDoesNotFit) {
  const auto p = model(8, Bytes::mebibytes(700));
  ZeroCommCost zero;
  const CostOptions options{.rules = MemoryRules::kNestArtifact, .devices = 8};
  const BaselineResult r = fixed_baseline(p, {.variant = 0, .boundaries = {0, 10}}, zero, options);
  EXPECT_FALSE(r.plan.has_value());
  EXPECT_EQ(r.note,
            "does not fit: stage 0 needs 1.172 GiB per device against a capacity of 700 MiB");
  const BaselineResult ok =
      fixed_baseline(p, {.variant = 1, .boundaries = {0, 10}, .data_parallel = 4}, zero, options);
  ASSERT_TRUE(ok.plan.has_value());
  EXPECT_EQ(ok.note, "given: S 1 d 4 t 2 mb 1 ZeRO-0 recompute none tp-pp-dp");
}

}  // namespace
}  // namespace nest::placer
