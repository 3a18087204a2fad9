// Sizes before building (issue 17, defect 4): a 12-line file asked for 32-67 M links and ended
// in bad_alloc or the OOM killer; node counts that truncated to 32 bits slipped past the node
// limit and started building billions of devices.
#include "nest/topo/size.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "nest/core/error.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"

namespace nest::topo {
namespace {

const Bandwidth kBw = Bandwidth::gigabytes_per_second(50);
const Time kLat = Time::microseconds(1);

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput) << e.what();
    return e.what();
  }
  return "(no error)";
}

void expect_counts(const TopologySize& s, const Topology& t) {
  EXPECT_EQ(s.devices, static_cast<std::int64_t>(t.num_devices())) << t.name();
  EXPECT_EQ(s.switches, static_cast<std::int64_t>(t.num_switches())) << t.name();
  EXPECT_EQ(s.cables, static_cast<std::int64_t>(t.num_cables())) << t.name();
}

// The oracle: the counts of what the generators build.
TEST(TopologySize, EqualsWhatEachGeneratorBuilds) {
  for (const int d : {1, 4}) {
    const FatTreeParams p{.k = 8,
                          .link_bandwidth = kBw,
                          .link_latency = kLat,
                          .devices_per_host = d,
                          .scale_up_bandwidth = kBw,
                          .scale_up_latency = kLat};
    expect_counts(size_of(p), build_fat_tree(p));
  }
  const SpineLeafParams sl{.leaves = 6,
                           .spines = 3,
                           .hosts_per_leaf = 5,
                           .host_bandwidth = kBw,
                           .host_latency = kLat,
                           .uplink_bandwidth = kBw,
                           .uplink_latency = kLat};
  expect_counts(size_of(sl), build_spine_leaf(sl));
  const TorusParams torus{.dims = {4, 2, 1, 3}, .link_bandwidth = kBw, .link_latency = kLat};
  expect_counts(size_of(torus), build_torus(torus));
  for (const int gpus : {1, 8}) {
    const RailOptimizedParams r{.nodes = 5,
                                .gpus_per_node = gpus,
                                .nodes_per_leaf = 2,
                                .spines = 3,
                                .nvlink_bandwidth = kBw,
                                .nvlink_latency = kLat,
                                .nic_bandwidth = kBw,
                                .nic_latency = kLat,
                                .spine_bandwidth = kBw,
                                .spine_latency = kLat};
    expect_counts(size_of(r), build_rail_optimized(r));
  }
  const HierarchicalParams h{.devices_per_level = {4, 1, 3, 2},
                             .bandwidth_per_level = {kBw, kBw, kBw, kBw},
                             .latency_per_level = {kLat, kLat, kLat, kLat}};
  expect_counts(size_of(h), build_hierarchical(h));
  const DragonflyParams df{.groups = 5,
                           .routers_per_group = 4,
                           .hosts_per_router = 2,
                           .global_links_per_router = 2,
                           .host_bandwidth = kBw,
                           .host_latency = kLat,
                           .local_bandwidth = kBw,
                           .local_latency = kLat,
                           .global_bandwidth = kBw,
                           .global_latency = kLat};
  expect_counts(size_of(df), build_dragonfly(df));
}

TEST(TopologySize, EstimateIsTheDocumentedSum) {
  const TopologySize s{.devices = 10, .switches = 2, .cables = 20};
  EXPECT_EQ(s.estimated_bytes(), 12 * kBytesPerNode + 20 * kBytesPerCable);
  // Counts that overflow saturate instead of wrapping.
  const DragonflyParams huge{.groups = 1 << 26,
                             .routers_per_group = 1 << 26,
                             .hosts_per_router = 1 << 26,
                             .global_links_per_router = 1 << 26};
  EXPECT_EQ(size_of(huge).devices, INT64_MAX);
  EXPECT_EQ(size_of(huge).estimated_bytes(), INT64_MAX);
}

// 8,192 leaves x 8,192 spines: 67 M cables from a 9-line file.
TEST(TopologySize, ALeafSpineOverTheMemoryLimitIsRefusedNamingTheCount) {
  const std::string yaml =
      "kind: spine_leaf\nleaves: 8192\nspines: 8192\nhosts_per_leaf: 2\n"
      "host_bandwidth: 400 Gb/s\nhost_latency: 1 us\nuplink_bandwidth: 400 Gb/s\n"
      "uplink_latency: 1 us\n";
  EXPECT_EQ(
      error_of([&] { (void)load_topology_string(yaml, "sl.yaml", {.max_memory_bytes = 1 << 30}); }),
      "sl.yaml:3: spines: topology too large for the memory limit (got \"67,125,248 cables "
      "and 32,768 nodes: an estimated 8.007 GiB\"; expected at most 1 GiB (--max-memory "
      "raises the limit))");
}

// 2^26 nodes of 64 GPUs: 2^32 devices, whose id truncated to 0 and passed the node limit.
TEST(TopologySize, CountsPast32BitsAreRefusedNotTruncated) {
  const RailOptimizedParams r{.nodes = 1 << 26,
                              .gpus_per_node = 64,
                              .nodes_per_leaf = 1,
                              .spines = 1,
                              .nvlink_bandwidth = kBw,
                              .nvlink_latency = kLat,
                              .nic_bandwidth = kBw,
                              .nic_latency = kLat,
                              .spine_bandwidth = kBw,
                              .spine_latency = kLat};
  EXPECT_EQ(error_of([&] { (void)build_rail_optimized(r); }),
            "nodes: too many nodes (got \"12,884,901,888 cables and 8,657,043,457 nodes\"; "
            "expected at most 67,108,864 nodes)");
  const FatTreeParams f{.k = 1024,
                        .link_bandwidth = kBw,
                        .link_latency = kLat,
                        .devices_per_host = 16,
                        .scale_up_bandwidth = kBw,
                        .scale_up_latency = kLat};
  EXPECT_EQ(error_of([&] { (void)build_fat_tree(f); }),
            "devices_per_host: too many nodes (got \"5,100,273,664 cables and 4,564,713,472 "
            "nodes\"; expected at most 67,108,864 nodes)");
  // Dragonfly: the port count routers x global links overflowed int.
  const DragonflyParams d{.groups = 3,
                          .routers_per_group = 1 << 26,
                          .hosts_per_router = 1,
                          .global_links_per_router = 1 << 26,
                          .host_bandwidth = kBw,
                          .host_latency = kLat,
                          .local_bandwidth = kBw,
                          .local_latency = kLat,
                          .global_bandwidth = kBw,
                          .global_latency = kLat};
  EXPECT_EQ(error_of([&] { (void)build_dragonfly(d); }).rfind("groups: too many nodes", 0), 0U);
}

// 32 levels of one child: each level adds a switch per device; the limit counted devices only.
TEST(TopologySize, TreeLevelsAndTorusDimensionsAreBounded) {
  HierarchicalParams h;
  for (int i = 0; i < 33; ++i) {
    h.devices_per_level.push_back(1);
    h.bandwidth_per_level.push_back(kBw);
    h.latency_per_level.push_back(kLat);
  }
  EXPECT_EQ(error_of([&] { (void)build_hierarchical(h); }),
            "devices_per_level: out of range (got \"33 levels\"; expected at most 32 levels)");
  const TorusParams t{.dims = std::vector<int>(33, 1), .link_bandwidth = kBw, .link_latency = kLat};
  EXPECT_EQ(error_of([&] { (void)build_torus(t); }),
            "dims: out of range (got \"33 dimensions\"; expected at most 32 dimensions)");
}

TEST(TopologySize, ExplicitGraphsAreCountedFromTheirLists) {
  const std::string yaml =
      "kind: explicit\nnodes:\n  - {name: a, kind: device}\n  - {name: b, kind: device}\n"
      "links:\n  - {a: a, b: b, bandwidth: 1 GB/s, latency: 1 us}\n";
  EXPECT_EQ(
      error_of([&] { (void)load_topology_string(yaml, "e.yaml", {.max_memory_bytes = 100}); }),
      "e.yaml:6: links: topology too large for the memory limit (got \"1 cables and 2 nodes: "
      "an estimated 448 B\"; expected at most 100 B (--max-memory raises the limit))");
}

// A name from a file name that is not UTF-8 made `--json` an internal error.
TEST(TopologySize, ANameMustBeUtf8) {
  const std::string yaml = "kind: torus\ndims: [2]\nlink_bandwidth: 1 GB/s\nlink_latency: 1 us\n";
  EXPECT_EQ(error_of([&] { (void)load_topology_string(yaml, "t\xff.yaml"); }),
            "t\\xff.yaml: name: topology name is not UTF-8 (got \"t\\xff\"; expected a name: "
            "key, or a UTF-8 file name)");
}

}  // namespace
}  // namespace nest::topo
