#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "nest/core/error.h"
#include "nest/workload/accelerator.h"

namespace nest::workload {
namespace {

const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(AcceleratorFile, ReadsPeaksAndEfficiencies) {
  const Accelerator a = load_accelerator(kDir + "accelerators/tpuv4.yaml");
  EXPECT_EQ(a.name, "tpuv4");
  EXPECT_DOUBLE_EQ(a.peak_for("bf16").flops_per_s(), 275e12);
  EXPECT_EQ(a.hbm.count(), 32LL << 30);
  EXPECT_DOUBLE_EQ(a.hbm_bandwidth.bytes_per_s(), 1.2e12);
  EXPECT_DOUBLE_EQ(a.vector_rate.flops_per_s(), 0);
  EXPECT_DOUBLE_EQ(a.gemm_efficiency, 0.8);
  const Accelerator b = load_accelerator(kDir + "accelerators/b200.yaml");
  EXPECT_DOUBLE_EQ(b.peak_for("fp8").flops_per_s(), 4500e12);
  EXPECT_EQ(b.hbm.count(), 180'000'000'000);
}

TEST(AcceleratorFile, RejectsAMissingEfficiency) {
  EXPECT_EQ(error_of([] {
              (void)parse_accelerator(
                  "kind: accelerator\nname: x\npeak_flop_rate: {bf16: 1 TFLOP/s}\nhbm: 1 GiB\n"
                  "hbm_bandwidth: 1 TB/s\nefficiency: {gemm: 0.5}\n",
                  "x.yaml");
            }),
            "x.yaml:6: efficiency: missing required key \"memory\"");
}

}  // namespace
}  // namespace nest::workload
