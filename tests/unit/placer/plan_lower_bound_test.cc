// `plan_lower_bound`, the search's bound of a plan from lower bounds of the network's prices
// (issue 18): by hand where the gradient sync dominates, and never above the plan's price on
// random chains over a thin rail cluster, on the layout bounds and on the sharper event-free
// bounds, which are never below them.

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "nest/core/rng.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/topo/loader.h"
#include "nest/workload/layer_profile.h"
#include "unit/placer/fixtures.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::MemoryRules;
using workload::Recompute;

// Four identical layers: forward 1 ms, backward 2 ms, 10 GiB of gradients each, so that each
// bucket's reduction takes longer than the backward that produces the buckets.
workload::LayerProfile heavy_layers() {
  return testing::toy_blocks({.parameter_bytes = Bytes::gibibytes(10),
                              .parameters = std::int64_t{5} << 30,
                              .activation_bytes = Bytes::mebibytes(1)});
}

// Two stages of two layers, d = 2, K = 4 microbatches per replica, on a flat 100 GB/s network
// (its own lower bound). Stage 0's 20 GiB go in B = 4 buckets of 5 GiB, each an allreduce over 2
// of R = 2 us + 5 GiB / 100 GB/s = 53.69 ms; its last backward L = 4 ms, its work per
// microbatch W = 6 ms, the bubble's chunk C = 6 ms. The buckets queue: the first is ready at
// P − L + L/4 = P − 3 ms and the last is reduced at P − 3 ms + 4R. The bound: the last bucket
// alone gives K·W + C + R = 30 ms + R; all four (K − 1)·W + C + 4R = 24 ms + 4R, the larger.
TEST(PlanLowerBound, CountsEveryBucketWhenTheReductionsQueue) {
  const auto profile = heavy_layers();
  FlatCommCost flat(Bandwidth::gigabytes_per_second(100), Time::microseconds(1));
  const PlanChoice choice{.boundaries = {0, 2, 4}, .data_parallel = 2};
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 4};
  const Plan plan = evaluate(profile, choice, flat, options);
  const Time bucket =
      Time::microseconds(2) + serialization_time(Bytes::gibibytes(5), flat.bandwidth());
  ASSERT_EQ(plan.stages[0].data_parallel_sync, bucket * 4);
  const Time pipeline = plan.breakdown.compute + plan.breakdown.bubble +
                        plan.breakdown.collectives + plan.breakdown.transfers;
  EXPECT_EQ(plan.breakdown.compute, Time::milliseconds(24));
  EXPECT_EQ(plan.iteration_time, pipeline - Time::milliseconds(3) + bucket * 4);
  const PlanBound lb = plan_lower_bound(profile, choice, flat, options);
  ASSERT_TRUE(lb.before_buckets.has_value());
  EXPECT_EQ(*lb.before_buckets, Time::milliseconds(24));  // (K − 1)·W + C
  const Time bound = lb.bound;
  EXPECT_EQ(bound, Time::milliseconds(24) + Time::picoseconds(static_cast<std::int64_t>(
                                                0.999 * static_cast<double>((bucket * 4).ps()))));
  EXPECT_LE(bound, plan.iteration_time);
  // Without overlapping the sync every bucket follows the pipeline: P + 4R, bounded by
  // K·W + C + 4R.
  CostOptions after = options;
  after.overlap_gradient_sync = false;
  EXPECT_EQ(evaluate(profile, choice, flat, after).iteration_time, pipeline + bucket * 4);
  EXPECT_FALSE(plan_lower_bound(profile, choice, flat, after).before_buckets.has_value());
  EXPECT_EQ(plan_lower_bound(profile, choice, flat, after).bound,
            Time::milliseconds(30) + Time::picoseconds(static_cast<std::int64_t>(
                                         0.999 * static_cast<double>((bucket * 4).ps()))));
}

// A random chain of 2-12 layers with up to 1.5 GiB of gradients each and tensor-parallel
// all-reduces, for t = 1 and t = 2.
workload::LayerProfile random_heavy_chain(Rng& rng) {
  return testing::random_chain(rng, {.hbm = Bytes::gibibytes(80),
                                     .layers_low = 2,
                                     .layers_spread = 11,
                                     .forward_us_spread = 4000,
                                     .backward_us_spread = 8000,
                                     .parameters_mi_spread = 768,
                                     .activation_mib_low = 16,
                                     .activation_mib_spread = 0,
                                     .input_mib_spread = 64,
                                     .output_mib_spread = 64,
                                     .allreduce_mib_spread = 32});
}

// Every plan of 1 to 4 stages (equal layer counts), 1 to 8 replicas of t = 2 (ZeRO-1 and ZeRO-3
// with replicas: the gathers' line, priced on bounds, must not lift the bound), both orders and
// blocking or overlapped boundary transfers, on random heavy chains over 16 thin-rail nodes.
TEST(PlanLowerBound, NeverExceedsThePlanOnTheLayoutOrTheEventFreeBounds) {
  const topo::Topology rail = testing::thin_rail(16);
  OracleCommCost exact(rail);
  BoundNetwork layout(exact, false);
  BoundNetwork sharp(exact, true);
  Rng rng(18);
  int plans = 0;
  int sharper = 0;
  int queued = 0;
  for (int instance = 0; instance < 6; ++instance) {
    const workload::LayerProfile profile = random_heavy_chain(rng);
    const auto n = static_cast<int>(profile.variants[1].layers.size());
    for (int s = 1; s <= std::min(4, n); ++s) {
      for (const int d : {1, 2, 4, 8}) {
        if (s * 2 * d > 32) continue;
        for (const PlacementOrder order :
             {PlacementOrder::kTensorPipelineData, PlacementOrder::kTensorDataPipeline}) {
          for (const int zero : {0, 1, 3}) {
            for (const bool blocking : {false, true}) {
              if ((zero > 0) != (d > 1)) continue;
              PlanChoice choice{
                  .variant = 1, .data_parallel = d, .zero_stage = zero, .order = order};
              for (int b = 0; b <= s; ++b) {
                choice.boundaries.push_back(static_cast<std::size_t>(b * n / s));
              }
              const CostOptions options{.rules = MemoryRules::kMegatron,
                                        .devices = 32,
                                        .overlap_boundary_transfers = !blocking};
              SCOPED_TRACE("instance " + std::to_string(instance) + " S " + std::to_string(s) +
                           " d " + std::to_string(d));
              const Plan plan = evaluate(profile, choice, exact, options);
              const Time low = plan_lower_bound(profile, choice, layout, options).bound;
              const Time high = plan_lower_bound(profile, choice, sharp, options).bound;
              EXPECT_LE(low, high);
              EXPECT_LE(high, plan.iteration_time);
              ++plans;
              if (high > low) ++sharper;
              const Time bucket = Time::picoseconds(plan.stages.front().data_parallel_sync.ps() /
                                                    options.gradient_buckets);
              if (plan.breakdown.data_parallel_sync > bucket) ++queued;
            }
          }
        }
      }
    }
  }
  // The cases bite: the event-free bounds are sharper for most plans, and many plans queue their
  // buckets (the bound's second form).
  EXPECT_EQ(plans, 576);
  EXPECT_GE(sharper, 500);  // 576
  EXPECT_GE(queued, 250);   // 282
}

// The searches of the tests below: a random chain on 32 devices, ZeRO 0 or 1, plain or
// interleaved pipelines; mode 1 keeps candidates for --verify 4, mode 2 three per order.
SearchOptions chain_search(int mode) {
  SearchOptions o;
  o.cost = {.rules = MemoryRules::kMegatron, .devices = 32};
  o.zero_stages = {0, 1};
  o.recompute_modes = {Recompute::kNone};
  o.virtual_stages = {1, 2};
  o.replay_candidates = mode == 1 ? 4 : 0;
  o.keep_per_order = mode == 2 ? 3 : 0;
  return o;
}

// The same best plan and price, and the same kept candidates in the same order.
void expect_same_result(const SearchResult& a, const SearchResult& b) {
  ASSERT_TRUE(a.best && b.best);
  EXPECT_EQ(a.best->choice, b.best->choice);
  EXPECT_EQ(a.best->iteration_time, b.best->iteration_time);
  ASSERT_EQ(a.candidates.size(), b.candidates.size());
  for (std::size_t i = 0; i < a.candidates.size(); ++i) {
    EXPECT_EQ(a.candidates[i].choice, b.candidates[i].choice);
    EXPECT_EQ(a.candidates[i].iteration_time, b.candidates[i].iteration_time);
  }
}

// Two searches of `profile`, each on its own oracle over `topology`, that must give the same
// result, and the events each simulated.
struct SearchPair {
  SearchResult with;
  SearchResult without;
  std::uint64_t events_with = 0;
  std::uint64_t events_without = 0;
  std::vector<PassReport> passes_with;  // as `SearchHooks::pass` told them
  std::vector<PassReport> passes_without;
};

SearchPair same_searches(const workload::LayerProfile& profile, const topo::Topology& topology,
                         const SearchOptions& with, const SearchOptions& without) {
  OracleCommCost a(topology);
  OracleCommCost b(topology);
  SearchPair p;
  p.with =
      search(profile, a, with, {.pass = [&](const PassReport& r) { p.passes_with.push_back(r); }});
  p.without = search(profile, b, without,
                     {.pass = [&](const PassReport& r) { p.passes_without.push_back(r); }});
  p.events_with = a.stats().events;
  p.events_without = b.stats().events;
  expect_same_result(p.with, p.without);
  return p;
}

// The sharper checks (`SearchOptions::pass_bounds`: the event-free bounds, the first bucket
// within the room they leave, the price with each stage's sync alone, the joint syncs at their
// event-free bounds) rule plans out without changing what the search finds: the same best
// plan and price, and, keeping candidates for verification or per order, the same candidates in
// the same order, with fewer simulated events.
TEST(Search, PassBoundsSpareSimulationsAndChangeNothing) {
  const topo::Topology rail = testing::thin_rail(16);
  Rng rng(19);
  std::int64_t pass_bounded = 0;
  std::int64_t sync_bounded = 0;
  std::uint64_t events_with = 0;
  std::uint64_t events_without = 0;
  for (int instance = 0; instance < 4; ++instance) {
    const workload::LayerProfile profile = random_heavy_chain(rng);
    for (const int mode : {0, 1, 2}) {
      SCOPED_TRACE("instance " + std::to_string(instance) + " mode " + std::to_string(mode));
      const SearchOptions sharp = chain_search(mode);
      SearchOptions plain = sharp;
      plain.pass_bounds = false;
      const SearchPair p = same_searches(profile, rail, sharp, plain);
      EXPECT_EQ(p.without.stats.pass_bounded + p.without.stats.sync_bounded, 0);
      EXPECT_LE(p.events_with, p.events_without);
      pass_bounded += p.with.stats.pass_bounded;
      sync_bounded += p.with.stats.sync_bounded;
      events_with += p.events_with;
      events_without += p.events_without;
    }
  }
  EXPECT_GE(pass_bounded, 10);                     // 18
  EXPECT_GE(sync_bounded, 100);                    // 200
  EXPECT_LT(events_with * 4, events_without * 3);  // 37,036 against 50,428
}

// Asks `inner` everything, the search's sharper questions too, and lists the joint syncs it
// priced exactly (distinct `collective_like` queries).
class JointSyncCounter final : public ForwardingCommCost {
 public:
  using ForwardingCommCost::ForwardingCommCost;
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like) override {
    const auto key = std::tuple(op, size, layout, like);
    if (std::find(priced.begin(), priced.end(), key) == priced.end()) priced.push_back(key);
    return inner().collective_like(op, size, layout, like);
  }
  Time collective_like_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                             const GroupLayout& like) override {
    return inner().collective_like_bound(op, size, layout, like);
  }
  std::optional<Time> collective_within(workload::CollectiveOp op, Bytes size,
                                        const GroupLayout& layout, Time within) override {
    return inner().collective_within(op, size, layout, within);
  }
  Time collective_pass_bound(workload::CollectiveOp op, Bytes size,
                             const GroupLayout& layout) override {
    return inner().collective_pass_bound(op, size, layout);
  }
  Time gather_point(Bytes size, const GroupLayout& layout) override {
    return inner().gather_point(size, layout);
  }

  std::vector<std::tuple<workload::CollectiveOp, Bytes, GroupLayout, GroupLayout>> priced;
};

// Answers each joint sync with its event-free bound, everything else exactly.
class JointSyncBounds final : public ForwardingCommCost {
 public:
  using ForwardingCommCost::ForwardingCommCost;
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like) override {
    return inner().collective_like_bound(op, size, layout, like);
  }
};

// Eight stages of two blocks, four replicas of one GPU, on 16 thin-rail nodes (2 GPUs each).
struct DeepPipeline {
  workload::LayerProfile profile;
  PlanChoice choice;
};
DeepPipeline deep_pipeline(int mib, PlacementOrder order) {
  DeepPipeline out{.profile = testing::toy_blocks({.count = 16,
                                                   .microbatches = 8,
                                                   .parameter_bytes = Bytes::mebibytes(mib),
                                                   .hbm = Bytes::gibibytes(80)}),
                   .choice = {.data_parallel = 4, .order = order}};
  for (int b = 0; b <= 8; ++b) out.choice.boundaries.push_back(static_cast<std::size_t>(b * 2));
  return out;
}

// `syncs_rule_out(at)` on a fresh oracle: whether it rules the plan out, after pricing some of
// its syncs but not all, and how many it priced (stage syncs and joint syncs; the counter sees
// only the joint ones).
void expect_check(const topo::Topology& rail, const DeepPipeline& plan, Time at, bool ruled_out,
                  bool spared, int priced, std::size_t joint) {
  SCOPED_TRACE("at " + std::to_string(at.ps()));
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 32};
  OracleCommCost fresh(rail);
  JointSyncCounter counted(fresh);
  const SyncCheck c = syncs_rule_out(plan.profile, plan.choice, counted, options, at);
  EXPECT_EQ(c.ruled_out, ruled_out);
  EXPECT_EQ(c.spared, spared);
  EXPECT_EQ(c.priced, priced);
  EXPECT_EQ(counted.priced.size(), joint);
}

// 40 MiB of gradients per block, stages side by side (tp-pp-dp): each stage's sync overlaps its
// neighbours' but not every stage's, so the cost model asks for 8 distinct joint syncs (runs of
// stages); they cost 75.24 ms against 63.28 ms with each stage's sync alone (A), whose
// event-free bounds here are exact. Against the exact price T (from `evaluate`,
// 75,241,823,356 ps) and the price B with every joint sync on its bound (75,235,487,952 ps): at
// A or below no sync is simulated; one picosecond above A and at B the 8 stage syncs are
// priced and the joint syncs' bounds rule it out, no joint sync simulated; the first two joint
// syncs priced leave the price at B and the third lifts it to T (so one picosecond above B and
// at T both stop there, the other five never simulated); at T + 1 ps every sync is priced and
// the plan stands.
TEST(SyncSteps, JointSyncsPricedOneAtATimeUntilThePlanCannotWin) {
  const topo::Topology rail = testing::thin_rail(16);
  const DeepPipeline plan = deep_pipeline(40, PlacementOrder::kTensorPipelineData);
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 32};
  OracleCommCost oracle(rail);
  JointSyncCounter full(oracle);
  const Time exact = evaluate(plan.profile, plan.choice, full, options).iteration_time;
  ASSERT_EQ(full.priced.size(), 8U);
  CostOptions alone = options;
  alone.joint_data_parallel_sync = false;
  const Time syncs_alone = evaluate(plan.profile, plan.choice, oracle, alone).iteration_time;
  ASSERT_LT(syncs_alone, exact);
  OracleCommCost unpriced(rail);  // the bounds of joint syncs not priced yet
  JointSyncBounds bounds(unpriced);
  const Time bound = evaluate(plan.profile, plan.choice, bounds, options).iteration_time;
  ASSERT_LT(bound, exact);
  const Time ps = Time::picoseconds(1);
  expect_check(rail, plan, syncs_alone, true, false, 0, 0);
  expect_check(rail, plan, syncs_alone + ps, true, true, 8, 0);
  expect_check(rail, plan, bound, true, true, 8, 0);
  expect_check(rail, plan, bound + ps, true, true, 11, 3);
  expect_check(rail, plan, exact, true, true, 11, 3);
  expect_check(rail, plan, exact + ps, false, false, 16, 8);
}

// `syncs_rule_out(..., stop_before_joint)` on the plan above: one picosecond above B it stops
// where the joint syncs would be priced (`joint_pending`, not ruled out), its price B, the 8
// stage syncs priced and no joint sync simulated; at B the joint syncs' bounds rule it out as
// before; with the joint syncs off there is nothing to stop for: one picosecond above the price
// with each stage's sync alone (A) the plan stands at A, nothing pending.
TEST(SyncSteps, StopsWhereTheJointSyncsWouldBePriced) {
  const topo::Topology rail = testing::thin_rail(16);
  const DeepPipeline plan = deep_pipeline(40, PlacementOrder::kTensorPipelineData);
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 32};
  OracleCommCost unpriced(rail);
  JointSyncBounds bounds(unpriced);
  const Time bound = evaluate(plan.profile, plan.choice, bounds, options).iteration_time;
  ASSERT_EQ(bound.ps(), 75'235'487'952);
  const Time ps = Time::picoseconds(1);
  {
    OracleCommCost fresh(rail);
    JointSyncCounter counted(fresh);
    const SyncCheck c =
        syncs_rule_out(plan.profile, plan.choice, counted, options, bound + ps, true);
    EXPECT_TRUE(c.joint_pending);
    EXPECT_FALSE(c.ruled_out);
    EXPECT_EQ(c.price, bound);
    EXPECT_EQ(c.priced, 8);
    EXPECT_TRUE(counted.priced.empty());
  }
  {
    OracleCommCost fresh(rail);
    const SyncCheck c = syncs_rule_out(plan.profile, plan.choice, fresh, options, bound, true);
    EXPECT_FALSE(c.joint_pending);
    EXPECT_TRUE(c.ruled_out);
    EXPECT_EQ(c.priced, 8);
  }
  CostOptions alone = options;
  alone.joint_data_parallel_sync = false;
  OracleCommCost fresh(rail);
  const Time syncs_alone = evaluate(plan.profile, plan.choice, fresh, alone).iteration_time;
  const SyncCheck c =
      syncs_rule_out(plan.profile, plan.choice, fresh, alone, syncs_alone + ps, true);
  EXPECT_FALSE(c.joint_pending);
  EXPECT_FALSE(c.ruled_out);
  EXPECT_EQ(c.price, syncs_alone);
  EXPECT_EQ(c.priced, 8);
}

// 80 MiB per block, replicas side by side (tp-dp-pp): the event-free bounds of the stage syncs
// alone are their prices but for stage 3's, whose ring (devices 16-19) the bound puts 0.2%
// low. So at the plan's price with each stage's sync alone, the price reaches it once stage
// 3's sync is priced, the fourth asked for (stages 0, 1, 2, 3): the other four are never
// simulated.
TEST(SyncSteps, StageSyncsPricedOneAtATimeUntilThePlanCannotWin) {
  const topo::Topology rail = testing::thin_rail(16);
  const DeepPipeline plan = deep_pipeline(80, PlacementOrder::kTensorDataPipeline);
  CostOptions alone{.rules = MemoryRules::kMegatron, .devices = 32};
  alone.joint_data_parallel_sync = false;
  OracleCommCost oracle(rail);
  const Time syncs_alone = evaluate(plan.profile, plan.choice, oracle, alone).iteration_time;
  expect_check(rail, plan, syncs_alone, true, true, 4, 0);
}

// Sixteen identical blocks of `mib` MiB of gradients each, 8 microbatches (the deep pipelines
// below), and `chain_search(mode)` over 4, 8 or 16 stages of 1F1B.
workload::LayerProfile sixteen_blocks(int mib) {
  return testing::toy_blocks({.count = 16,
                              .microbatches = 8,
                              .parameter_bytes = Bytes::mebibytes(mib),
                              .hbm = Bytes::gibibytes(80)});
}
SearchOptions deep_search(int mode) {
  SearchOptions o = chain_search(mode);
  o.stages = {4, 8, 16};
  o.virtual_stages = {1};
  return o;
}

// In the search: deep pipelines of the blocks above (4, 8 or 16 stages, both orders,
// gradients of 10 to 80 MiB per block), whose plans ask for several joint syncs each, searched
// with the sharper checks (syncs priced a step at a time) and without (every plan that comes up
// priced in full): the same results, with fewer joint syncs simulated (282 against 471), and
// plans ruled out before every sync was priced (44; the step `SyncSteps` above shows by hand).
TEST(Search, PricesJointSyncsOneAtATime) {
  const topo::Topology rail = testing::thin_rail(16);
  std::size_t joint_sharp = 0;
  std::size_t joint_plain = 0;
  std::int64_t spared = 0;
  for (const int mib : {10, 20, 40, 80}) {
    for (const int mode : {0, 1, 2}) {
      SCOPED_TRACE("MiB " + std::to_string(mib) + " mode " + std::to_string(mode));
      const auto profile = sixteen_blocks(mib);
      const SearchOptions sharp = deep_search(mode);
      SearchOptions plain = sharp;
      plain.pass_bounds = false;
      OracleCommCost a(rail);
      OracleCommCost b(rail);
      JointSyncCounter counted_a(a);
      JointSyncCounter counted_b(b);
      const SearchResult with = search(profile, counted_a, sharp);
      expect_same_result(with, search(profile, counted_b, plain));
      EXPECT_LE(counted_a.priced.size(), counted_b.priced.size());
      spared += with.stats.syncs_spared;
      joint_sharp += counted_a.priced.size();
      joint_plain += counted_b.priced.size();
    }
  }
  EXPECT_LT(joint_sharp * 3, joint_plain * 2);  // 282 against 471
  EXPECT_GE(spared, 20);                        // 44
}

// Capped passes (`SearchOptions::capped_passes`) find what one uncapped pass finds: the same
// best plan and price on random chains, whatever pass found it, and for --verify 4 the same
// candidates in the same order; searches that keep candidates per order run one pass. On this
// thin rail the caps are tried in turn: the best plans cost 3-6 times the least entry bound,
// so most searches run the first caps without finding a plan (which must change nothing
// either), and together they simulate no more events than the uncapped searches.
TEST(Search, CappedPassesFindWhatOneUncappedPassFinds) {
  const topo::Topology rail = testing::thin_rail(16);
  Rng rng(23);
  std::int64_t passes[2] = {0, 0};        // estimate-only, --verify 4
  std::int64_t ended_capped[2] = {0, 0};  // searches that ended before the uncapped pass
  std::uint64_t events_capped[2] = {0, 0};
  std::uint64_t events_uncapped[2] = {0, 0};
  std::int64_t flat_passes = 0;
  for (int instance = 0; instance < 8; ++instance) {
    const workload::LayerProfile profile = random_heavy_chain(rng);
    for (const int mode : {0, 1, 2, 3}) {
      SCOPED_TRACE("instance " + std::to_string(instance) + " mode " + std::to_string(mode));
      const SearchOptions capped = chain_search(mode == 3 ? 0 : mode);
      SearchOptions uncapped = capped;
      uncapped.capped_passes = false;
      if (mode == 3) {  // a flat network (the topology-agnostic baseline's)
        FlatCommCost a(Bandwidth::gigabytes_per_second(5), Time::microseconds(5));
        FlatCommCost b(Bandwidth::gigabytes_per_second(5), Time::microseconds(5));
        const SearchResult with = search(profile, a, capped);
        expect_same_result(with, search(profile, b, uncapped));
        flat_passes += with.stats.passes;
        continue;
      }
      const SearchPair p = same_searches(profile, rail, capped, uncapped);
      EXPECT_EQ(p.without.stats.passes, 1);
      if (mode == 2) {
        EXPECT_EQ(p.with.stats.passes, 1);
        continue;
      }
      passes[mode] += p.with.stats.passes;
      ended_capped[mode] += p.with.stats.last_cap != 0 ? 1 : 0;
      events_capped[mode] += p.events_with;
      events_uncapped[mode] += p.events_without;
    }
  }
  // The thin rail's plans cost 3-6x their least bound: the first caps find nothing.
  EXPECT_GE(passes[0], 3 * 8);  // 42
  EXPECT_GE(passes[1], 3 * 8);  // 42
  // Every search ends on a capped pass (the stopping rules are exercised, not only the last,
  // uncapped pass; the two of eight that ran all six caps, the last uncapped, now end on a
  // guessed cap: `Search.AFailedPassCapsTheNextNearItsLeastBound`), and none simulates more
  // events.
  EXPECT_EQ(ended_capped[0], 8);
  EXPECT_EQ(ended_capped[1], 8);
  EXPECT_LE(events_capped[0], events_uncapped[0]);  // 20,878 against 20,926
  EXPECT_LT(events_capped[1], events_uncapped[1]);  // 21,002 against 32,218
  EXPECT_EQ(flat_passes, 16);  // two passes each: the first cap is below every flat price
}

// Plans requeued at their bound before their joint syncs are priced
// (`SearchOptions::requeue_joint_from`, here every plan) are priced out of the search's order:
// a pass that requeued one and would end the search is followed by a pass capped one above
// what it found, which confirms its plans. On the deep pipelines above (ZeRO-0 and ZeRO-1
// plans alike), estimate-only and --verify 4, the result is the uncapped search's, best plan and
// candidates in order; a pass is followed by a confirming pass exactly when it says so, and the
// search ends on the last pass only; 2 of the 4 estimate-only searches end on a confirming
// pass, capped one above the best time; --verify 4 searches requeue nothing; and the default
// threshold (32,768 devices) lets none of these 32-GPU plans wait.
TEST(Search, RequeuedJointSyncsChangeNoResult) {
  const topo::Topology rail = testing::thin_rail(16);
  std::int64_t requeued[2] = {0, 0};   // estimate-only, --verify 4
  std::int64_t confirmed[2] = {0, 0};  // searches that ended on a confirming pass
  for (const int mib : {10, 20, 40, 80}) {
    for (const int mode : {0, 1}) {
      SCOPED_TRACE("MiB " + std::to_string(mib) + " mode " + std::to_string(mode));
      const auto profile = sixteen_blocks(mib);
      SearchOptions requeueing = deep_search(mode);
      SearchOptions uncapped = requeueing;
      uncapped.capped_passes = false;
      OracleCommCost fresh(rail);
      EXPECT_EQ(search(profile, fresh, requeueing).stats.requeued, 0);
      requeueing.requeue_joint_from = 1;
      const SearchPair p = same_searches(profile, rail, requeueing, uncapped);
      EXPECT_EQ(p.without.stats.requeued, 0);
      requeued[mode] += p.with.stats.requeued;
      const std::vector<PassReport>& told = p.passes_with;
      ASSERT_FALSE(told.empty());
      EXPECT_TRUE(told.back().ends);
      for (std::size_t i = 0; i + 1 < told.size(); ++i) {
        EXPECT_FALSE(told[i].ends);
        EXPECT_EQ(told[i].to_confirm, told[i + 1].confirms);
      }
      if (!told.back().confirms) continue;
      ++confirmed[mode];
      ASSERT_GE(told.size(), 2U);
      const PassReport& found = told[told.size() - 2];
      EXPECT_TRUE(found.to_confirm);
      EXPECT_GT(found.stats.requeued, 0);
      // Capped one above the best time the last pass found.
      ASSERT_TRUE(told.back().cap.has_value());
      EXPECT_EQ(told.back().cap->ps(), p.with.best->iteration_time.ps() + 1);
    }
  }
  EXPECT_GE(requeued[0], 4);   // 6
  EXPECT_GE(confirmed[0], 2);  // 2
  // Searches that keep candidates for --verify K do not requeue.
  EXPECT_EQ(requeued[1], 0);
  EXPECT_EQ(confirmed[1], 0);
}

// Search options on the bundled 1,024-GPU rail cluster (Megatron memory rules, `device`'s
// memory bandwidth for the optimizer step).
SearchOptions gpt3_on_rail_1024(const workload::Accelerator& device) {
  SearchOptions o;
  o.cost = {.rules = workload::MemoryRules::kMegatron,
            .devices = 1024,
            .memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency};
  return o;
}

// Capped passes for --verify 4 keep the uncapped search's candidates where the orders' best
// plans lie far apart: GPT-3 175B (t = 2, micro-batch 1) on the bundled 1,024-GPU rail
// cluster, whose tp-dp-pp plans (5.98 s) are priced below the first cap (1.25 times the least
// entry bound, 6.30 s) while the best tp-pp-dp plan (6.64 s) is not. That pass must not end the
// search: the verification replays the best plan of each order.
TEST(CappedVerification, KeepsTheBestPlanOfAnOrderPricedAboveTheFirstCap) {
  const std::string root = NEST_SOURCE_DIR;
  const auto device = workload::load_accelerator(root + "/workloads/accelerators/h100-sxm.yaml");
  const auto profile = testing::gpt3_profile(2);
  const topo::Topology cluster = topo::load_topology(root + "/topologies/h100_rail_1024.yaml");
  SearchOptions capped = gpt3_on_rail_1024(device);
  capped.replay_candidates = 4;
  SearchOptions uncapped = capped;
  uncapped.capped_passes = false;
  const SearchPair p = same_searches(profile, cluster, capped, uncapped);
  EXPECT_EQ(p.with.stats.passes, 2);
  EXPECT_EQ(p.without.stats.passes, 1);
  ASSERT_EQ(p.with.candidates.size(), 4U);
  EXPECT_EQ(std::count_if(p.with.candidates.begin(), p.with.candidates.end(),
                          [](const Plan& plan) {
                            return plan.choice.order == PlacementOrder::kTensorPipelineData;
                          }),
            1);
  // The capped search prices fewer plans' collectives by event simulation.
  EXPECT_LT(p.events_with, p.events_without);
}

// A pass that does not end the search caps the next 10% above the least bound on which its sync
// checks ruled a plan out against the cap, when below the next cap. GPT-3 175B (t = 4) on the
// bundled 1,024-GPU rail cluster, whose best tp-pp-dp plan (6.642 s) lies above the first cap
// (6.502 s, 1.25 times the least entry bound): estimate-only, tp-pp-dp,
// the first pass rules plans out from 6.522 s, so the second pass is capped at 7.174 s (at 1.5
// times the least entry bound, 7.803 s, without the guess), at most 10% above the best plan
// (here the best plan's own sync check ruled it out, on a bound at most its price), and the
// search finds what one uncapped pass finds
// (on 1.68 M simulated events, 1.71 M with the geometric cap, 1.92 M uncapped). With --verify 4
// and both orders, the tp-dp-pp plans are priced below the first cap and tp-pp-dp's are not:
// the guess is made of tp-pp-dp's plans, ruled out against the cap (tp-dp-pp's are ruled out
// against their order's lower cut), and the search keeps the uncapped search's candidates.
// Each pass is told as it ends (`SearchHooks::pass`): the first, not guessed, does not end the
// search, the second (guessed) does; the counters grow to the result's; the uncapped search is
// one pass, which ends it.
TEST(Search, AFailedPassCapsTheNextNearItsLeastBound) {
  const std::string root = NEST_SOURCE_DIR;
  const auto device = workload::load_accelerator(root + "/workloads/accelerators/h100-sxm.yaml");
  const topo::Topology cluster = topo::load_topology(root + "/topologies/h100_rail_1024.yaml");
  const workload::LayerProfile profile = testing::gpt3_profile(4);
  for (const bool verify : {false, true}) {
    SCOPED_TRACE(verify ? "--verify 4" : "estimate-only");
    SearchOptions capped = gpt3_on_rail_1024(device);
    if (verify) {
      capped.replay_candidates = 4;
    } else {
      capped.orders = {PlacementOrder::kTensorPipelineData};
    }
    SearchOptions uncapped = capped;
    uncapped.capped_passes = false;
    const SearchPair p = same_searches(profile, cluster, capped, uncapped);
    Time largest = p.with.best->iteration_time;  // the cap must pass every candidate
    for (const Plan& plan : p.with.candidates) largest = std::max(largest, plan.iteration_time);
    EXPECT_EQ(largest.ps(), 6'642'450'528'151);  // the best tp-pp-dp plan
    EXPECT_EQ(p.with.stats.passes, 2);
    EXPECT_GT(p.with.stats.last_cap, largest.ps());
    EXPECT_LE(static_cast<double>(p.with.stats.last_cap), 1.1 * static_cast<double>(largest.ps()));
    EXPECT_EQ(p.without.stats.last_cap, 0);  // uncapped
    EXPECT_LT(p.events_with, p.events_without);

    const std::vector<PassReport>& told = p.passes_with;
    ASSERT_EQ(told.size(), 2U);
    EXPECT_EQ(told[0].pass, 1);
    ASSERT_TRUE(told[0].cap.has_value());
    // 1.25 times the least entry bound (5.201849620538 s), truncated to a picosecond.
    EXPECT_EQ(told[0].cap->ps(), 6'502'312'025'672);
    EXPECT_FALSE(told[0].guessed);
    EXPECT_FALSE(told[0].ends);
    EXPECT_EQ(told[1].pass, 2);
    ASSERT_TRUE(told[1].cap.has_value());
    EXPECT_EQ(told[1].cap->ps(), p.with.stats.last_cap);
    EXPECT_TRUE(told[1].guessed);
    EXPECT_TRUE(told[1].ends);
    EXPECT_LE(told[0].stats.candidates, told[1].stats.candidates);
    EXPECT_LT(told[0].stats.network_queries, told[1].stats.network_queries);
    EXPECT_EQ(told[1].stats.candidates, p.with.stats.candidates);
    EXPECT_EQ(told[1].stats.network_queries, p.with.stats.network_queries);
    ASSERT_EQ(p.passes_without.size(), 1U);
    EXPECT_FALSE(p.passes_without[0].cap.has_value());
    EXPECT_FALSE(p.passes_without[0].guessed);
    EXPECT_TRUE(p.passes_without[0].ends);
  }
}

// The rounds of `syncs_rule_out` keep the stages' position prices and exposed transfers from
// the first (`detail::evaluate_keeping`); with tensor-parallel allreduces in every layer and
// ZeRO-3 (reduce-scatter syncs, weight gathers on the replicas' layout), three stages of a
// random chain, two replicas of two GPUs, tp-pp-dp on a thin rail: at the exact price the plan
// is ruled out, a picosecond above it stands, and the price the check reaches is `evaluate`'s.
TEST(SyncSteps, KeptPositionsLeaveTheExactPrice) {
  const topo::Topology rail = testing::thin_rail(8);
  for (const int zero_stage : {1, 3}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(zero_stage));
    Rng rng(11);
    const workload::LayerProfile profile =
        testing::random_chain(rng, {.hbm = Bytes::gibibytes(80)});
    const std::size_t n = profile.variants[1].layers.size();
    const PlanChoice choice{.variant = 1,
                            .boundaries = {0, 1, 3, n},
                            .data_parallel = 2,
                            .zero_stage = zero_stage,
                            .order = PlacementOrder::kTensorPipelineData};
    const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 16};
    OracleCommCost oracle(rail);
    const Plan plan = evaluate(profile, choice, oracle, options);
    ASSERT_GT(plan.stages[1].time.collectives, Time::zero());
    const Time exact = plan.iteration_time;
    OracleCommCost at_price(rail);
    EXPECT_TRUE(syncs_rule_out(profile, choice, at_price, options, exact).ruled_out);
    OracleCommCost above(rail);
    const SyncCheck c =
        syncs_rule_out(profile, choice, above, options, exact + Time::picoseconds(1));
    EXPECT_FALSE(c.ruled_out);
    EXPECT_EQ(c.price, exact);
  }
}

// The collectives a network is asked for, operation and layout, in order.
class AskedCollectives final : public ForwardingCommCost {
 public:
  using ForwardingCommCost::ForwardingCommCost;
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    asked.emplace_back(op, layout);
    return inner().collective(op, size, layout);
  }
  Time gather_point(Bytes size, const GroupLayout& layout) override {
    return inner().gather_point(size, layout);
  }
  std::vector<std::pair<workload::CollectiveOp, GroupLayout>> asked;
};

// The plan's bound reads stage 0's sync alone (it ends the pipeline; the header's
// T >= P + R + O and T >= (K−1)·W + (S−1)·C + B·R + O): `plan_lower_bound` asks the network for
// no other stage's sync. Eight stages, four replicas, tp-pp-dp, on the event-free bounds of a
// thin rail's oracle, with ZeRO-1 and with ZeRO-3 (whose weight gathers the network prices on
// its own line, `gather_point`): of the sync operation only stage 0's layout is asked, stage 0
// is priced as `evaluate` prices it, and the bound is the header's formula on `evaluate`'s plan.
TEST(PlanLowerBound, AsksForStageZerosSyncOnly) {
  const topo::Topology rail = testing::thin_rail(16);
  for (const int zero_stage : {1, 3}) {
    SCOPED_TRACE("ZeRO-" + std::to_string(zero_stage));
    DeepPipeline plan = deep_pipeline(40, PlacementOrder::kTensorPipelineData);
    plan.choice.zero_stage = zero_stage;
    CostOptions options{.rules = MemoryRules::kMegatron, .devices = 32};
    options.joint_data_parallel_sync = false;
    OracleCommCost oracle(rail);
    BoundNetwork bounds(oracle, true);
    const Plan full = evaluate(plan.profile, plan.choice, bounds, options);
    AskedCollectives asked(bounds);
    const PlanBound lb = plan_lower_bound(plan.profile, plan.choice, asked, options);
    const DeviceMap map = DeviceMap::make(plan.choice.order, plan.choice.stages(), 4,
                                          plan.profile.variants[0].devices_per_replica);
    const workload::CollectiveOp sync = zero_stage == 3 ? workload::CollectiveOp::kReduceScatter
                                                        : workload::CollectiveOp::kAllReduce;
    std::vector<int> stages_asked;
    for (const auto& [op, layout] : asked.asked) {
      for (int p = 0; p < map.stages; ++p) {
        const GroupLayout replicas{
            .base = map.device(p, 0, 0),
            .member = {map.data_parallel, map.replica_stride},
            .groups = {{{map.devices_per_replica, map.shard_stride}, {1, 0}, {1, 0}}}};
        if (op == sync && layout == replicas) stages_asked.push_back(p);
      }
    }
    EXPECT_EQ(stages_asked, std::vector<int>{0});
    ASSERT_EQ(map.stages, 8);
    EXPECT_GT(full.stages[7].data_parallel_sync, Time::zero());
    EXPECT_EQ(lb.plan.stages[7].data_parallel_sync, Time::zero());
    const StageReport& last = full.stages.front();
    EXPECT_EQ(lb.plan.stages.front().data_parallel_sync, last.data_parallel_sync);
    EXPECT_EQ(lb.plan.stages.front().time.total(), last.time.total());
    const Breakdown& b = full.breakdown;
    const double r = static_cast<double>(last.data_parallel_sync.ps());
    const Time work = b.compute + b.collectives;
    const std::int64_t rest = (b.bubble + last.optimizer).ps();
    const std::int64_t k = full.microbatches_per_replica;
    const std::int64_t one = work.ps() + rest + static_cast<std::int64_t>(0.999 * r / 4);
    const std::int64_t all = work.ps() / k * (k - 1) + rest + static_cast<std::int64_t>(0.999 * r);
    EXPECT_EQ(lb.bound, Time::picoseconds(std::max(one, all)));
  }
}

}  // namespace
}  // namespace nest::placer
