#pragma once
// Small hand-built topologies for the collective tests, with rates and latencies chosen so that
// every transfer of the test sizes takes a whole number of picoseconds.

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nest/coll/simulate.h"
#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::coll::testing {

// 100 GB/s: 10 ps per byte. 500 ns per link: a device-switch-device route has 1 us latency.
inline constexpr Bandwidth kRate = Bandwidth::gigabytes_per_second(100);
inline const Time kLinkLatency = Time::nanoseconds(500);

// A non-blocking switch: `n` devices, each with one cable to the switch.
inline topo::Topology star(int n, Bandwidth rate = kRate, Time latency = kLinkLatency) {
  topo::Topology t("star", topo::Family::kExplicit);
  for (int i = 0; i < n; ++i) t.add_device("d" + std::to_string(i));
  const topo::NodeId sw = t.add_switch("switch", 1);
  for (int i = 0; i < n; ++i) t.add_link(static_cast<topo::NodeId>(i), sw, rate, latency);
  return t;
}

// A ring of `n` >= 3 devices joined by direct cables i -- i+1 (mod n).
inline topo::Topology ring(int n, Bandwidth rate = kRate, Time latency = kLinkLatency) {
  topo::Topology t("ring", topo::Family::kExplicit);
  for (int i = 0; i < n; ++i) t.add_device("d" + std::to_string(i));
  for (int i = 0; i < n; ++i) {
    t.add_link(static_cast<topo::NodeId>(i), static_cast<topo::NodeId>((i + 1) % n), rate, latency);
  }
  return t;
}

// The bundled topologies' files (topologies/), by path.
inline std::vector<std::string> bundled_topology_files() {
  std::vector<std::string> out;
  for (const char* name :
       {"dgx_a100.yaml", "dgx_h100.yaml", "fat_tree_k16.yaml", "h100_rail_1024.yaml",
        "h100_rail_1024_2to1.yaml", "h100_rail_1024_4to1.yaml", "h100_rail_64.yaml",
        "nest_h100_spineleaf.yaml", "nest_tpuv4_fattree.yaml", "selene_4480.yaml",
        "small_explicit.yaml", "tpuv4_torus_8x8x16.yaml"}) {
    out.push_back(std::string(NEST_SOURCE_DIR) + "/topologies/" + name);
  }
  return out;
}

// `n` devices `stride` apart from `first`: with stride 4 on 8-GPU nodes, two ranks per node, so
// a ring's NVLink hop feeds its InfiniBand hop.
inline std::vector<topo::DeviceId> strided_devices(int n, int stride, topo::DeviceId first = 0) {
  std::vector<topo::DeviceId> g;
  for (int r = 0; r < n; ++r) g.push_back(first + static_cast<topo::DeviceId>(r * stride));
  return g;
}

// NCCL's rings as the placer asks for them on a rail cluster: two channels in rail order
// (`ranks_per_node` 2), forwarding on arrival. Over `strided_devices(n, 4)` of 8-GPU nodes their
// pieces queue on the NICs behind the faster NVLink hops.
inline CollectiveSpec nccl_rail_rings(Operation op, Bytes size) {
  CollectiveSpec spec{op, Algorithm::kRing, size};
  spec.channels = 2;
  spec.ranks_per_node = 2;
  spec.forward_on_arrival = true;
  return spec;
}

// `simulate` twice, with the contention-free evaluation allowed (the default) and with the event
// simulation only, which must agree on every number: durations, events, flows and the use of
// every link. Returns the default's result.
inline SimulationResult simulate_both(const topo::Topology& t, const CollectiveSpec& spec,
                                      std::span<const std::vector<topo::DeviceId>> groups,
                                      std::uint64_t seed = 0) {
  SimulationOptions options{.seed = seed, .busiest_links = 1 << 30};
  const SimulationResult fast = simulate(t, spec, groups, options);
  options.events_only = true;
  const SimulationResult events = simulate(t, spec, groups, options);
  EXPECT_FALSE(events.contention_free);
  EXPECT_EQ(fast.durations, events.durations);
  EXPECT_EQ(fast.makespan, events.makespan);
  EXPECT_EQ(fast.flows, events.flows);
  EXPECT_EQ(fast.events, events.events);
  EXPECT_EQ(fast.busiest.size(), events.busiest.size());
  for (std::size_t i = 0; i < std::min(fast.busiest.size(), events.busiest.size()); ++i) {
    EXPECT_EQ(fast.busiest[i].link, events.busiest[i].link) << "entry " << i;
    EXPECT_EQ(fast.busiest[i].bytes, events.busiest[i].bytes) << "entry " << i;
    EXPECT_EQ(fast.busiest[i].busy, events.busiest[i].busy) << "entry " << i;
    EXPECT_EQ(fast.busiest[i].peak_flows, events.busiest[i].peak_flows) << "entry " << i;
  }
  return fast;
}

// Devices first, first + 1, ..., first + n - 1.
inline std::vector<topo::DeviceId> iota_group(int n, topo::DeviceId first = 0) {
  std::vector<topo::DeviceId> g(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = first + static_cast<topo::DeviceId>(i);
  return g;
}

// Seconds to picoseconds, rounded to the nearest (closed forms are real numbers).
inline std::int64_t to_ps(double seconds) { return std::llround(seconds * 1e12); }

}  // namespace nest::coll::testing
