#include "nest/workload/memory.h"

#include <gtest/gtest.h>

#include "nest/core/error.h"

namespace nest::workload {
namespace {

// Three layers with round numbers so that every figure below can be checked by hand.
Variant three_layers() {
  Variant v;
  v.layers.push_back(Layer{.name = "embedding",
                           .parameter_bytes = Bytes(1000),
                           .parameters = 500,
                           .activation_bytes = Bytes(300),
                           .input_bytes = Bytes(8)});
  for (int i = 0; i < 2; ++i) {
    v.layers.push_back(Layer{.name = "block",
                             .parameter_bytes = Bytes(2000),
                             .parameters = 1000,
                             .activation_bytes = Bytes(700),
                             .input_bytes = Bytes(50)});
  }
  return v;
}

TEST(Recompute, NamesRoundTripAndTheOlderBooleansStillParse) {
  for (const Recompute m : {Recompute::kNone, Recompute::kSelective, Recompute::kFull}) {
    EXPECT_EQ(parse_recompute(to_string(m)), m);
  }
  EXPECT_EQ(to_string(Recompute::kSelective), "selective");
  EXPECT_EQ(parse_recompute("true"), Recompute::kFull);
  EXPECT_EQ(parse_recompute("false"), Recompute::kNone);
  try {
    (void)parse_recompute("on");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "recompute: unknown recomputation mode (got \"on\"; expected none, selective or "
                 "full)");
  }
}

TEST(StageMemory, NestArtifactWithRecomputeStashesTheFirstLayersInput) {
  const Variant v = three_layers();
  const MemoryOptions o{.rules = MemoryRules::kNestArtifact, .recompute = Recompute::kFull};
  // Layers 1..2: P = 4000, A = 1400; const = 2·4000 + 1400 = 9400; stash = 50.
  const StageMemory m = stage_memory(v, 1, 3, 4, o);
  EXPECT_EQ(m.weights.count(), 4000);
  EXPECT_EQ(m.gradients.count(), 4000);
  EXPECT_EQ(m.optimizer.count(), 0);
  EXPECT_EQ(m.activations.count(), 1400 + 3 * 50);
  EXPECT_EQ(m.total().count(), 9400 + 3 * 50);
  // Starting at the embedding, the stash is the embedding's input (8 bytes).
  EXPECT_EQ(stage_memory(v, 0, 3, 4, o).total().count(), 2 * 5000 + 1700 + 3 * 8);
}

TEST(StageMemory, NestArtifactWithoutRecomputeStashesAllActivations) {
  const Variant v = three_layers();
  const MemoryOptions o{.rules = MemoryRules::kNestArtifact, .recompute = Recompute::kNone};
  EXPECT_EQ(stage_memory(v, 1, 3, 4, o).total().count(), 2 * 4000 + 1400 + 3 * 1400);
  EXPECT_EQ(stage_memory(v, 1, 3, 1, o).total().count(), 2 * 4000 + 1400);
}

TEST(StageMemory, MegatronCountsSixteenBytesPerParameterWithoutZero) {
  const Variant v = three_layers();
  const StageMemory m = stage_memory(v, 1, 3, 3, MemoryOptions{});
  EXPECT_EQ(m.weights.count(), 2 * 2000);
  EXPECT_EQ(m.gradients.count(), 2 * 2000);
  EXPECT_EQ(m.optimizer.count(), 12 * 2000);
  EXPECT_EQ(m.activations.count(), 3 * 1400);
  EXPECT_EQ(m.total().count(), 16 * 2000 + 3 * 1400);
}

TEST(StageMemory, MegatronZeroStagesShardOptimizerThenGradientsThenWeights) {
  const Variant v = three_layers();
  // 1500 parameters over d = 7: 12·1500/7 = 2571.4 -> 2572, 2·1500/7 = 428.6 -> 429.
  MemoryOptions o{.zero_stage = 1, .data_parallel = 7};
  StageMemory m = stage_memory(v, 0, 2, 1, o);
  EXPECT_EQ(m.weights.count(), 3000);
  EXPECT_EQ(m.gradients.count(), 3000);
  EXPECT_EQ(m.optimizer.count(), 2572);
  o.zero_stage = 2;
  m = stage_memory(v, 0, 2, 1, o);
  EXPECT_EQ(m.weights.count(), 3000);
  EXPECT_EQ(m.gradients.count(), 429);
  o.zero_stage = 3;
  m = stage_memory(v, 0, 2, 1, o);
  EXPECT_EQ(m.weights.count(), 429);
  EXPECT_EQ(m.gradients.count(), 429);
  EXPECT_EQ(m.optimizer.count(), 2572);
}

TEST(StageMemory, MegatronRecomputeKeepsInputsOfEveryInFlightMicrobatchPlusOneLayer) {
  const Variant v = three_layers();
  const MemoryOptions o{.recompute = Recompute::kFull};
  // in_flight 5 × (8 + 50 + 50) inputs + the largest layer's activations (700).
  EXPECT_EQ(stage_memory(v, 0, 3, 5, o).activations.count(), 5 * 108 + 700);
}

TEST(StageMemory, MegatronSelectiveKeepsAllButTheAttentionCoresPlusOneCore) {
  Variant v = three_layers();
  v.layers[0].selective_activation_bytes = v.layers[0].activation_bytes;  // no core
  for (int i = 1; i < 3; ++i) v.layers[i].selective_activation_bytes = Bytes(400);
  const MemoryOptions o{.recompute = Recompute::kSelective};
  // in_flight 5 × (300 + 400 + 400) kept + the largest core recomputed at once (700 − 400).
  EXPECT_EQ(stage_memory(v, 0, 3, 5, o).activations.count(), 5 * 1100 + 300);
}

TEST(StageMemory, MegatronFallsBackToTwoBytesPerParameterWhenCountIsUnknown) {
  Variant v = three_layers();
  v.layers[1].parameters = 0;  // 2000 bytes -> 1000 parameters
  EXPECT_EQ(stage_memory(v, 1, 2, 1, MemoryOptions{}).optimizer.count(), 12 * 1000);
}

TEST(StageMemory, RejectsBadRangesAndOptions) {
  const Variant v = three_layers();
  EXPECT_THROW((void)stage_memory(v, 2, 2, 1, MemoryOptions{}), Error);
  EXPECT_THROW((void)stage_memory(v, 0, 4, 1, MemoryOptions{}), Error);
  EXPECT_THROW((void)stage_memory(v, 0, 1, 0, MemoryOptions{}), Error);
  try {
    (void)stage_memory(v, 0, 1, 1, MemoryOptions{.zero_stage = 4});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "zero_stage: invalid ZeRO stage (got \"4\"; expected 0, 1, 2 or 3)");
    EXPECT_EQ(e.exit_status(), 2);
  }
}

}  // namespace
}  // namespace nest::workload
