#include "nest/sweep/study.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include "nest/config/node.h"
#include "nest/core/error.h"

namespace nest::sweep {
namespace {

// A folder with the (empty) workload files a study may name.
class StudyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nest_study_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "profile.yaml") << "kind: layer_profile\n";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Study parse(const std::string& text) { return parse_study(text, "s.yaml", dir_); }
  std::string error_of(const std::string& text) {
    try {
      (void)parse(text);
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }

  std::filesystem::path dir_;
};

constexpr const char* kHead = R"(kind: study
name: t
topologies:
  rail:
    kind: rail_optimized
    gpus_per_node: 8
    nodes_per_leaf: 4
    spines: 2
    nvlink_bandwidth: 450 GB/s
    nvlink_latency: 1 us
    nic_bandwidth: 50 GB/s
    nic_latency: 2 us
    spine_bandwidth: 50 GB/s
    spine_latency: 2 us
  tree:
    kind: fat_tree
    link_bandwidth: 50 GB/s
    link_latency: 1 us
workloads:
  w:
    profile: profile.yaml
defaults:
  topology: rail
)";

TEST_F(StudyTest, ProductVariesTheLastAxisFastest) {
  const Study s = parse(std::string(kHead) + R"(sweep:
  product:
    devices: [64, 128]
    topology.nic_bandwidth: [12.5 GB/s, 25 GB/s, 50 GB/s]
)");
  ASSERT_EQ(s.points.size(), 6U);
  EXPECT_EQ(s.name, "t");
  const std::vector<std::string> columns = {"topology", "workload",
                                            "devices",  "rules",
                                            "replay",   "spine_oversubscription",
                                            "seed",     "topology.nic_bandwidth"};
  EXPECT_EQ(s.input_columns, columns);
  EXPECT_EQ(s.points[1].index, 1U);
  EXPECT_EQ(*s.points[1].devices, 64);
  ASSERT_EQ(s.points[1].topology_overrides.size(), 1U);
  EXPECT_EQ(s.points[1].topology_overrides[0].second.text(), "25 GB/s");
  EXPECT_EQ(*s.points[3].devices, 128);
  EXPECT_EQ(s.points[3].topology_overrides[0].second.text(), "12.5 GB/s");
  const std::vector<std::string> inputs = {"rail",  "w", "128", "megatron",
                                           "false", "",  "0",   "12.5 GB/s"};
  EXPECT_EQ(s.points[3].inputs, inputs);
}

TEST_F(StudyTest, ExplicitPointsTakeDefaultsAndAddColumnsInFirstUseOrder) {
  const Study s = parse(std::string(kHead) + R"(sweep:
  points:
    - {devices: 64, replay: true}
    - {topology: tree, topology.k: 4, rules: nest-artifact}
    - {topology.link_latency: 2 us, topology: tree, seed: 7}
)");
  ASSERT_EQ(s.points.size(), 3U);
  ASSERT_EQ(s.input_columns.size(), 9U);
  EXPECT_EQ(s.input_columns[7], "topology.k");
  EXPECT_EQ(s.input_columns[8], "topology.link_latency");
  const std::vector<std::string> p0 = {"rail", "w", "64", "megatron", "true", "", "0", "", ""};
  EXPECT_EQ(s.points[0].inputs, p0);
  // The tree's own link_latency shows in the column where a point does not override it.
  const std::vector<std::string> p1 = {"tree", "w", "",  "nest-artifact", "false",
                                       "",     "0", "4", "1 us"};
  EXPECT_EQ(s.points[1].inputs, p1);
  EXPECT_EQ(s.points[1].rules, workload::MemoryRules::kNestArtifact);
  const std::vector<std::string> p2 = {"tree", "w", "", "megatron", "false", "", "7", "", "2 us"};
  EXPECT_EQ(s.points[2].inputs, p2);
  EXPECT_EQ(s.points[2].seed, 7U);
}

TEST_F(StudyTest, DevicesSizeTheGeneratorWhenItsSizeIsNotGiven) {
  const Study s = parse(std::string(kHead) + R"(sweep:
  points:
    - {devices: 1000}
    - {topology: tree, devices: 100}
    - {topology: tree, devices: 100, topology.devices_per_host: 4}
    - {devices: 64, topology.nodes: 16}
)");
  auto param = [&](std::size_t point, const std::string& key) {
    for (const auto& [k, v] : topology_parameters(s, s.points[point])) {
      if (k == key) return v.text();
    }
    return std::string("absent");
  };
  EXPECT_EQ(param(0, "nodes"), "125");  // ceil(1000 / 8)
  EXPECT_EQ(param(1, "k"), "8");        // 6^3/4 = 54 < 100 <= 8^3/4 = 128
  EXPECT_EQ(param(2, "k"), "6");        // 4^3/4·4 = 64 < 100 <= 6^3/4·4 = 216
  EXPECT_EQ(param(3, "nodes"), "16");   // given: the topology is fixed, 64 is only the budget
}

TEST_F(StudyTest, SpineOversubscriptionSetsTheUplinkRate) {
  const Study s = parse(std::string(kHead) + R"(sweep:
  points:
    - {spine_oversubscription: 2}
    - {topology: tree, spine_oversubscription: 4}
)");
  // 4 nodes per leaf · 50 GB/s down against 2 spines · x up, at 2:1: x = 50 GB/s.
  const auto rail = topology_parameters(s, s.points[0]);
  bool found = false;
  for (const auto& [k, v] : rail) {
    if (k == "spine_bandwidth") {
      EXPECT_EQ(v.text(), "50000000000 B/s");
      found = true;
    }
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(s.points[0].inputs[5], "2");
  const auto tree = topology_parameters(s, s.points[1]);
  ASSERT_EQ(tree.back().first, "aggregation_oversubscription");
  EXPECT_EQ(tree.back().second.text(), "4");
}

TEST_F(StudyTest, TopologyYamlQuotesEveryScalar) {
  std::vector<Parameter> params = {{"dims", Value{{"4", "2"}, true, 0}},
                                   {"link_bandwidth", Value::scalar("50 GB/s")}};
  EXPECT_EQ(topology_yaml("torus", "t\"1", params),
            "kind: torus\nname: \"t\\\"1\"\ndims: [\"4\", \"2\"]\nlink_bandwidth: \"50 GB/s\"\n");
}

TEST_F(StudyTest, MalformedStudiesFailNamingFileLineAndKey) {
  // kHead is 23 lines; the tails start at line 24.
  const std::string head(kHead);
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sweep:\n  product:\n    device: [1]\n",
       "s.yaml:26: sweep.product.device[0]: unknown axis \"device\" (got \"1\"; expected one of "
       "topology, workload, devices, rules, replay, spine_oversubscription, seed, "
       "topology.<parameter>, tp, pp, dp, vp, zero, recompute, order)"},
      {"sweep:\n  product:\n    topology.k: [4]\n",
       "s.yaml:26: sweep.product.topology.k: not a parameter of rail_optimized topology \"rail\" "
       "(expected one of nodes, gpus_per_node, nodes_per_leaf, spines, nvlink_bandwidth, "
       "nvlink_latency, nic_bandwidth, nic_latency, spine_bandwidth, spine_latency)"},
      {"sweep:\n  points:\n    - {topology: tree, topology.nodes: 4}\n",
       "s.yaml:26: sweep.points[0].topology.nodes: not a parameter of fat_tree topology \"tree\" "
       "(expected one of k, link_bandwidth, link_latency, edge_oversubscription, "
       "aggregation_oversubscription, devices_per_host, scale_up_bandwidth, scale_up_latency)"},
      {"sweep:\n  points:\n    - {workload: x}\n",
       "s.yaml:26: sweep.points[0].workload: unknown name (got \"x\"; expected one of w)"},
      {"sweep:\n  product:\n    devices: [1]\n    devices: [2]\n",
       "s.yaml:27: sweep.product.devices: duplicate key \"devices\" (expected each key once in a "
       "map)"},
      {"sweep:\n  product:\n    devices: []\n",
       "s.yaml:26: sweep.product.devices: empty list (expected at least one value)"},
      {"sweep:\n  product:\n    devices: [0]\n",
       "s.yaml:26: sweep.product.devices[0]: out of range (got \"0\"; expected an integer in [1, "
       "16777216])"},
      {"sweep:\n  product:\n    rules: [fast]\n",
       "s.yaml:26: sweep.product.rules[0]: unknown value (got \"fast\"; expected one of megatron, "
       "nest-artifact)"},
      {"sweep:\n  points:\n    - {spine_oversubscription: 2, topology.spine_bandwidth: 1 GB/s}\n",
       "s.yaml:26: sweep.points[0]: spine_oversubscription sets topology.spine_bandwidth: sweep "
       "one or the other (expected not both)"},
      {"sweep:\n  points:\n    - {topology: tree, spine_oversubscription: 2, devices: 8}\n"
       "    - {topology: rail, topology.k: 4}\n",
       "s.yaml:27: sweep.points[1].topology.k: not a parameter of rail_optimized topology "
       "\"rail\" (expected one of nodes, gpus_per_node, nodes_per_leaf, spines, nvlink_bandwidth, "
       "nvlink_latency, nic_bandwidth, nic_latency, spine_bandwidth, spine_latency)"},
      {"sweep: {}\n",
       "s.yaml:24: sweep: expected exactly one of product and points (expected product: or "
       "points:)"},
      {"sweeps: {}\n",
       "s.yaml:24: sweeps: unknown key \"sweeps\" (expected one of kind, name, topologies, "
       "workloads, placer, defaults, sweep, description)"},
      {"placer: {baselines: [manual, annealing]}\nsweep: {points: [{}]}\n",
       "s.yaml:24: placer.baselines[1]: unknown value (got \"annealing\"; expected one of manual, "
       "topology-agnostic, anneal)"},
      {"placer: {orders: [tp-xx]}\nsweep: {points: [{}]}\n",
       "s.yaml:24: placer.orders[0]: unknown placement order (got \"tp-xx\"; expected one of "
       "tp-pp-dp tp-dp-pp pp-tp-dp pp-dp-tp dp-tp-pp dp-pp-tp)"},
  };
  for (const auto& [tail, message] : cases) EXPECT_EQ(error_of(head + tail), message) << tail;
}

TEST_F(StudyTest, MissingWorkloadFilesFailBeforeAnyWork) {
  EXPECT_EQ(error_of("kind: study\ntopologies: {t: {kind: torus}}\nworkloads:\n"
                     "  w: {profile: nowhere.yaml}\nsweep: {points: [{}]}\n"),
            "s.yaml:4: workloads.w.profile: no such file (got \"nowhere.yaml\"; expected a "
            "readable file (paths are relative to the study file) or a bundled name)");
  // A bare name is looked up among the bundled files, and an unknown one lists them.
  EXPECT_EQ(error_of("kind: study\ntopologies: {t: {kind: torus}}\nworkloads:\n"
                     "  w: {model: gpt9, accelerator: h100}\nsweep: {points: [{}]}\n")
                .substr(0, 62),
            "s.yaml:4: workloads.w.model: unknown model (got \"gpt9\"; expect");
  EXPECT_EQ(error_of("kind: topology\n"),
            "s.yaml:1: kind: not a study file (got \"topology\"; expected kind: study)");
}

// The parameter names a study accepts for `topology.<parameter>` are the ones the topology files
// use: every key of every bundled generated topology is known for its kind.
TEST(GeneratorParameters, CoverTheKeysOfTheBundledTopologies) {
  int checked = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(NEST_SOURCE_DIR) + "/topologies")) {
    if (!entry.is_regular_file()) continue;  // topologies/collectives/: collective models
    const config::Node root = config::Node::load_file(entry.path().string());
    const std::string kind = root.at("kind").as_string();
    if (kind == "explicit") continue;
    const auto known = generator_parameters(kind);
    ASSERT_FALSE(known.empty()) << kind;
    for (const auto& [key, value] : root.entries()) {
      // The collective model and NVLink SHARP are no generator parameters: a study takes a
      // topology that has them as {file: ...}.
      if (key == "kind" || key == "name" || key == "description" || key == "collectives" ||
          key == "nvlink_sharp") {
        continue;
      }
      EXPECT_NE(std::find(known.begin(), known.end(), key), known.end())
          << entry.path() << ": " << key;
    }
    ++checked;
  }
  EXPECT_GE(checked, 5);
  EXPECT_TRUE(generator_parameters("mesh").empty());
}

}  // namespace
}  // namespace nest::sweep

namespace nest::sweep {
namespace {

// gpus_per_node: 1e-300 made devices / gpus_per_node a double past int64 that was cast anyway
// (undefined), and a tiny devices_per_host made the fat-tree sizing loop run forever.
TEST_F(StudyTest, DerivedSizesPastTheNodeLimitAreThePointsErrors) {
  const Study s = parse(std::string(kHead) + R"(sweep:
  points:
    - {devices: 1024, topology.gpus_per_node: 1e-300}
    - {devices: 1024, topology: tree, topology.devices_per_host: 1e-300}
)");
  const auto error = [&](std::size_t point) {
    try {
      (void)topology_parameters(s, s.points[point]);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error(0),
            "topology.nodes: the device budget needs too large a topology (got \"1.024e+303\"; "
            "expected at most 16777216)");
  EXPECT_EQ(error(1),
            "topology.k: the device budget needs too large a fat-tree (got \"1024 devices\"; "
            "expected a budget that k <= 1024 holds)");
}

}  // namespace
}  // namespace nest::sweep
