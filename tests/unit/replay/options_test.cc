// `--buckets 1000000000` allocated a billion gradient buckets per stage, and the bucket sizes
// (total · (b + 1) / k) overflowed past 2^63 / k bytes (issue 17, defects 3 and 4).
#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"
#include "nest/replay/plan_replay.h"

namespace nest::replay {
namespace {

std::string error_of(const PlanReplayOptions& o) {
  try {
    validate(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(PlanReplayOptions, BucketsHaveARange) {
  EXPECT_EQ(error_of({.gradient_buckets = 1'000'000'000}),
            "--buckets: bucket count out of range (got \"1000000000\"; expected an integer in "
            "[1, 65536])");
  EXPECT_EQ(error_of({.gradient_buckets = 0}),
            "--buckets: bucket count out of range (got \"0\"; expected an integer in [1, 65536])");
  EXPECT_EQ(error_of({.gradient_buckets = kMaxGradientBuckets}), "no error");
}

}  // namespace
}  // namespace nest::replay
