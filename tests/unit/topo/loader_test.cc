#include "nest/topo/loader.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nest/core/error.h"
#include "nest/topo/metrics.h"
#include "nest/topo/router.h"

namespace nest::topo {
namespace {

std::string load_error(const std::string& text) {
  try {
    (void)load_topology_string(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Loader, BundledTopologiesLoadWithTheDocumentedShape) {
  const std::string dir = std::string(NEST_SOURCE_DIR) + "/topologies/";
  const Topology ft = load_topology(dir + "fat_tree_k16.yaml");
  EXPECT_EQ(ft.name(), "fat-tree-k16");
  EXPECT_EQ(ft.family(), Family::kFatTree);
  EXPECT_EQ(ft.num_devices(), 1024U);
  EXPECT_DOUBLE_EQ(ft.link(0).bandwidth.bytes_per_s(), 400e9 / 8);  // Gb/s are bits

  const Topology rail = load_topology(dir + "h100_rail_1024.yaml");
  EXPECT_EQ(rail.num_devices(), 1024U);
  EXPECT_EQ(rail.domain_sizes(), (std::vector<int>{8, 256, 1024}));
  // GPU 0: NVLink at 450 GB/s to its NVSwitch, then its 400 Gb/s NIC.
  EXPECT_DOUBLE_EQ(rail.link(rail.out_links(0)[0]).bandwidth.bytes_per_s(), 450e9);
  EXPECT_DOUBLE_EQ(rail.link(rail.out_links(0)[1]).bandwidth.bytes_per_s(), 50e9);

  const Topology torus = load_topology(dir + "tpuv4_torus_8x8x16.yaml");
  ASSERT_NE(std::get_if<TorusParams>(&torus.params()), nullptr);
  EXPECT_EQ(std::get<TorusParams>(torus.params()).dims, (std::vector<int>{8, 8, 16}));

  const Topology nest = load_topology(dir + "nest_h100_spineleaf.yaml");
  const auto& h = std::get<HierarchicalParams>(nest.params());
  EXPECT_EQ(h.devices_per_level, (std::vector<int>{8, 4, 32}));
  EXPECT_DOUBLE_EQ(h.bandwidth_per_level[1].bytes_per_s(), 12.5e9);
  EXPECT_EQ(h.latency_per_level[2], Time::microseconds(300));
}

TEST(Loader, ExplicitGraphRoutesByLatencyAndKeepsListedDeviceOrder) {
  const Topology t =
      load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/small_explicit.yaml");
  ASSERT_EQ(t.num_devices(), 4U);
  EXPECT_EQ(t.node(2).name, "gpu2");
  EXPECT_EQ(t.domain_sizes(), (std::vector<int>{2, 4}));
  Router r(t);
  std::vector<std::string> hops;
  for (const LinkId l : r.route(0, 3)) hops.push_back(t.node(t.link(l).dst).name);
  // core-a (1 us per cable) beats core-b (2 us).
  EXPECT_EQ(hops, (std::vector<std::string>{"box0", "core-a", "box1", "gpu3"}));
  // The asymmetric cable: box0 -> core-b 25 GB/s, core-b -> box0 12.5 GB/s.
  const LinkId slow = *t.find_link(4, 7);
  EXPECT_DOUBLE_EQ(t.link(slow).bandwidth.bytes_per_s(), 25e9);
  EXPECT_DOUBLE_EQ(t.link(Topology::reverse(slow)).bandwidth.bytes_per_s(), 12.5e9);
}

TEST(Loader, ExplicitShortestLatencyThenFewestHops) {
  // a-b direct costs 3 us in one hop; a-s-b costs 3 us in two hops; a-s-t-b costs 2.5 us.
  const char* text = R"(kind: explicit
nodes:
  - {name: a, kind: device}
  - {name: b, kind: device}
  - {name: s, kind: switch}
  - {name: t, kind: switch}
links:
  - {a: a, b: b, bandwidth: 1 GB/s, latency: 3 us}
  - {a: a, b: s, bandwidth: 1 GB/s, latency: 1 us}
  - {a: s, b: b, bandwidth: 1 GB/s, latency: 2 us}
  - {a: s, b: t, bandwidth: 1 GB/s, latency: 1 us}
  - {a: t, b: b, bandwidth: 1 GB/s, latency: 0.5 us}
)";
  const Topology t = load_topology_string(text, "t.yaml");
  Router r(t);
  EXPECT_EQ(r.route(0, 1).size(), 3U);  // least latency wins over fewer hops
  const std::string tie = std::string(text).replace(std::string(text).find("0.5 us"), 6, "1 us");
  const Topology t2 = load_topology_string(tie, "t.yaml");
  Router r2(t2);
  EXPECT_EQ(r2.route(0, 1).size(), 1U);  // equal latency: fewest hops
  EXPECT_EQ(diameter_hops(t2), 1);
}

TEST(Loader, ErrorsNameFileLineAndKey) {
  EXPECT_EQ(load_error("kind: torus\ndims: [4, 0]\nlink_bandwidth: 1 GB/s\nlink_latency: 1 us\n"),
            "t.yaml:2: dims[1]: out of range (got \"0\"; expected an integer in [1, 67108864])");
  EXPECT_EQ(load_error("kind: fat_tree\nk: 4\nlink_bandwidth: 1 GB/s\n"),
            "t.yaml:1: (document): missing required key \"link_latency\"");
  EXPECT_EQ(load_error("kind: hierarchical\ndevices_per_level: [8, 4]\n"
                       "bandwidth_per_level: [1 GB/s]\nlatency_per_level: [1 us, 2 us]\n"),
            "t.yaml:3: bandwidth_per_level: wrong length (got \"1 entries\"; expected 2 entries, "
            "one per level of devices_per_level)");
  EXPECT_EQ(load_error("kind: dragonfly\ngroups: 4\nrouters_per_group: 2\nhosts_per_router: 1\n"
                       "global_links_per_router: 1\nhost_bandwidth: 1 GB/s\nhost_latency: 1 us\n"
                       "local_bandwidth: 1 GB/s\nlocal_latency: 1 us\nglobal_bandwidth: 1 GB/s\n"
                       "global_latency: 1 us\n"),
            "t.yaml:5: global_links_per_router: out of range (got \"1\"; expected "
            "routers_per_group * global_links_per_router (2) to be a multiple of groups - 1 (3))");
  EXPECT_EQ(load_error("kind: explicit\nnodes:\n  - {name: a, kind: device}\n"
                       "  - {name: b, kind: device}\nlinks:\n"
                       "  - {a: a, b: b, bandwidth: 1 GB/s, latency: 1 us}\n"
                       "domain_sizes: [3]\n"),
            "t.yaml:7: domain_sizes: the last domain size must be the number of devices (expected "
            "a list ending in 2)");
}

}  // namespace
}  // namespace nest::topo
