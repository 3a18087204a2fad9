#include "nest/topo/generators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "nest/core/error.h"
#include "unit/topo/test_util.h"

namespace nest::topo {
namespace {

const Bandwidth kBw = Bandwidth::gigabytes_per_second(50);
const Time kLat = Time::microseconds(1);

std::set<NodeId> neighbours(const Topology& t, NodeId n) {
  std::set<NodeId> out;
  for (const LinkId l : t.out_links(n)) out.insert(t.link(l).dst);
  return out;
}

int count_tier(const Topology& t, int tier) {
  int n = 0;
  for (NodeId id = static_cast<NodeId>(t.num_devices()); id < t.num_nodes(); ++id) {
    n += t.node(id).tier == tier ? 1 : 0;
  }
  return n;
}

// k-ary fat-tree (Al-Fares et al. 2008): k^3/4 hosts, k^2/2 edge, k^2/2 aggregation, k^2/4 core
// switches; k^3/4 cables per tier.
TEST(FatTree, HostSwitchAndLinkCountsForK4K8K16) {
  for (const int k : {4, 8, 16}) {
    const Topology t = build_fat_tree({.k = k, .link_bandwidth = kBw, .link_latency = kLat});
    EXPECT_EQ(t.num_devices(), static_cast<std::size_t>(k * k * k / 4)) << k;
    EXPECT_EQ(t.num_switches(), static_cast<std::size_t>(5 * k * k / 4)) << k;
    EXPECT_EQ(t.num_cables(), static_cast<std::size_t>(3 * k * k * k / 4)) << k;
    EXPECT_EQ(count_tier(t, 1), k * k / 2);
    EXPECT_EQ(count_tier(t, 2), k * k / 2);
    EXPECT_EQ(count_tier(t, 3), k * k / 4);
    // Every switch uses exactly k ports except cores, which also use k (one per pod).
    for (NodeId id = static_cast<NodeId>(t.num_devices()); id < t.num_nodes(); ++id) {
      ASSERT_EQ(t.out_links(id).size(), static_cast<std::size_t>(k)) << t.node(id).name;
    }
  }
  const Topology k16 = build_fat_tree({.k = 16, .link_bandwidth = kBw, .link_latency = kLat});
  EXPECT_EQ(k16.num_devices(), 1024U);
  EXPECT_EQ(k16.domain_sizes(), (std::vector<int>{8, 64, 1024}));
}

TEST(FatTree, DevicesPerHostSitBehindOneScaleUpSwitch) {
  const Topology t = build_fat_tree({.k = 4,
                                     .link_bandwidth = kBw,
                                     .link_latency = kLat,
                                     .devices_per_host = 4,
                                     .scale_up_bandwidth = kBw * 8,
                                     .scale_up_latency = kLat});
  EXPECT_EQ(t.num_devices(), 64U);
  EXPECT_EQ(t.num_switches(), 16U + 20U);
  EXPECT_EQ(t.num_cables(), 64U + 48U);
  // Devices 4..7 are host 1: all on switch "host1", which has one more cable to edge0.0.
  for (NodeId d = 4; d < 8; ++d) {
    ASSERT_EQ(t.out_links(d).size(), 1U);
    EXPECT_EQ(t.node(t.link(t.out_links(d)[0]).dst).name, "host1");
  }
  EXPECT_EQ(t.domain_sizes(), (std::vector<int>{4, 8, 16, 64}));
}

TEST(FatTree, OversubscriptionLowersTheUpCables) {
  const Topology t = build_fat_tree({.k = 4,
                                     .link_bandwidth = kBw,
                                     .link_latency = kLat,
                                     .edge_oversubscription = 2,
                                     .aggregation_oversubscription = 2});
  const auto edge = static_cast<NodeId>(t.num_devices());  // edge0.0
  std::vector<double> rates;
  for (const LinkId l : t.out_links(edge)) rates.push_back(t.link(l).bandwidth.bytes_per_s());
  EXPECT_EQ(rates, (std::vector<double>{50e9, 50e9, 25e9, 25e9}));
  const NodeId agg = edge + 8;  // agg0.0: two edge cables, then two core cables
  EXPECT_EQ(t.node(agg).name, "agg0.0");
  EXPECT_DOUBLE_EQ(t.link(t.out_links(agg)[3]).bandwidth.bytes_per_s(), 12.5e9);
}

TEST(Torus, NeighboursAndWrapAround) {
  const Topology t = build_torus({.dims = {4, 3, 2}, .link_bandwidth = kBw, .link_latency = kLat});
  EXPECT_EQ(t.num_devices(), 24U);
  EXPECT_EQ(t.num_switches(), 0U);
  // Rings of 4 and 3 have as many cables as nodes; a ring of 2 has one cable.
  EXPECT_EQ(t.num_cables(), 24U + 24U + 12U);
  // (0,0,0): x +-1 -> 1, 3 (wrap); y +-1 -> 4, 8 (wrap); z -> 12.
  EXPECT_EQ(neighbours(t, 0), (std::set<NodeId>{1, 3, 4, 8, 12}));
  // (3,2,1) = 3 + 4*2 + 12*1 = 23: x -> 22, 20 (wrap); y -> 19, 15 (wrap to y=0); z -> 11.
  EXPECT_EQ(neighbours(t, 23), (std::set<NodeId>{22, 20, 19, 15, 11}));
  EXPECT_EQ(t.domain_sizes(), (std::vector<int>{4, 12, 24}));
}

TEST(Torus, TpuV4SliceHasSixLinksPerChip) {
  const Topology t = build_torus({.dims = {8, 8, 16}, .link_bandwidth = kBw, .link_latency = kLat});
  EXPECT_EQ(t.num_devices(), 1024U);
  EXPECT_EQ(t.num_cables(), 3U * 1024U);
  for (NodeId d = 0; d < t.num_devices(); ++d) ASSERT_EQ(neighbours(t, d).size(), 6U);
}

TEST(RailOptimized, GpuIOfEveryNodeIsOnRailLeafI) {
  const RailOptimizedParams p{.nodes = 8,
                              .gpus_per_node = 4,
                              .nodes_per_leaf = 4,
                              .spines = 2,
                              .nvlink_bandwidth = kBw * 9,
                              .nvlink_latency = kLat,
                              .nic_bandwidth = kBw,
                              .nic_latency = kLat,
                              .spine_bandwidth = kBw,
                              .spine_latency = kLat};
  const Topology t = build_rail_optimized(p);
  EXPECT_EQ(t.num_devices(), 32U);
  EXPECT_EQ(t.num_switches(), 8U + 2U * 4U + 2U);  // NVSwitches, leaves, spines
  EXPECT_EQ(t.num_cables(), 32U + 32U + 8U * 2U);
  for (NodeId d = 0; d < 32; ++d) {
    const int node = static_cast<int>(d / 4);
    const int gpu = static_cast<int>(d % 4);
    std::set<std::string> names;
    for (const NodeId n : neighbours(t, d)) names.insert(t.node(n).name);
    EXPECT_EQ(names, (std::set<std::string>{
                         "nvswitch" + std::to_string(node),
                         "leaf" + std::to_string(node / 4) + "." + std::to_string(gpu)}))
        << d;
  }
  // Every leaf reaches every spine once.
  for (NodeId n = 32 + 8; n < 32 + 16; ++n) {
    std::set<std::string> up;
    for (const NodeId m : neighbours(t, n)) {
      if (t.node(m).tier == 3) up.insert(t.node(m).name);
    }
    EXPECT_EQ(up, (std::set<std::string>{"spine0", "spine1"}));
  }
  EXPECT_EQ(t.domain_sizes(), (std::vector<int>{4, 16, 32}));
}

TEST(Hierarchical, GroupMembershipFollowsDevicesPerLevel) {
  const HierarchicalParams p{.devices_per_level = {8, 4, 32},
                             .bandwidth_per_level = {kBw * 18, kBw * 2, kBw * 8},
                             .latency_per_level = {kLat, kLat * 2, kLat * 3}};
  const Topology t = build_hierarchical(p);
  EXPECT_EQ(t.num_devices(), 1024U);
  EXPECT_EQ(t.num_switches(), 128U + 32U + 1U);
  EXPECT_EQ(t.num_cables(), 1024U + 128U + 32U);
  EXPECT_EQ(t.domain_sizes(), (std::vector<int>{8, 32, 1024}));
  // Device d sits under level-1 switch d / 8, which sits under level-2 switch d / 32.
  for (const NodeId d : {0U, 7U, 8U, 31U, 32U, 1023U}) {
    const NodeId l1 = t.link(t.out_links(d)[0]).dst;
    EXPECT_EQ(t.node(l1).name, "sw1." + std::to_string(d / 8));
    EXPECT_DOUBLE_EQ(t.link(t.out_links(d)[0]).bandwidth.bytes_per_s(), 900e9);
    NodeId l2 = 0;
    for (const LinkId l : t.out_links(l1)) {
      if (t.node(t.link(l).dst).tier == 2) {
        l2 = t.link(l).dst;
        EXPECT_DOUBLE_EQ(t.link(l).bandwidth.bytes_per_s(), 100e9);
        EXPECT_EQ(t.link(l).latency, Time::microseconds(2));
      }
    }
    EXPECT_EQ(t.node(l2).name, "sw2." + std::to_string(d / 32));
  }
  EXPECT_EQ(t.out_links(static_cast<NodeId>(t.num_nodes() - 1)).size(), 32U);  // the root
}

TEST(Generators, BadParametersNameTheKey) {
  try {
    (void)build_fat_tree({.k = 5, .link_bandwidth = kBw, .link_latency = kLat});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "k: out of range (got \"5\"; expected an even integer in [2, 1024])");
  }
  try {
    (void)build_torus({.dims = {4, 0}, .link_bandwidth = kBw, .link_latency = kLat});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "dims[1]: out of range (got \"0\"; expected an integer >= 1)");
  }
  try {
    (void)build_dragonfly({.groups = 4,
                           .routers_per_group = 2,
                           .hosts_per_router = 1,
                           .global_links_per_router = 1,
                           .host_bandwidth = kBw,
                           .host_latency = kLat,
                           .local_bandwidth = kBw,
                           .local_latency = kLat,
                           .global_bandwidth = kBw,
                           .global_latency = kLat});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.context().key, "global_links_per_router");
  }
}

TEST(Validate, RejectsDeviceWithoutLinkAndDisconnectedGraph) {
  Topology lonely("t");
  lonely.add_device("a");
  lonely.add_device("b");
  lonely.add_switch("s", 1);
  lonely.add_link(0, 2, kBw, kLat);
  try {
    validate(lonely);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "nodes[1]: device has no link (got \"b\"; expected every device on at least "
                 "one link)");
  }
  Topology split("t");
  for (const char* n : {"a", "b", "c", "d"}) split.add_device(n);
  split.add_link(0, 1, kBw, kLat);
  split.add_link(2, 3, kBw, kLat);
  try {
    validate(split);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "nodes[2]: graph is disconnected: node not reachable from a (got \"c\"; "
                 "expected a connected graph)");
  }
  Topology zero("t");
  zero.add_device("a");
  zero.add_device("b");
  zero.add_link(0, 1, kBw, Time::zero());
  EXPECT_THROW(validate(zero), Error);
}

}  // namespace
}  // namespace nest::topo
