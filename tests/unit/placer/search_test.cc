#include <gtest/gtest.h>

#include "nest/placer/comm_cost.h"
#include "nest/placer/search.h"
#include "nest/workload/layer_profile.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::MemoryRules;

// `n` identical layers: forward 1 ms, backward 2 ms, recompute 1 ms, 10 MiB of weights, 100 MiB
// of activations, 4 MiB of input.
workload::LayerProfile chain(int n, Bytes hbm) {
  workload::LayerProfile p;
  p.hbm = hbm;
  p.recompute_allowed = false;
  workload::Variant v;
  v.microbatches = 8;
  for (int i = 0; i < n; ++i) {
    workload::Layer l;
    l.name = "block";
    l.forward = Time::milliseconds(1);
    l.backward = Time::milliseconds(2);
    l.recompute = Time::milliseconds(1);
    l.parameter_bytes = Bytes::mebibytes(10);
    l.parameters = 5 << 20;
    l.activation_bytes = Bytes::mebibytes(100);
    l.input_bytes = Bytes::mebibytes(4);
    v.layers.push_back(l);
  }
  p.variants.push_back(v);
  return p;
}

TEST(Search, NothingFitsNamesTheSmallestStageAgainstTheCapacity) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  const SearchResult r = search(chain(4, Bytes::mebibytes(100)), zero, options);
  EXPECT_FALSE(r.best.has_value());
  // One layer at the last position: 2·10 MiB + 100 MiB.
  EXPECT_EQ(r.infeasible_reason,
            "nothing fits: the smallest stage (layer 0 'block' alone, tensor parallel 1, ZeRO-0 "
            "over 1 replica, recomputation none) needs 120 MiB per device against a capacity of "
            "100 MiB");
}

TEST(Search, NothingFitsNamesTheDevicesTheSmallestPipelineNeeds) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 3};
  auto p = chain(8, Bytes::mebibytes(250));
  p.recompute_allowed = true;
  // With recomputation a stage at position s keeps 2·P + A + (s−1)·4 MiB: two layers (240 MiB)
  // fit at positions 1..3, one layer (120 MiB) anywhere else. Eight layers: 2 + 2 + 2 + 1 + 1.
  const SearchResult r = search(p, zero, options);
  EXPECT_FALSE(r.best.has_value());
  EXPECT_EQ(r.infeasible_reason,
            "nothing fits on 3 devices: the smallest pipeline that fits memory needs 5 stages of "
            "1 device (tensor parallel 1, recomputation full) = 5 devices");
}

TEST(Search, FewerDevicesThanAReplicaIsExplained) {
  auto p = chain(2, Bytes::gibibytes(1));
  p.variants[0].tensor_parallel = 8;
  p.variants[0].devices_per_replica = 8;
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 4};
  const SearchResult r = search(p, zero, options);
  EXPECT_EQ(r.infeasible_reason,
            "nothing fits: 4 devices are fewer than the smallest stage replica (8)");
}

TEST(Search, BalancesIdenticalLayersAndUsesTheWholeBudget) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 8};
  // 8 layers of 3 ms, 8 microbatches, 8 devices. Memory allows any split (1 GiB).
  // S = 1, d = 8: (1 + 0)·24 = 24 ms; S = 2, d = 4: (2 + 1)·12 = 36 ms; S = 8, d = 1: 15·3.
  const SearchResult r = search(chain(8, Bytes::gibibytes(2)), zero, options);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->iteration_time, Time::milliseconds(24));
  EXPECT_EQ(r.best->choice.stages(), 1);
  EXPECT_EQ(r.best->choice.data_parallel, 8);
}

TEST(Search, MemoryForcesAPipelineAndTheLastStagesTakeMore) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kNestArtifact, .devices = 5};
  auto p = chain(8, Bytes::mebibytes(250));
  p.recompute_allowed = true;
  // As above, the only 5-stage split is 1, 1, 2, 2, 2. Stages that recompute cost 4 ms a layer,
  // the last stage 3 ms: max 8 ms, T = (8 + 4)·8 ms.
  const SearchResult r = search(p, zero, options);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->choice.boundaries, (std::vector<std::size_t>{0, 1, 2, 4, 6, 8}));
  EXPECT_EQ(r.best->choice.recompute, workload::Recompute::kFull);
  EXPECT_EQ(r.best->iteration_time, Time::milliseconds(12 * 8));
}

TEST(Search, InterleavingShortensTheBubbleAndFixedDimensionsAreHonoured) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 4};
  options.data_parallel = {1};
  const auto p = chain(8, Bytes::gibibytes(80));
  // d = 1, M = 8, 3 ms a layer: S = 4 with v = 2 takes (8·2 + 3)·3 ms = 57 ms; 1F1B on 4 stages
  // (8 + 3)·6 ms = 66 ms; S = 2 at best v = 4: (8·4 + 1)·3 ms = 99 ms.
  const SearchResult r = search(p, zero, options);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_EQ(r.best->choice.stages(), 4);
  EXPECT_EQ(r.best->choice.virtual_stages, 2);
  EXPECT_EQ(r.best->iteration_time, Time::milliseconds(57));
  options.virtual_stages = {1};
  EXPECT_EQ(search(p, zero, options).best->iteration_time, Time::milliseconds(66));
  options.virtual_stages = {};
  options.stages = {2};
  const SearchResult two = search(p, zero, options);
  EXPECT_EQ(two.best->choice.virtual_stages, 4);
  EXPECT_EQ(two.best->iteration_time, Time::milliseconds(99));
}

TEST(Search, AFixedPlanThatDoesNotFitNamesItsStageAndTheExcess) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 2};
  options.stages = {2};
  options.data_parallel = {1};
  options.virtual_stages = {1};
  options.recompute_modes = {workload::Recompute::kNone};
  const SearchResult r = search(chain(4, Bytes::mebibytes(500)), zero, options);
  ASSERT_FALSE(r.best.has_value());
  // Two layers a stage: 2 × 5 Mi parameters × 16 B = 160 MiB; stage 0 holds 2 microbatches of
  // 2 × 100 MiB: 560 MiB against 500.
  EXPECT_EQ(r.infeasible_reason,
            "the plan does not fit memory: stage 0 needs 560 MiB per device, 60 MiB more than "
            "the 500 MiB of device memory (ignore_memory prices it anyway)");
  ASSERT_TRUE(r.over_memory.has_value());
  EXPECT_EQ(r.over_memory->iteration_time, Time::milliseconds((8 + 1) * 6));
}

TEST(Search, IgnoringMemoryPricesAPlanThatDoesNotFit) {
  ZeroCommCost zero;
  SearchOptions options;
  options.cost = {.rules = MemoryRules::kMegatron, .devices = 1};
  const auto p = chain(4, Bytes::mebibytes(100));
  EXPECT_FALSE(search(p, zero, options).best.has_value());
  options.ignore_memory = true;
  const SearchResult r = search(p, zero, options);
  ASSERT_TRUE(r.best.has_value());
  EXPECT_FALSE(r.best->fits());
  EXPECT_EQ(r.best->iteration_time, Time::milliseconds(8 * 12));
}

// The verification's cut (nest place --verify K), by hand: the set is the best plan of each
// order and then the best K − n others.
TEST(Search, VerificationCutIsTheLeastAPlanMustBeatToBeReplayed) {
  auto ms = [](double x) { return Time::milliseconds(x); };
  const std::vector<Time> rest = {ms(5), ms(3), ms(9)};
  // An order with no plan yet: any plan of it would be its best, so it is always replayed.
  EXPECT_EQ(verification_cut(std::nullopt, 1, rest, 4), Time::max());
  // K = 4, two orders with plans: two slots beyond the firsts, the 2nd smallest of the rest is
  // 5 ms; a first of 4 ms is below it, one of 7 ms above it.
  EXPECT_EQ(verification_cut(ms(4), 2, rest, 4), ms(5));
  EXPECT_EQ(verification_cut(ms(7), 2, rest, 4), ms(7));
  // K = 5: three slots, the largest of the three.
  EXPECT_EQ(verification_cut(ms(4), 2, rest, 5), ms(9));
  // K = 6: four slots, three plans: any plan enters.
  EXPECT_EQ(verification_cut(ms(4), 2, rest, 6), Time::max());
  // K no larger than the orders with plans: only the best of each order, so its best.
  EXPECT_EQ(verification_cut(ms(4), 2, rest, 2), ms(4));
  EXPECT_EQ(verification_cut(ms(4), 3, rest, 2), ms(4));
  EXPECT_EQ(verification_cut(ms(4), 1, {}, 1), ms(4));
  // Equal times: the slot is taken by the one found first (a new plan must beat it).
  EXPECT_EQ(verification_cut(ms(1), 2, {ms(3), ms(3)}, 4), ms(3));
}

}  // namespace
}  // namespace nest::placer
