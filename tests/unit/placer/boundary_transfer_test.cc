// Stage-boundary transfers priced as the 1F1B schedule runs them (issue 15, item 1): a send
// leaves when its operation ends and holds nothing but the operation that waits for it. Oracles
// by hand (the critical path of each case written out), against the cost model's pricing before
// issue 15 (every transfer in every microbatch slot), and the search's bounds against the plans
// they stand for on a thin rail network where the transfers are large.

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "nest/core/rng.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/workload/layer_profile.h"
#include "placer/stage_model.h"
#include "unit/placer/fixtures.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::MemoryRules;
using workload::Recompute;

std::vector<Time> ms(std::initializer_list<int> values) {
  std::vector<Time> out;
  for (const int v : values) out.push_back(Time::milliseconds(v));
  return out;
}

// Two stages, 3 microbatches, forward 2 ms, backward 4 ms, 1 ms each way between them.
// Stage 0 runs F0 F1 B0 F2 B1 B2, stage 1 F0 B0 F1 B1 F2 B2. The critical path:
// F0 on stage 0 [0, 2], sent (1 ms), F0 on stage 1 [3, 5], B0 [5, 9], sent back, B0 on stage 0
// [10, 14], F2 [14, 16], sent, F2 on stage 1 [17, 19] (it is free from 15), B2 [19, 23], sent
// back, B2 on stage 0 [24, 28]: 4 forwards + 4 backwards + 4 transfers = 8 + 16 + 4 = 28 ms.
// Without the transfers the same order takes (3 + 2 − 1) · 6 = 24 ms; with each transfer in
// its stage's slot (before issue 15) (3 + 2 − 1) · (6 + 2) = 32 ms.
TEST(PipelineMakespan, TwoStagesByHand) {
  const auto f = ms({2, 2});
  const auto b = ms({4, 4});
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({1, 1}), 2, 3), Time::milliseconds(28));
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({0, 0}), 2, 3), Time::milliseconds(24));
  // A last stage twice as slow (forward 4 ms, backward 8 ms) hides them: it never waits after
  // its first input (F0 of stage 0 + 1 ms), and stage 0's last backward follows its B2 by 1 ms:
  // 3 + 3 · (4 + 8) + 1 + 4 = 44 ms, against 2 + 36 + 4 = 42 ms without transfers, both below
  // the cost model's transfer-free (3 + 2 − 1) · 12 = 48 ms, which it then keeps.
  EXPECT_EQ(detail::pipeline_makespan(ms({2, 4}), ms({4, 8}), ms({1, 1}), 2, 3),
            Time::milliseconds(44));
  EXPECT_EQ(detail::pipeline_makespan(ms({2, 4}), ms({4, 8}), ms({0, 0}), 2, 3),
            Time::milliseconds(42));
}

// Four stages, 4 microbatches, forward 1 ms, backward 2 ms, 1 ms each way. Stage p runs 3 − p
// warm-up forwards. The critical path: microbatch 0's forward through the 4 stages
// (4 · 1 + 3 · 1 = 7 ms), its backward back to stage 1 (3 · 2 + 2 · 1 = 8 ms, at 15), stage 1's
// next forward, of microbatch 3, to the last stage (3 · 1 + 2 · 1 = 5 ms, at 20), and
// microbatch 3's backward to stage 0 (4 · 2 + 3 · 1 = 11 ms): 31 ms. Without transfers
// (4 + 4 − 1) · 3 = 21 ms; before issue 15 (4 + 4 − 1) · (3 + 2) = 35 ms.
TEST(PipelineMakespan, FourStagesByHand) {
  const auto f = ms({1, 1, 1, 1});
  const auto b = ms({2, 2, 2, 2});
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({1, 1, 1, 1}), 4, 4), Time::milliseconds(31));
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({0, 0, 0, 0}), 4, 4), Time::milliseconds(21));
}

// A send longer than the forward: a stage's sends share its link to the next stage and leave
// one after another. Two stages, 2 microbatches, forward and backward 1 ms, 3 ms each way.
// Stage 0: F0 [0, 1], sent [1, 4]; F1 [1, 2], sent once the link is free [4, 7]. Stage 1: F0
// [4, 5], B0 [5, 6], sent back [6, 9], F1 [7, 8], B1 [8, 9], sent back [9, 12]. Stage 0: B0
// [9, 10], B1 [12, 13]: 13 ms (12 ms if the two sends could share no link: F1 would arrive at 5).
TEST(PipelineMakespan, SendsShareTheLinkToTheNextStage) {
  EXPECT_EQ(detail::pipeline_makespan(ms({1, 1}), ms({1, 1}), ms({3, 3}), 2, 2),
            Time::milliseconds(13));
}

// Interleaved, two stages of two chunks (chunk c on stage c mod 2), 2 microbatches, forward
// 1 ms, backward 2 ms, 2 ms each way. Stage 0 runs F(c0,m0) F(c0,m1) F(c2,m0) F(c2,m1) then
// one-forward-one-backward ... (warm-up (2 − 0 − 1)·2 + (2 − 1)·2 = 4, all its forwards), stage 1
// two warm-up forwards. The chain of microbatch 0 alone: 4 forwards, 4 backwards and 6
// transfers = 4 + 8 + 12 = 24 ms; microbatch 1's last backward on stage 0 follows 3 ms later
// (stage 0 is busy with m0's until 24 and m1's gradient arrives at 25): 27 ms. Without
// transfers 15 ms.
TEST(PipelineMakespan, InterleavedTwoStagesByHand) {
  const auto f = ms({1, 1, 1, 1});
  const auto b = ms({2, 2, 2, 2});
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({2, 2, 2, 2}), 2, 2), Time::milliseconds(27));
  EXPECT_EQ(detail::pipeline_makespan(f, b, ms({0, 0, 0, 0}), 2, 2), Time::milliseconds(15));
}

// Four identical layers, forward 1 ms, backward 2 ms, 4 MiB out; 3 microbatches, one replica.
workload::LayerProfile four_layers() {
  return testing::toy_blocks({.microbatches = 3, .activation_bytes = Bytes::mebibytes(10)});
}

// The two-stage case above through the cost model: 2 layers per stage (forward 2 ms, backward
// 4 ms), 4 MiB at 4 MiB/ms without latency: 1 ms each way.
TEST(BoundaryTransfers, TwoStagePlanCostsItsCriticalPath) {
  const auto profile = four_layers();
  FlatCommCost flat(Bandwidth::bytes_per_second(4.0 * (1 << 20) * 1000), Time::zero());
  const PlanChoice choice{.boundaries = {0, 2, 4}};
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 2};
  const Plan plan = evaluate(profile, choice, flat, options);
  ASSERT_EQ(plan.stages[0].time.transfer, Time::milliseconds(2));
  EXPECT_EQ(plan.iteration_time, Time::milliseconds(28));
  EXPECT_EQ(plan.breakdown.compute, Time::milliseconds(18));
  EXPECT_EQ(plan.breakdown.bubble, Time::milliseconds(6));
  EXPECT_EQ(plan.breakdown.transfers, Time::milliseconds(4));
  CostOptions serial = options;
  serial.overlap_boundary_transfers = false;
  const Plan before = evaluate(profile, choice, flat, serial);
  EXPECT_EQ(before.iteration_time, Time::milliseconds(32));
  EXPECT_EQ(before.breakdown.transfers, Time::milliseconds(6));
  // No network: the same figures either way.
  ZeroCommCost zero;
  EXPECT_EQ(evaluate(profile, choice, zero, options).iteration_time, Time::milliseconds(24));
  EXPECT_EQ(evaluate(profile, choice, zero, serial).iteration_time, Time::milliseconds(24));
}

// Random chains on a 16-GPU rail cluster whose NICs (12.5 GB/s) make the boundary transfers
// longer than the layers: the search, whose bounds leave the transfers out, finds the best of the
// plans it stands for, each priced by a search with every dimension fixed (one candidate, nothing
// to prune).
workload::LayerProfile random_chain(Rng& rng) {
  // 320 MiB: pipelines, as one stage of the larger chains does not fit.
  return testing::random_chain(rng, {.hbm = Bytes::mebibytes(320)});
}

TEST(BoundaryTransfers, SearchBoundsNeverExceedThePlansTheyStandFor) {
  const topo::Topology rail = testing::thin_rail(8);
  OracleCommCost oracle(rail);
  Rng rng(15);
  int exposed = 0;
  int fixed = 0;
  for (int instance = 0; instance < 12; ++instance) {
    SCOPED_TRACE("instance " + std::to_string(instance));
    const auto profile = random_chain(rng);
    SearchOptions options;
    options.cost = {.rules = MemoryRules::kMegatron, .devices = 16};
    options.zero_stages = {0, 1};
    options.recompute_modes = {Recompute::kNone, Recompute::kFull};
    options.virtual_stages = {1, 2};
    const SearchResult all = search(profile, oracle, options);
    ASSERT_TRUE(all.best.has_value()) << all.infeasible_reason;
    std::optional<Time> best;
    for (std::size_t vi = 0; vi < profile.variants.size(); ++vi) {
      const int t = profile.variants[vi].devices_per_replica;
      for (int s = 1; s <= static_cast<int>(profile.variants[vi].layers.size()); ++s) {
        for (int d = 1; d <= 8 && s * t * d <= 16; ++d) {
          for (const int zero : options.zero_stages) {
            if (zero > 0 && d == 1) continue;
            for (const Recompute rec : options.recompute_modes) {
              for (const PlacementOrder order : options.orders) {
                for (const int vs : options.virtual_stages) {
                  if (vs > 1 && (s < 2 || 8 % d != 0 || (8 / d) % s != 0)) continue;
                  SearchOptions one = options;
                  one.variants = {vi};
                  one.stages = {s};
                  one.data_parallel = {d};
                  one.zero_stages = {zero};
                  one.recompute_modes = {rec};
                  one.orders = {order};
                  one.virtual_stages = {vs};
                  const SearchResult r = search(profile, oracle, one);
                  if (!r.best) continue;
                  ++fixed;
                  const Plan& p = *r.best;
                  if (p.breakdown.transfers > Time::zero()) ++exposed;
                  if (!best || p.iteration_time < *best) best = p.iteration_time;
                }
              }
            }
          }
        }
      }
    }
    ASSERT_TRUE(best.has_value());
    EXPECT_EQ(all.best->iteration_time, *best);
  }
  // The cases bite: many plans expose some of their transfers (and with the transfers counted
  // in the bounds, as before issue 15, the search misses the best plan of 3 of these 12).
  EXPECT_GE(fixed, 1000);   // 1042
  EXPECT_GE(exposed, 700);  // 793
}

}  // namespace
}  // namespace nest::placer
