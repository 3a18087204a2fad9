#include "nest/core/catalog.h"

#include <gtest/gtest.h>

#include <functional>

#include "nest/core/error.h"

namespace nest {
namespace {

const Catalog kCatalog({"/nonexistent", NEST_SOURCE_DIR});
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
  EXPECT_EQ(kCatalog.list(DataKind::kAccelerator),
            (std::vector<std::string>{"a100-80gb", "b200", "h100-sxm", "tpuv4"}));
  EXPECT_EQ(kCatalog.list(DataKind::kProfile),
            (std::vector<std::string>{"gpt3-175b-h100", "gpt3-175b-tpuv4"}));
  EXPECT_TRUE(Catalog({"/nonexistent"}).list(DataKind::kModel).empty());
}

TEST(Catalog, FindsByExactNameUniquePrefixOrPath) {
  EXPECT_EQ(kCatalog.find(DataKind::kAccelerator, "h100-sxm"), kDir + "accelerators/h100-sxm.yaml");
  EXPECT_EQ(kCatalog.find(DataKind::kAccelerator, "h100"), kDir + "accelerators/h100-sxm.yaml");
  EXPECT_EQ(kCatalog.find(DataKind::kModel, "llama3-70b"), kDir + "models/llama3-70b.yaml");
  const std::string path = kDir + "models/bert-large.yaml";
  EXPECT_EQ(kCatalog.find(DataKind::kModel, path), path);
}

TEST(Catalog, UnknownAndAmbiguousNamesListTheCandidates) {
  EXPECT_EQ(error_of([] { (void)kCatalog.find(DataKind::kModel, "llama3"); }),
            "model: ambiguous model name (got \"llama3\"; expected one of llama3-70b, "
            "llama3.1-405b)");
  EXPECT_EQ(error_of([] { (void)kCatalog.find(DataKind::kAccelerator, "v5e"); }),
            "accelerator: unknown accelerator (got \"v5e\"; expected one of a100-80gb, b200, "
            "h100-sxm, tpuv4, or the path of a YAML file)");
}

TEST(Catalog, TopologiesAndPathsAndOrderOfRoots) {
  EXPECT_EQ(kCatalog.find(DataKind::kTopology, "h100_rail_1024"),
            std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_1024.yaml");
  // What looks like a path is left to its loader, which names the missing file.
  EXPECT_EQ(kCatalog.find(DataKind::kTopology, "nowhere/x.yaml"), "nowhere/x.yaml");
  EXPECT_EQ(kCatalog.find(DataKind::kTopology, "x.yaml"), "x.yaml");
  EXPECT_EQ(kCatalog.find(DataKind::kStudy, "example"),
            std::string(NEST_SOURCE_DIR) + "/studies/example.yaml");
  EXPECT_EQ(error_of([] {
              (void)kCatalog.find(DataKind::kTopology, "h200", "--topology");
            }).substr(0, 40),
            "--topology: unknown topology (got \"h200\"");
  EXPECT_EQ(kCatalog.locate("workloads/models"), std::filesystem::path(NEST_SOURCE_DIR));
  EXPECT_TRUE(Catalog({"/nonexistent"}).locate("workloads").empty());
}

}  // namespace
}  // namespace nest
