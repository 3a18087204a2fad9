#include "nest/workload/catalog.h"

#include <gtest/gtest.h>

#include <functional>

#include "nest/core/error.h"
#include "nest/workload/accelerator.h"

namespace nest::workload {
namespace {

const std::vector<std::string> kRoots = {"/nonexistent", NEST_SOURCE_DIR};
const std::string kDir = std::string(NEST_SOURCE_DIR) + "/workloads/";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Catalog, ListsTheShippedFilesSorted) {
  EXPECT_EQ(list_workloads(WorkloadKind::kAccelerator, kRoots),
            (std::vector<std::string>{"a100-80gb", "b200", "h100-sxm", "tpuv4"}));
  EXPECT_EQ(list_workloads(WorkloadKind::kProfile, kRoots),
            (std::vector<std::string>{"gpt3-175b-h100", "gpt3-175b-tpuv4"}));
  EXPECT_TRUE(list_workloads(WorkloadKind::kModel, {"/nonexistent"}).empty());
}

TEST(Catalog, FindsByExactNameUniquePrefixOrPath) {
  EXPECT_EQ(find_workload_file(WorkloadKind::kAccelerator, "h100-sxm", kRoots),
            kDir + "accelerators/h100-sxm.yaml");
  EXPECT_EQ(find_workload_file(WorkloadKind::kAccelerator, "h100", kRoots),
            kDir + "accelerators/h100-sxm.yaml");
  EXPECT_EQ(find_workload_file(WorkloadKind::kModel, "llama3-70b", kRoots),
            kDir + "models/llama3-70b.yaml");
  const std::string path = kDir + "models/bert-large.yaml";
  EXPECT_EQ(find_workload_file(WorkloadKind::kModel, path, kRoots), path);
}

TEST(Catalog, UnknownAndAmbiguousNamesListTheCandidates) {
  EXPECT_EQ(error_of([] { (void)find_workload_file(WorkloadKind::kModel, "llama3", kRoots); }),
            "model: ambiguous model name (got \"llama3\"; expected one of llama3-70b, "
            "llama3.1-405b)");
  EXPECT_EQ(error_of([] { (void)find_workload_file(WorkloadKind::kAccelerator, "v5e", kRoots); }),
            "accelerator: unknown accelerator (got \"v5e\"; expected one of a100-80gb, b200, "
            "h100-sxm, tpuv4, or the path of a YAML file)");
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
