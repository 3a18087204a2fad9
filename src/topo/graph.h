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

// The directed graph of `t`, edge i being link i, weighted latency_ps * V + 1 so that a
// shortest path has the least latency and, among those, the fewest hops (a path has fewer
// than V hops). Throws Error (input) if the weights could overflow.
[[nodiscard]] std::unique_ptr<Digraph> make_latency_digraph(const Topology& t);

// The least-latency-then-fewest-hops tree from `src`: for each node, the link that reaches it
// (kNoLink for `src` and unreachable nodes). Dijkstra, O((V + E) log V).
[[nodiscard]] std::vector<LinkId> latency_tree(const Digraph& g, NodeId src);

}  // namespace nest::topo::detail
