#pragma once
/// \file
/// What `nest topology describe` reports: counts, diameter, per-device injection bandwidth and
/// bisection bandwidth. Generated topologies get exact closed forms from their structure;
/// explicit graphs (and generated ones whose halves do not align with their structure) are
/// measured on the graph: Dijkstra for the diameter, Boost.Graph max-flow for the bisection.

#include <cstddef>
#include <optional>

#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::topo {

/// Summary of a topology.
struct TopologySummary {
  std::size_t devices = 0;
  std::size_t switches = 0;
  std::size_t cables = 0;             ///< full-duplex cables (directed links / 2)
  int diameter_hops = 0;              ///< longest route between two devices, in links
  Bandwidth injection;                ///< least, over devices, of the summed rates of its links
  Bandwidth bisection;                ///< see bisection_bandwidth()
  bool bisection_exact_form = false;  ///< true: closed form from the structure; false: max-flow
};

/// The longest route (in links) that the Router takes between two devices. Closed form for the
/// generated families (dragonfly: the maximum over router pairs); explicit graphs: one Dijkstra
/// per device, O(N (V + E) log V).
[[nodiscard]] int diameter_hops(const Topology& topology);

/// The least, over devices, of the summed rates of the links leaving the device (e.g. NVLink +
/// NIC on a rail-optimized GPU). O(links).
[[nodiscard]] Bandwidth injection_bandwidth(const Topology& topology);

/// Bisection bandwidth: the maximum rate at which devices [0, N/2) can send to devices
/// [N/2, N) at once (one direction; N/2 rounded down), i.e. the minimum cut between the two
/// halves of the device numbering. Closed form when structural_bisection() has one, otherwise
/// max_flow_bisection().
[[nodiscard]] Bandwidth bisection_bandwidth(const Topology& topology);

/// The closed form of bisection_bandwidth() for a generated topology whose halves align with its
/// structure (fat-tree: always; spine-leaf: an even number of leaves; torus: even most
/// significant dimension; rail-optimized: the halves fill whole scalable units; hierarchical:
/// even fan-out at the top). Nothing for explicit graphs, dragonflies and unaligned halves.
[[nodiscard]] std::optional<Bandwidth> structural_bisection(const Topology& topology);

/// The same quantity by Boost.Graph's push-relabel max-flow from a source joined to the first
/// half to a sink joined to the second half, on the directed links (every node may forward).
/// Rates are rounded to whole bytes per second. O(V^3) worst case; seconds for ~10^5 links.
[[nodiscard]] Bandwidth max_flow_bisection(const Topology& topology);

/// All of the above.
[[nodiscard]] TopologySummary summarize(const Topology& topology);

}  // namespace nest::topo
