// Devices that do not forward: routes of explicit graphs never pass through a device unless it
// is marked `forwarding: true`; generators mark their devices.

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nest/core/error.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/topo/metrics.h"
#include "nest/topo/router.h"

namespace nest::topo {
namespace {

// The case: two nodes of two GPUs, an NVSwitch per node (100 ns cables), GPU r of each
// node on rail leaf r (1 us), both leaves on one spine (1 us). gpu0 -> gpu3 (node 1, rail 1):
// through gpu1 (nvswitch0, gpu1, leaf1) the route has 0.1 + 0.1 + 1 + 1 = 2.2 us of latency;
// through the spine (leaf0, spine, leaf1) 4 us.
std::string two_nodes(const std::string& gpu_extra) {
  std::string nodes;
  for (int g = 0; g < 4; ++g) {
    nodes += "  - {name: gpu" + std::to_string(g) + ", kind: device" + gpu_extra + "}\n";
  }
  return "kind: explicit\nnodes:\n" + nodes +
         "  - {name: nvswitch0, kind: switch}\n"
         "  - {name: nvswitch1, kind: switch}\n"
         "  - {name: leaf0, kind: switch, tier: 2}\n"
         "  - {name: leaf1, kind: switch, tier: 2}\n"
         "  - {name: spine, kind: switch, tier: 3}\n"
         "links:\n"
         "  - {a: gpu0, b: nvswitch0, bandwidth: 450 GB/s, latency: 100 ns}\n"
         "  - {a: gpu1, b: nvswitch0, bandwidth: 450 GB/s, latency: 100 ns}\n"
         "  - {a: gpu2, b: nvswitch1, bandwidth: 450 GB/s, latency: 100 ns}\n"
         "  - {a: gpu3, b: nvswitch1, bandwidth: 450 GB/s, latency: 100 ns}\n"
         "  - {a: gpu0, b: leaf0, bandwidth: 50 GB/s, latency: 1 us}\n"
         "  - {a: gpu1, b: leaf1, bandwidth: 50 GB/s, latency: 1 us}\n"
         "  - {a: gpu2, b: leaf0, bandwidth: 50 GB/s, latency: 1 us}\n"
         "  - {a: gpu3, b: leaf1, bandwidth: 50 GB/s, latency: 1 us}\n"
         "  - {a: leaf0, b: spine, bandwidth: 50 GB/s, latency: 1 us}\n"
         "  - {a: leaf1, b: spine, bandwidth: 50 GB/s, latency: 1 us}\n";
}

std::vector<std::string> hops(const Topology& t, DeviceId a, DeviceId b) {
  Router r(t);
  std::vector<std::string> out;
  for (const LinkId l : r.route(a, b)) out.push_back(t.node(t.link(l).dst).name);
  return out;
}

TEST(Forwarding, NodeCrossingFlowGoesThroughTheSpineNotAGpu) {
  const Topology t = load_topology_string(two_nodes(""), "rails.yaml");
  EXPECT_FALSE(t.forwards(0));
  EXPECT_TRUE(t.forwards(4));  // nvswitch0
  EXPECT_EQ(hops(t, 0, 3), (std::vector<std::string>{"leaf0", "spine", "leaf1", "gpu3"}));
  // Inside a node, the NVSwitch; same rail across nodes, the rail leaf.
  EXPECT_EQ(hops(t, 0, 1), (std::vector<std::string>{"nvswitch0", "gpu1"}));
  EXPECT_EQ(hops(t, 0, 2), (std::vector<std::string>{"leaf0", "gpu2"}));
  EXPECT_EQ(diameter_hops(t), 4);
}

TEST(Forwarding, MarkedDevicesForwardAsBefore) {
  const Topology t = load_topology_string(two_nodes(", forwarding: true"), "rails.yaml");
  EXPECT_TRUE(t.forwards(0));
  // 2.2 us through gpu1 beats 4 us through the spine (ties: fewest hops, then the search).
  const std::vector<std::string> path = hops(t, 0, 3);
  ASSERT_EQ(path.size(), 4U);
  EXPECT_TRUE(path[1] == "gpu1" || path[1] == "gpu2") << path[1];
  EXPECT_EQ(diameter_hops(t), 4);
}

TEST(Forwarding, GeneratorsMarkTheirDevices) {
  const Topology rail =
      build_rail_optimized({.nodes = 2,
                            .gpus_per_node = 2,
                            .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                            .nvlink_latency = Time::nanoseconds(100),
                            .nic_bandwidth = Bandwidth::gigabytes_per_second(50),
                            .nic_latency = Time::microseconds(1),
                            .spine_bandwidth = Bandwidth::gigabytes_per_second(50),
                            .spine_latency = Time::microseconds(1)});
  EXPECT_FALSE(rail.forwards(0));
  EXPECT_TRUE(rail.forwards(static_cast<NodeId>(rail.num_devices())));
  const Topology torus = build_torus({.dims = {4},
                                      .link_bandwidth = Bandwidth::gigabytes_per_second(50),
                                      .link_latency = Time::microseconds(1)});
  EXPECT_TRUE(torus.forwards(0));  // a torus's devices are its routers
}

std::string load_error(const std::string& text) {
  try {
    (void)load_topology_string(text, "t.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(Forwarding, AGraphConnectedOnlyThroughADeviceIsRefused) {
  const std::string chain =
      "kind: explicit\nnodes:\n"
      "  - {name: a, kind: device}\n"
      "  - {name: b, kind: device}\n"
      "  - {name: c, kind: device}\n"
      "links:\n"
      "  - {a: a, b: b, bandwidth: 1 GB/s, latency: 1 us}\n"
      "  - {a: b, b: c, bandwidth: 1 GB/s, latency: 1 us}\n";
  EXPECT_EQ(load_error(chain),
            "t.yaml:5: nodes[2]: no route from a to c that does not pass through a device "
            "(devices do not forward) (got \"c\"; expected a path through switches, or "
            "forwarding: true on the devices in between)");
  std::string marked = chain;
  marked.replace(marked.find("{name: b, kind: device}"), 23,
                 "{name: b, kind: device, forwarding: true}");
  const Topology t = load_topology_string(marked, "t.yaml");
  EXPECT_EQ(hops(t, 0, 2), (std::vector<std::string>{"b", "c"}));
  EXPECT_EQ(load_error("kind: explicit\nnodes:\n  - {name: a, kind: device}\n"
                       "  - {name: s, kind: switch, forwarding: false}\n"
                       "links:\n  - {a: a, b: s, bandwidth: 1 GB/s, latency: 1 us}\n"),
            "t.yaml:4: nodes[1].forwarding: only devices take forwarding (switches always "
            "forward) (got \"false\")");
}

}  // namespace
}  // namespace nest::topo
