// The intra-layer configurations the search may use, and fixing any of their dimensions.

#include "nest/placer/variants.h"

#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"
#include "nest/workload/model.h"

namespace nest::placer {
namespace {

workload::Model gpt3() {
  return workload::load_model(std::string(NEST_SOURCE_DIR) + "/workloads/models/gpt3-175b.yaml");
}

TEST(CandidateConfigs, PowersOfTwoWithSequenceParallelismByDefault) {
  const auto configs = candidate_configs(gpt3(), {}, {.micro_batches = {1}});
  ASSERT_EQ(configs.size(), 4u);  // t = 1, 2, 4, 8
  EXPECT_EQ(configs[3].tensor, 8);
  EXPECT_TRUE(configs[3].sequence);
  EXPECT_FALSE(configs[0].sequence);
}

TEST(CandidateConfigs, FixedDimensionsLeaveOneConfiguration) {
  const auto configs = candidate_configs(
      gpt3(), {}, {.micro_batches = {2}, .tensor_parallel = {6}, .sequence_parallel = false});
  ASSERT_EQ(configs.size(), 1u);
  EXPECT_EQ(configs[0].tensor, 6);  // 96 heads: any divisor, not only powers of two
  EXPECT_FALSE(configs[0].sequence);
  EXPECT_EQ(configs[0].micro_batch, 2);
}

TEST(CandidateConfigs, AnImpossibleFixedConfigurationSaysWhy) {
  try {
    (void)candidate_configs(gpt3(), {}, {.micro_batches = {1}, .tensor_parallel = {7}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "tensor_parallel: attention heads not divisible by the tensor-parallel degree "
                 "(got \"7\"; expected a divisor of 96 (heads))");
  }
}

}  // namespace
}  // namespace nest::placer
