#pragma once
// Boost.Graph views of a Topology, private to src/topo (Boost stays out of the public headers).

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "nest/topo/topology.h"

namespace nest::topo::detail {

// One graph edge per directed link; `link` is its LinkId.
struct EdgeProps {
  LinkId link = 0;
  std::int64_t weight = 0;
};

using Digraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                                      boost::no_property, EdgeProps>;

inline constexpr LinkId kNoLink = std::numeric_limits<LinkId>::max();

// The vertex at which a route arrives at node `n`: `n` itself for nodes that forward, and a
// vertex of its own with no edge out (num_nodes() + n) for devices that do not, so that a
// search reaches such a device without passing through it.
[[nodiscard]] inline std::size_t arrival_vertex(const Topology& t, NodeId n) {
  return t.forwards(n) ? n : t.num_nodes() + n;
}

// The directed graph of `t` on num_nodes() + num_devices() vertices, edge i being link i from
// vertex src to arrival_vertex(dst), weighted latency_ps * V + 1 (V = num_nodes()) so that a
// shortest path has the least latency and, among those, the fewest hops (a path has fewer
// than V hops). Routes leave a device from vertex `device` and never pass through one that
// does not forward. Throws Error (input) if the weights could overflow.
[[nodiscard]] std::unique_ptr<Digraph> make_latency_digraph(const Topology& t);

// The least-latency-then-fewest-hops tree from `src`: for each vertex, the link that reaches it
// (kNoLink for `src` and unreachable vertices). Dijkstra, O((V + E) log V).
[[nodiscard]] std::vector<LinkId> latency_tree(const Digraph& g, NodeId src);

}  // namespace nest::topo::detail
