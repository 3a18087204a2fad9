#pragma once
// Small hand-built topologies for the collective tests, with rates and latencies chosen so that
// every transfer of the test sizes takes a whole number of picoseconds.

#include <cmath>
#include <cstdint>
#include <string>

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

// Seconds to picoseconds, rounded to the nearest (closed forms are real numbers).
inline std::int64_t to_ps(double seconds) { return std::llround(seconds * 1e12); }

}  // namespace nest::coll::testing
