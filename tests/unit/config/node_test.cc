#include "nest/config/node.h"

#include <gtest/gtest.h>

namespace nest::config {
namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(ConfigNode, ReadsTypedValuesWithUnits) {
  const Node n = Node::load_string("a: 3\nb: 400 Gb/s\nc: 1.5 us\nd: 80 GiB\ne: true\n", "t.yaml");
  EXPECT_EQ(n.at("a").as_int(), 3);
  EXPECT_DOUBLE_EQ(n.at("b").as_bandwidth().bytes_per_s(), 50e9);
  EXPECT_EQ(n.at("c").as_time().ps(), 1'500'000);
  EXPECT_EQ(n.at("d").as_bytes().count(), 80LL << 30);
  EXPECT_TRUE(n.at("e").as_bool());
}

TEST(ConfigNode, UnknownKeyNamesFileLineAndAcceptedKeys) {
  const Node n = Node::load_string("kind: torus\nshape: [2, 2]\nbandwdith: 1 GB/s\n", "t.yaml");
  EXPECT_EQ(error_of([&] {
              n.expect_keys({"kind", "shape", "bandwidth"});
            }),
            "t.yaml:3: bandwdith: unknown key \"bandwdith\" (expected one of kind, shape, "
            "bandwidth)");
}

TEST(ConfigNode, MissingKey) {
  const Node n = Node::load_string("x:\n  y: 1\n", "t.yaml");
  EXPECT_EQ(error_of([&] { (void)n.at("x").at("z"); }), "t.yaml:2: x: missing required key \"z\"");
}

TEST(ConfigNode, MissingUnitNamesThePath) {
  const Node n = Node::load_string("links:\n  - {a: s0, bandwidth: 400}\n", "t.yaml");
  EXPECT_EQ(error_of([&] { (void)n.at("links").elements()[0].at("bandwidth").as_bandwidth(); }),
            "t.yaml:2: links[0].bandwidth: missing unit (got \"400\"; expected a bandwidth like "
            "\"400 GB/s\" or \"400 Gb/s\" (B/s, KB/s, MB/s, GB/s, TB/s, KiB/s, ..., b/s, Kb/s, "
            "Mb/s, Gb/s, Tb/s, Gbps))");
}

TEST(ConfigNode, NegativeBandwidthIsRejected) {
  const Node n = Node::load_string("bw: -5 GB/s\n", "t.yaml");
  EXPECT_EQ(error_of([&] { (void)n.at("bw").as_bandwidth(); }).rfind("t.yaml:1: bw: negative", 0),
            0u);
}

TEST(ConfigNode, IntegerRangeAndType) {
  const Node n = Node::load_string("k: 3.5\nm: 0\n", "t.yaml");
  EXPECT_EQ(error_of([&] { (void)n.at("k").as_int(1, 64); }),
            "t.yaml:1: k: not an integer (got \"3.5\"; expected an integer in [1, 64])");
  EXPECT_EQ(error_of([&] { (void)n.at("m").as_int(1, 64); }),
            "t.yaml:2: m: out of range (got \"0\"; expected an integer in [1, 64])");
}

TEST(ConfigNode, MalformedYamlNamesTheLine) {
  EXPECT_EQ(error_of([] {
              (void)Node::load_string("a: [1, 2\nb: 3\n", "bad.yaml");
            }).rfind("bad.yaml:", 0),
            0u);
}

TEST(ConfigNode, ChoiceListsTheOptions) {
  const Node n = Node::load_string("kind: ring\n", "t.yaml");
  EXPECT_EQ(error_of([&] {
              (void)n.at("kind").as_choice({"torus", "fat_tree"});
            }),
            "t.yaml:1: kind: unknown value (got \"ring\"; expected one of torus, fat_tree)");
}

TEST(ConfigNode, MissingFile) {
  EXPECT_EQ(
      error_of([] { (void)Node::load_file("/nonexistent/x.yaml"); }),
      "/nonexistent/x.yaml: cannot open file: No such file or directory (expected a readable YAML "
      "file)");
}

}  // namespace
}  // namespace nest::config
