#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"
#include "placer/stage_model.h"
#include "unit/placer/fixtures.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

using workload::CollectiveOp;
using workload::MemoryRules;
using workload::ParallelAxis;

// Four identical layers: forward 1 ms, backward 2 ms, recompute 1 ms.
workload::LayerProfile four_layers(int devices_per_replica = 1) {
  return testing::toy_blocks(
      {.tensor_parallel = devices_per_replica, .recompute = Time::milliseconds(1)});
}

TEST(DeviceMap, LaysStagesOutFromThePipelineEnd) {
  // tp-pp-dp, S = 3, d = 2, 4 devices per replica: replica stride 12, stage stride 4.
  const DeviceMap m = DeviceMap::make(PlacementOrder::kTensorPipelineData, 3, 2, 4);
  EXPECT_EQ(m.device(2, 0, 0), 0u);  // the last stage takes slot 0
  EXPECT_EQ(m.device(0, 0, 0), 8u);
  EXPECT_EQ(m.device(0, 1, 3), 8u + 12u + 3u);
  // tp-dp-pp: the replicas of a stage are neighbours; the stage stride is 4·2.
  const DeviceMap n = DeviceMap::make(PlacementOrder::kTensorDataPipeline, 3, 2, 4);
  EXPECT_EQ(n.device(0, 1, 3), 16u + 4u + 3u);
  EXPECT_EQ(n.device(2, 1, 0), 4u);
  // dp-tp-pp: a replica's shards are d apart.
  const DeviceMap q = DeviceMap::make(PlacementOrder::kDataTensorPipeline, 3, 2, 4);
  EXPECT_EQ(q.device(2, 1, 3), 1u + 3u * 2u);
}

TEST(DeviceMap, EveryOrderIsABijectionOntoTheFirstDevices) {
  for (const PlacementOrder order : all_placement_orders()) {
    const DeviceMap m = DeviceMap::make(order, 3, 5, 2);
    std::vector<int> seen(30, 0);
    for (int p = 0; p < 3; ++p) {
      for (int k = 0; k < 5; ++k) {
        for (int s = 0; s < 2; ++s) {
          const auto dev = m.device(p, k, s);
          ASSERT_LT(dev, 30u) << to_string(order);
          ++seen[dev];
        }
      }
    }
    for (int c : seen) EXPECT_EQ(c, 1) << to_string(order);
    EXPECT_EQ(parse_placement_order(to_string(order)), order);
  }
}

TEST(DeviceMap, PipelineOutermostOrdersKeepAStagesDevicesWhateverTheDepth) {
  for (const PlacementOrder order : all_placement_orders()) {
    const DeviceMap a = DeviceMap::make(order, 3, 2, 4);
    const DeviceMap b = DeviceMap::make(order, 7, 2, 4);
    // Position 2 from the end: stage 1 of 3, stage 5 of 7.
    const bool same = a.stage_layout(1) == b.stage_layout(5);
    EXPECT_EQ(same, pipeline_outermost(order)) << to_string(order);
  }
}

TEST(PlacementOrder, UnknownNameListsTheAcceptedOnes) {
  try {
    (void)parse_placement_order("tp-tp-tp");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "placement_order: unknown placement order (got \"tp-tp-tp\"; expected one of "
                 "tp-pp-dp tp-dp-pp pp-tp-dp pp-dp-tp dp-tp-pp dp-pp-tp)");
  }
}

TEST(GroupLayout, ExpandsMixedRadixGroups) {
  const GroupLayout g{.base = 100, .member = {2, 1}, .groups = {{{2, 10}, {3, 1000}, {1, 0}}}};
  EXPECT_EQ(g.group_count(), 6);
  const auto groups = g.expand();
  ASSERT_EQ(groups.size(), 6u);
  EXPECT_EQ(groups[0], (std::vector<topo::DeviceId>{100, 101}));
  EXPECT_EQ(groups[1], (std::vector<topo::DeviceId>{110, 111}));
  EXPECT_EQ(groups[5], (std::vector<topo::DeviceId>{2110, 2111}));
  EXPECT_EQ(g.end(), 2112u);
}

TEST(FlatCommCost, MatchesTheAlphaBetaClosedForms) {
  FlatCommCost flat(Bandwidth::gigabytes_per_second(100), Time::microseconds(1));
  const GroupLayout four{.member = {4, 1}};
  // Ring allreduce: 2(n−1)·a + 2(n−1)/n·S/B = 6 us + 1.5·1e6/1e11 s = 21 us.
  EXPECT_EQ(flat.collective(CollectiveOp::kAllReduce, Bytes(1'000'000), four),
            Time::microseconds(21));
  // All-gather: (n−1)·a + (n−1)/n·S/B = 3 us + 7.5 us.
  EXPECT_EQ(flat.collective(CollectiveOp::kAllGather, Bytes(1'000'000), four),
            Time::microseconds(10.5));
  EXPECT_EQ(flat.collective(CollectiveOp::kAllReduce, Bytes(1'000'000), GroupLayout{}),
            Time::zero());
  const GroupLayout other{.base = 4, .member = {4, 1}};
  EXPECT_EQ(flat.transfer(Bytes(1'000'000), four, other), Time::microseconds(11));
}

TEST(Evaluate, HandComputedArtifactPlan) {
  const auto profile = four_layers();
  ZeroCommCost zero;
  const PlanChoice choice{
      .boundaries = {0, 2, 4}, .data_parallel = 2, .recompute = workload::Recompute::kFull};
  const CostOptions options{.rules = MemoryRules::kNestArtifact, .devices = 4};
  const Plan plan = evaluate(profile, choice, zero, options);
  // Stage 0 (2 in flight) recomputes: 2·(1 + 2 + 1) = 8 ms; the last stage does not: 6 ms.
  ASSERT_EQ(plan.stages.size(), 2u);
  EXPECT_EQ(plan.stages[0].time.compute, Time::milliseconds(8));
  EXPECT_EQ(plan.stages[1].time.compute, Time::milliseconds(6));
  EXPECT_EQ(plan.stages[0].in_flight, 2);
  EXPECT_EQ(plan.microbatches_per_replica, 4);
  // T = (ceil(8/2) + 2 − 1) · 8 ms = 40 ms: compute 4·8, bubble 1·8.
  EXPECT_EQ(plan.iteration_time, Time::milliseconds(40));
  EXPECT_EQ(plan.breakdown.compute, Time::milliseconds(32));
  EXPECT_EQ(plan.breakdown.bubble, Time::milliseconds(8));
  EXPECT_EQ(plan.breakdown.total(), plan.iteration_time);
  EXPECT_EQ(plan.devices_used, 4);
  // Artifact memory of stage 0: 2·P + A + (2 − 1)·input = 2·20 + 200 + 4 MiB.
  EXPECT_EQ(plan.stages[0].memory.total(), Bytes::mebibytes(244));
  EXPECT_TRUE(plan.fits());
  // 16 sequences (8 microbatches of 1) in 40 ms.
  EXPECT_DOUBLE_EQ(plan.sequences_per_second, 200.0);
  EXPECT_DOUBLE_EQ(plan.tokens_per_second, 200000.0);
  EXPECT_FALSE(plan.mfu.has_value());
}

TEST(Evaluate, FlatNetworkAddsCollectivesTransfersAndSync) {
  auto profile = four_layers(2);
  for (auto& l : profile.variants[0].layers) {
    l.collectives.push_back({.op = CollectiveOp::kAllReduce,
                             .axis = ParallelAxis::kTensor,
                             .size = Bytes(1'000'000),
                             .count = 2});
  }
  FlatCommCost flat(Bandwidth::gigabytes_per_second(100), Time::microseconds(1));
  const PlanChoice choice{.boundaries = {0, 3, 4}, .data_parallel = 2};
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 8};
  const Plan plan = evaluate(profile, choice, flat, options);
  // Allreduce over t = 2: 2·1 us + 2·(1/2)·1e6/1e11 s = 12 us, twice per layer.
  EXPECT_EQ(plan.stages[0].time.collectives, Time::microseconds(3 * 2 * 12));
  EXPECT_EQ(plan.stages[1].time.collectives, Time::microseconds(2 * 12));
  // Output of layer 2 (4 MiB) forward and its gradient back: 2·(1 us + 4 MiB / 100 GB/s).
  EXPECT_EQ(plan.stages[0].time.transfer,
            Time::microseconds(2) +
                serialization_time(Bytes::mebibytes(4), Bandwidth::gigabytes_per_second(100)) * 2);
  EXPECT_EQ(plan.stages[1].time.transfer, Time::zero());
  // Gradient allreduce over d = 2 of stage 0's 30 MiB in 4 buckets of 7.5 MiB, each
  // 2 us + 7.5 MiB / 100 GB/s. The buckets become ready as stage 0's last backward (6 ms)
  // runs and take far less than a quarter of it: only the last one, ready when the backward
  // ends, is exposed. Stage 1 finished earlier (the cooldown ends on stage 0).
  const Time bucket = Time::microseconds(2) + Time::seconds(7.5 * (1 << 20) / 1e11);
  EXPECT_EQ(plan.stages[0].data_parallel_sync, bucket * 4);
  EXPECT_EQ(plan.breakdown.data_parallel_sync, bucket);
  const Time stage0 = plan.stages[0].time.total();
  EXPECT_EQ(plan.max_stage_time, stage0);
  // The transfers run beside the compute: stage 1 (one layer) returns each gradient long
  // before stage 0 (three layers) needs it, so stage 0 never waits and none is exposed.
  const Time work0 = stage0 - plan.stages[0].time.transfer;
  EXPECT_EQ(plan.iteration_time, work0 * 5 + bucket);
  EXPECT_EQ(plan.breakdown.transfers, Time::zero());
  EXPECT_EQ(plan.breakdown.bubble, work0);
  // Without overlap all of the sync follows the backward.
  const Plan after =
      evaluate(profile, choice, flat,
               {.rules = MemoryRules::kMegatron, .devices = 8, .overlap_gradient_sync = false});
  EXPECT_EQ(after.iteration_time, work0 * 5 + bucket * 4);
  EXPECT_EQ(plan.breakdown.collectives, plan.stages[0].time.collectives * 4);
  // Transfers in every microbatch slot, as before issue 15: 5 stage-0 slots of compute,
  // collectives and transfer.
  const Plan serial = evaluate(
      profile, choice, flat,
      {.rules = MemoryRules::kMegatron, .devices = 8, .overlap_boundary_transfers = false});
  EXPECT_EQ(serial.iteration_time, stage0 * 5 + bucket);
  EXPECT_EQ(serial.breakdown.transfers, plan.stages[0].time.transfer * 4);
}

// Narayanan et al. 2021 §4.1: a replicated output crosses the stage boundary as t slices, which
// the next stage all-gathers over its tensor-parallel group.
TEST(Evaluate, ScatterGatherSendsASliceAndGathersItOnTheNextStage) {
  auto profile = four_layers(2);
  for (auto& l : profile.variants[0].layers) {
    l.output_bytes = Bytes::mebibytes(2);  // each of the 2 shards' half
    l.output_gather = Bytes::mebibytes(4);
  }
  FlatCommCost flat(Bandwidth::gigabytes_per_second(100), Time::microseconds(1));
  const Plan plan = evaluate(profile, {.boundaries = {0, 2, 4}}, flat,
                             {.rules = MemoryRules::kMegatron, .devices = 4});
  // Forward and back: 1 us + 2 MiB / 100 GB/s, then the all-gather of 4 MiB over 2 devices:
  // 1 us + (1/2)·4 MiB / 100 GB/s.
  const Time send = Time::microseconds(1) +
                    serialization_time(Bytes::mebibytes(2), Bandwidth::gigabytes_per_second(100));
  EXPECT_EQ(plan.stages[0].time.transfer, (send + send) * 2);
}

TEST(Evaluate, OptimizerStepIsMemoryTrafficOverBandwidth) {
  const auto profile = four_layers();
  ZeroCommCost zero;
  const CostOptions options{.rules = MemoryRules::kMegatron,
                            .devices = 4,
                            .memory_bandwidth = Bandwidth::gigabytes_per_second(1000)};
  const PlanChoice choice{.boundaries = {0, 4}, .data_parallel = 4, .zero_stage = 1};
  const Plan plan = evaluate(profile, choice, zero, options);
  // 4·5 Mi parameters · 54 B (Megatron-LM's mixed-precision Adam step) / 4 replicas / 1 TB/s.
  EXPECT_TRUE(plan.optimizer_modeled);
  EXPECT_EQ(plan.breakdown.optimizer, Time::seconds(4.0 * (5 << 20) * 54 / 4 / 1e12));
}

TEST(Evaluate, RejectsBadChoicesWithExactMessages) {
  const auto profile = four_layers();
  ZeroCommCost zero;
  const CostOptions options{.rules = MemoryRules::kNestArtifact, .devices = 4};
  auto message = [&](const PlanChoice& c) {
    try {
      (void)evaluate(profile, c, zero, options);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message({.boundaries = {0, 3, 2, 4}}),
            "partition: bad stage partition (got \"[0, 3, 2, 4]\"; expected strictly increasing "
            "layer boundaries from 0 to 4)");
  EXPECT_EQ(message({.boundaries = {0, 4}, .data_parallel = 9}),
            "data_parallel: data-parallel degree out of range (got \"9\"; expected 1..8 (the "
            "microbatches per iteration))");
  EXPECT_EQ(message({.boundaries = {0, 1, 2, 3, 4}, .data_parallel = 2}),
            "devices: the plan needs more devices than there are (got \"8\"; expected at most 4)");
  EXPECT_EQ(message({.boundaries = {0, 4}, .zero_stage = 1}),
            "zero_stage: ZeRO stage out of range (got \"1\"; expected 0 under the nest-artifact "
            "rules)");
}

TEST(Evaluate, APlanThatDoesNotFitIsStillEvaluated) {
  auto profile = four_layers();
  profile.hbm = Bytes::mebibytes(100);
  ZeroCommCost zero;
  const CostOptions options{.rules = MemoryRules::kNestArtifact, .devices = 4};
  const Plan plan = evaluate(profile, {.boundaries = {0, 4}}, zero, options);
  EXPECT_FALSE(plan.fits());
  EXPECT_EQ(plan.iteration_time, Time::milliseconds(8 * 12));
}

}  // namespace
}  // namespace nest::placer

namespace nest::placer {
namespace {

TEST(CostModel, ThroughputCountsEveryExpertGroupOfAReplica) {
  // A replica of e = 2 expert groups runs 2 x micro-batch sequences per microbatch step.
  workload::LayerProfile p = four_layers(2);
  p.variants[0].expert_parallel = 2;
  p.variants[0].tensor_parallel = 1;
  p.variants[0].micro_batch = 3;
  ZeroCommCost zero;
  PlanChoice c;
  c.boundaries = {0, 4};
  const Plan plan = evaluate(p, c, zero, {.devices = 2});
  // One stage, 8 microbatches of 4 x (1 + 2) ms: 96 ms for 8 x 3 x 2 = 48 sequences.
  EXPECT_EQ(plan.iteration_time, Time::milliseconds(96));
  EXPECT_DOUBLE_EQ(plan.sequences_per_second, 500.0);
  EXPECT_DOUBLE_EQ(plan.tokens_per_second, 500'000.0);
  // A global batch given by the workload is what an iteration covers.
  p.global_batch = 96;
  EXPECT_DOUBLE_EQ(evaluate(p, c, zero, {.devices = 2}).sequences_per_second, 1000.0);
}

}  // namespace
}  // namespace nest::placer

namespace nest::placer {
namespace {

// `n` identical layers (forward 1 ms, backward 2 ms, 100 MiB of activations), 8 microbatches.
workload::LayerProfile blocks(int n) {
  workload::LayerProfile p = four_layers();
  p.hbm = Bytes::gibibytes(80);
  p.variants[0].layers.resize(static_cast<std::size_t>(n), p.variants[0].layers[0]);
  return p;
}

TEST(Evaluate, SelectiveRecomputationAddsTheAttentionCoreAndKeepsItsActivations) {
  auto profile = four_layers();
  profile.selective_recompute_allowed = true;
  for (auto& l : profile.variants[0].layers) {
    l.selective_recompute = Time::microseconds(500);
    l.selective_activation_bytes = Bytes::mebibytes(30);
  }
  ZeroCommCost zero;
  const Plan plan =
      evaluate(profile, {.boundaries = {0, 2, 4}, .recompute = workload::Recompute::kSelective},
               zero, {.devices = 2});
  // 2·(1 + 2 + 0.5) ms per stage, every stage (the megatron rules recompute on the last too).
  EXPECT_EQ(plan.stages[0].time.compute, Time::microseconds(7000));
  EXPECT_EQ(plan.stages[1].time.compute, Time::microseconds(7000));
  // Stage 0 holds 2 microbatches of 2 × 30 MiB plus one recomputed core of 70 MiB.
  EXPECT_EQ(plan.stages[0].memory.activations, Bytes::mebibytes(2 * 60 + 70));
  // Without the profile's figures, or under the artifact's rules, it is an input error.
  profile.selective_recompute_allowed = false;
  auto message = [&](MemoryRules rules) {
    try {
      (void)evaluate(profile,
                     {.boundaries = {0, 2, 4}, .recompute = workload::Recompute::kSelective}, zero,
                     {.rules = rules, .devices = 2});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message(MemoryRules::kMegatron),
            "recompute: the profile gives no selective-recomputation figures (got \"selective\"; "
            "expected none or full (or a profile with selective_recompute))");
  EXPECT_EQ(message(MemoryRules::kNestArtifact),
            "recompute: the nest-artifact rules know no selective recomputation (got "
            "\"selective\"; expected none or full under the nest-artifact rules)");
}

TEST(Interleaved, BubbleIsSMinusOneChunkTimesAndComputeIsUnchanged) {
  const auto profile = blocks(8);
  ZeroCommCost zero;
  const CostOptions options{.devices = 4};
  // S = 4, v = 2: chunk c = layer c, on stage c mod 4.
  const PlanChoice choice{.boundaries = {0, 1, 2, 3, 4, 5, 6, 7, 8}, .virtual_stages = 2};
  const Plan plan = evaluate(profile, choice, zero, options);
  ASSERT_EQ(plan.stages.size(), 4u);
  EXPECT_EQ(plan.stages[1].chunks.size(), 2u);
  EXPECT_EQ(plan.stages[1].chunks[1].first_layer, 5u);  // model chunk 1 + 4
  // Narayanan et al. 2021 §2.2.1: (M·v + S − 1) chunk slots of 3 ms = (8·2 + 3)·3 ms; the
  // bubble shrinks from (S − 1)·6 ms to (S − 1)·3 ms.
  EXPECT_EQ(plan.iteration_time, Time::milliseconds(19 * 3));
  EXPECT_EQ(plan.breakdown.bubble, Time::milliseconds(3 * 3));
  EXPECT_EQ(plan.breakdown.compute, Time::milliseconds(8 * 6));
  const PlanChoice plain{.boundaries = {0, 2, 4, 6, 8}};
  EXPECT_EQ(evaluate(profile, plain, zero, options).breakdown.bubble, Time::milliseconds(3 * 6));
}

TEST(Interleaved, FirstStageHoldsTheWarmUpForwardsOfKorthikantisInterleaveFactor) {
  const auto profile = blocks(8);
  ZeroCommCost zero;
  const Plan plan =
      evaluate(profile, {.boundaries = {0, 1, 2, 3, 4, 5, 6, 7, 8}, .virtual_stages = 2}, zero,
               {.devices = 4});
  // Stage p holds (S − p − 1)·2 + (v − 1)·S + 1 chunk-microbatches: 11, 9, 7, 5. For stage 0
  // that is S·(1 + (S − 1)/(S·v)) = 5.5 stages' worth of activations (Korthikanti et al. 2022
  // §4.2.3), against S = 4 under 1F1B.
  const int expected[] = {11, 9, 7, 5};
  for (std::size_t p = 0; p < 4; ++p) {
    EXPECT_EQ(plan.stages[p].in_flight, expected[p]) << p;
    EXPECT_EQ(plan.stages[p].memory.activations, Bytes::mebibytes(100) * expected[p]) << p;
  }
  EXPECT_DOUBLE_EQ(
      plan.stages[0].memory.activations.as_double() / Bytes::mebibytes(200).as_double(),
      4 * (1 + 3.0 / (4 * 2)));
  // Weights, gradients and optimizer state of both chunks: 2 layers · 5 Mi parameters · 16 B.
  EXPECT_EQ(plan.stages[0].memory.weights + plan.stages[0].memory.gradients +
                plan.stages[0].memory.optimizer,
            Bytes(2 * (5 << 20) * 16));
}

TEST(Interleaved, TransfersFromTheLastStageWrapAroundToTheFirst) {
  auto profile = blocks(8);
  FlatCommCost flat(Bandwidth::gigabytes_per_second(100), Time::microseconds(1));
  const Plan plan =
      evaluate(profile, {.boundaries = {0, 1, 2, 3, 4, 5, 6, 7, 8}, .virtual_stages = 2}, flat,
               {.devices = 4});
  // Every chunk but the model's last sends 4 MiB on and its gradient back.
  const Time one = (Time::microseconds(1) +
                    serialization_time(Bytes::mebibytes(4), Bandwidth::gigabytes_per_second(100))) *
                   2;
  EXPECT_EQ(plan.stages[0].time.transfer, one * 2);
  EXPECT_EQ(plan.stages[3].chunks[0].time.transfer, one);  // to stage 0's second chunk
  EXPECT_EQ(plan.stages[3].chunks[1].time.transfer, Time::zero());
}

TEST(Interleaved, RejectsWhatMegatronCannotRun) {
  const auto profile = blocks(8);
  ZeroCommCost zero;
  auto message = [&](const PlanChoice& c, MemoryRules rules) {
    try {
      (void)evaluate(profile, c, zero, {.rules = rules, .devices = 16});
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::vector<std::size_t> eight = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_EQ(message({.boundaries = eight, .virtual_stages = 3}, MemoryRules::kMegatron),
            "virtual_stages: the chunks do not divide into the virtual stages (got \"3\"; "
            "expected a divisor of the 8 chunks of the partition)");
  EXPECT_EQ(message({.boundaries = eight, .virtual_stages = 2}, MemoryRules::kNestArtifact),
            "virtual_stages: the nest-artifact rules know only 1F1B (got \"2\"; expected 1 under "
            "the nest-artifact rules)");
  EXPECT_EQ(message({.boundaries = {0, 4, 8}, .virtual_stages = 2}, MemoryRules::kMegatron),
            "virtual_stages: interleaving needs a pipeline (got \"2\"; expected 1 with a single "
            "stage)");
  // 8 microbatches over d = 2 are 4 per replica, a multiple of the 4 stages; over d = 4, 2 per
  // replica are not.
  EXPECT_EQ(message({.boundaries = eight, .data_parallel = 2, .virtual_stages = 2},
                    MemoryRules::kMegatron),
            "no error");
  EXPECT_EQ(message({.boundaries = eight, .data_parallel = 4, .virtual_stages = 2},
                    MemoryRules::kMegatron),
            "data_parallel: interleaved 1F1B runs microbatches in groups of the pipeline's stages "
            "(got \"4\"; expected d dividing the 8 microbatches into a multiple of 4 per "
            "replica)");
}

// `detail::evaluate_keeping` (the rounds of `syncs_rule_out`) prices each stage's position once
// and takes it from what it kept afterwards. Three stages of a random chain (layers of distinct
// sizes), two replicas of two GPUs each, tp-pp-dp on the oracle of a thin rail: fresh and kept,
// every stage's times and the iteration time are `evaluate`'s; and a price edited in the kept
// positions is the one the next evaluation uses: 1 us more per layer in stage 1's collectives
// raises its collectives by 1 us per layer it holds, the others' not at all.
TEST(EvaluateKeeping, PricesEachPositionOnceAndThenUsesWhatItKept) {
  Rng rng(7);
  const workload::LayerProfile profile = testing::random_chain(rng, {.hbm = Bytes::gibibytes(80)});
  const std::size_t n = profile.variants[1].layers.size();
  const PlanChoice choice{.variant = 1,
                          .boundaries = {0, 1, 3, n},
                          .data_parallel = 2,
                          .order = PlacementOrder::kTensorPipelineData};
  const topo::Topology rail = testing::thin_rail(8);
  OracleCommCost oracle(rail);
  const CostOptions options{.rules = MemoryRules::kMegatron, .devices = 16};
  const Plan plain = evaluate(profile, choice, oracle, options);
  detail::KeptPrices kept;
  const Plan first = detail::evaluate_keeping(profile, choice, oracle, options, &kept);
  ASSERT_EQ(kept.positions.size(), 3U);
  EXPECT_TRUE(kept.positions[2].transfer.empty());  // the last stage sends nothing on
  EXPECT_EQ(kept.positions[0].transfer.size(), n + 1);
  ASSERT_TRUE(kept.exposed_transfers.has_value());
  EXPECT_EQ(*kept.exposed_transfers, plain.breakdown.transfers);
  const Plan again = detail::evaluate_keeping(profile, choice, oracle, options, &kept);
  for (const Plan* p : {&first, &again}) {
    EXPECT_EQ(p->iteration_time, plain.iteration_time);
    ASSERT_EQ(p->stages.size(), 3U);
    for (std::size_t s = 0; s < 3; ++s) {
      SCOPED_TRACE("stage " + std::to_string(s));
      EXPECT_EQ(p->stages[s].time.compute, plain.stages[s].time.compute);
      EXPECT_EQ(p->stages[s].time.collectives, plain.stages[s].time.collectives);
      EXPECT_EQ(p->stages[s].time.transfer, plain.stages[s].time.transfer);
    }
  }
  ASSERT_GT(plain.stages[1].time.collectives, Time::zero());
  ASSERT_GT(plain.stages[0].time.transfer, Time::zero());
  constexpr std::int64_t kMicrosecond = 1'000'000;
  for (std::size_t j = 0; j <= n; ++j) {
    kept.positions[1].collectives[j] += static_cast<std::int64_t>(j) * kMicrosecond;
  }
  *kept.exposed_transfers += Time::microseconds(5);
  const Plan edited = detail::evaluate_keeping(profile, choice, oracle, options, &kept);
  EXPECT_EQ(edited.breakdown.transfers, plain.breakdown.transfers + Time::microseconds(5));
  EXPECT_EQ(edited.stages[0].time.collectives, plain.stages[0].time.collectives);
  EXPECT_EQ(edited.stages[1].time.collectives,
            plain.stages[1].time.collectives + Time::microseconds(2));  // layers 1 and 2
  EXPECT_EQ(edited.stages[2].time.collectives, plain.stages[2].time.collectives);
  // Kept for three stages, asked for two: refused.
  PlanChoice two = choice;
  two.boundaries = {0, 2, n};
  try {
    (void)detail::evaluate_keeping(profile, two, oracle, options, &kept);
    ADD_FAILURE() << "kept positions of three stages taken for two";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_NE(std::string(e.what()).find("kept positions of another pipeline depth"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace nest::placer
