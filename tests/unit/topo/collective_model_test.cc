// Collective models (nest/topo/collective_model.h): the bundled files read as documented, lists
// merge, the switch points pick protocols, and every malformed model is one exact error.

#include "nest/topo/collective_model.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nest/core/error.h"
#include "nest/topo/loader.h"

namespace nest::topo {
namespace {

constexpr const char* kStar =
    "kind: explicit\n"
    "nodes: [{name: a, kind: device}, {name: b, kind: device}, {name: s, kind: switch}]\n"
    "links: [{a: a, b: s, bandwidth: 100 GB/s, latency: 1 us},\n"
    "        {a: b, b: s, bandwidth: 100 GB/s, latency: 1 us}]\n";

std::string load_error(const std::string& text) {
  try {
    (void)load_topology_string(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A folder of model files for the list tests, removed afterwards.
class ModelFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nest-model-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
  std::string topology_with(const std::string& collectives) {
    write("t.yaml", std::string(kStar) + "collectives: " + collectives + "\n");
    return (dir_ / "t.yaml").string();
  }
  std::string error_of(const std::string& collectives) {
    try {
      (void)load_topology(topology_with(collectives));
    } catch (const Error& e) {
      return e.what();
    }
    return "no error";
  }
  std::filesystem::path dir_;
};

TEST(CollectiveModel, BundledNvlink4ReadsItsSourcedFigures) {
  const CollectiveModel m =
      load_collective_model(std::string(NEST_SOURCE_DIR) + "/topologies/collectives/nvlink4.yaml");
  EXPECT_EQ(m.name, "nvlink4");
  const auto& simple = m.protocols[static_cast<std::size_t>(Protocol::kSimple)];
  ASSERT_TRUE(simple.enabled);
  // 20.6 / 25 GB/s per NVLink (NCCL SM90_NVLINK_BW), 3.4 us per step over two links.
  EXPECT_DOUBLE_EQ(simple.links[0]->efficiency, 0.824);
  EXPECT_EQ(*simple.links[0]->latency, Time::nanoseconds(1700));
  EXPECT_FALSE(simple.links[1].has_value());  // the NIC classes come from ndr.yaml
  EXPECT_EQ(m.base_latency(Protocol::kSimple, "allreduce"), Time::nanoseconds(8400));
  ASSERT_TRUE(m.nvls.has_value());
  EXPECT_DOUBLE_EQ(m.nvls->efficiency, 0.85);
  // Switch points: LL up to 2 MiB, LL128 up to 32 MiB, Simple above.
  EXPECT_EQ(m.protocol_for(Bytes(8)), Protocol::kLL);
  EXPECT_EQ(m.protocol_for(Bytes::mebibytes(2)), Protocol::kLL);
  EXPECT_EQ(m.protocol_for(Bytes::mebibytes(2) + Bytes(1)), Protocol::kLL128);
  EXPECT_EQ(m.protocol_for(Bytes::mebibytes(32)), Protocol::kLL128);
  EXPECT_EQ(m.protocol_for(Bytes::mebibytes(32) + Bytes(1)), Protocol::kSimple);
}

TEST(CollectiveModel, BundledTopologiesNameTheirModels) {
  const std::string dir = std::string(NEST_SOURCE_DIR) + "/topologies/";
  const Topology h100 = load_topology(dir + "dgx_h100.yaml");
  ASSERT_NE(h100.collective_model(), nullptr);
  EXPECT_EQ(h100.collective_model()->name, "nvlink4+ndr");
  EXPECT_EQ(h100.collective_model()->sources.size(), 2U);
  EXPECT_TRUE(h100.nvlink_sharp());
  EXPECT_EQ(h100.collective_model()->channels, 8);
  const Topology a100 = load_topology(dir + "dgx_a100.yaml");
  EXPECT_EQ(a100.collective_model()->name, "nvlink3+hdr");
  EXPECT_FALSE(a100.nvlink_sharp());
  const Topology rail = load_topology(dir + "h100_rail_1024.yaml");
  EXPECT_EQ(rail.collective_model()->name, "nvlink4+ndr");
  // A topology without the key runs ideal.
  EXPECT_EQ(load_topology(dir + "fat_tree_k16.yaml").collective_model(), nullptr);
}

TEST(CollectiveModel, InlineModelAndOperationLatencies) {
  const Topology t = load_topology_string(
      std::string(kStar) +
          "collectives:\n"
          "  protocols:\n"
          "    LL: {up_to: 64 KiB, base_latency: {default: 4 us, allreduce: 5 us},\n"
          "         scale_up: {efficiency: 0.5}}\n"
          "    Simple: {base_latency: 10 us, scale_up: {efficiency: 0.9, latency: 2 us}}\n",
      "t.yaml");
  const CollectiveModel& m = *t.collective_model();
  EXPECT_EQ(m.name, "inline");
  EXPECT_EQ(m.base_latency(Protocol::kLL, "allreduce"), Time::microseconds(5));
  EXPECT_EQ(m.base_latency(Protocol::kLL, "all_gather"), Time::microseconds(4));
  EXPECT_EQ(m.base_latency(Protocol::kSimple, "all_gather"), Time::microseconds(10));
  EXPECT_EQ(m.protocol_for(Bytes::kibibytes(64)), Protocol::kLL);
  EXPECT_EQ(m.protocol_for(Bytes::kibibytes(65)), Protocol::kSimple);
  EXPECT_FALSE(m.protocols[1].enabled);
  EXPECT_FALSE(m.channels.has_value());
}

TEST_F(ModelFiles, ListsMergeAndAFieldMayComeFromOneFileOnly) {
  write("up.yaml",
        "kind: collective_model\nprotocols:\n  Simple: {base_latency: 8 us, scale_up: "
        "{efficiency: 0.8}}\n");
  write("out.yaml",
        "kind: collective_model\nchannels: 4\nprotocols:\n  Simple: {nic: {efficiency: 0.95}}\n");
  const Topology t = load_topology(topology_with("[up.yaml, out.yaml]"));
  const CollectiveModel& m = *t.collective_model();
  EXPECT_EQ(m.name, "up+out");
  EXPECT_EQ(m.channels, 4);
  const auto& simple = m.protocols[2];
  EXPECT_DOUBLE_EQ(simple.links[0]->efficiency, 0.8);
  EXPECT_DOUBLE_EQ(simple.links[1]->efficiency, 0.95);
  EXPECT_EQ(*simple.base_latency, Time::microseconds(8));

  write("again.yaml",
        "kind: collective_model\nprotocols:\n  Simple: {scale_up: {efficiency: 1}}\n");
  EXPECT_EQ(error_of("[up.yaml, again.yaml]"),
            (dir_ / "again.yaml").string() +
                ":3: protocols.Simple.scale_up: given by two collective model files (also in " +
                (dir_ / "up.yaml").string() + ") (expected each field in one file of the list)");
  EXPECT_EQ(error_of("missing.yaml"),
            (dir_ / "t.yaml").string() + ":5: collectives: collective model file not found: " +
                (dir_ / "missing.yaml").string() +
                " (got \"missing.yaml\"; expected a kind: collective_model file, relative to the "
                "topology's folder)");
  write("topo.yaml", "kind: torus\n");
  EXPECT_EQ(error_of("topo.yaml"),
            (dir_ / "topo.yaml").string() +
                ":1: kind: unknown value (got \"torus\"; expected one of collective_model)");
}

TEST(CollectiveModel, MalformedModelsAreOneLineErrors) {
  const std::string head = std::string(kStar) + "collectives:\n  protocols:\n";
  EXPECT_EQ(
      load_error(head + "    LL: {up_to: 1 MiB}\n    Simple: {scale_up: {efficiency: 1.5}}\n"),
      "t.yaml:8: collectives.protocols.Simple.scale_up.efficiency: out of range (got "
      "\"1.5\"; expected a number in [0, 1])");
  EXPECT_EQ(load_error(head + "    Simple: {scale_up: {efficiency: 0}}\n"),
            "t.yaml:7: collectives.protocols.Simple.scale_up.efficiency: efficiency must be "
            "positive (got \"0\"; expected a fraction in (0, 1])");
  EXPECT_EQ(load_error(head + "    Simple: {}\n    LL: {up_to: 1 MiB}\n"),
            "t.yaml:8: collectives.protocols.LL: protocols out of order (expected LL, LL128, "
            "Simple in this order)");
  EXPECT_EQ(load_error(head + "    LL: {}\n    Simple: {}\n"),
            "t.yaml:6: collectives: protocol LL needs a switch point (expected up_to: SIZE on "
            "every protocol but the last)");
  EXPECT_EQ(load_error(head + "    Simple: {up_to: 1 MiB}\n"),
            "t.yaml:6: collectives: the last protocol (Simple) must take every larger size "
            "(expected no up_to on the last protocol)");
  EXPECT_EQ(
      load_error(head + "    LL: {up_to: 1 MiB}\n    LL128: {up_to: 1 MiB}\n    Simple: {}\n"),
      "t.yaml:6: collectives: switch points must increase (LL128 up_to) (expected each "
      "up_to above the previous protocol's)");
  EXPECT_EQ(load_error(head + "    Fast: {}\n"),
            "t.yaml:7: collectives.protocols.Fast: unknown protocol Fast (expected LL, LL128 or "
            "Simple)");
  EXPECT_EQ(load_error(head + "    Simple: {base_latency: {allgather: 1 us}}\n"),
            "t.yaml:7: collectives.protocols.Simple.base_latency.allgather: unknown operation "
            "allgather (got \"1 us\"; expected default, allreduce, reduce_scatter, all_gather, "
            "all_to_all, broadcast, send, reduce, gather, scatter, sendrecv)");
  EXPECT_EQ(load_error(head + "    Simple: {nvlink: {efficiency: 1}}\n"),
            "t.yaml:7: collectives.protocols.Simple.nvlink: unknown key \"nvlink\" (expected one "
            "of up_to, base_latency, scale_up, nic, fabric)");
  EXPECT_EQ(load_error(std::string(kStar) + "collectives: {channels: 2}\n"),
            "t.yaml:5: collectives: a collective model needs at least one protocol (expected "
            "protocols: with LL, LL128 or Simple)");
  EXPECT_EQ(load_error(std::string(kStar) + "nvlink_sharp: maybe\n"),
            "t.yaml:5: nvlink_sharp: not a boolean (got \"maybe\"; expected true or false)");
}

}  // namespace
}  // namespace nest::topo
