// Ranges of the sweep's options (issue 17, defect 4): `nest sweep --threads 40000` aborted
// (SIGABRT) in the thread pool's constructor.
#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"
#include "nest/sweep/runner.h"

namespace nest::sweep {
namespace {

std::string error_of(const SweepOptions& o) {
  try {
    validate(o);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(SweepOptions, ThreadsHaveARange) {
  EXPECT_EQ(error_of({.threads = 40000}),
            "--threads: thread count out of range (got \"40000\"; expected an integer in [1, "
            "1024])");
  EXPECT_EQ(error_of({.threads = 0}),
            "--threads: thread count out of range (got \"0\"; expected an integer in [1, 1024])");
  EXPECT_EQ(error_of({.threads = kMaxThreads}), "no error");
}

}  // namespace
}  // namespace nest::sweep
