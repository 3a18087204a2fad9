#pragma once
// Boost.Graph views of a Topology, private to src/topo (Boost stays out of the public headers).

#include <boost/graph/adjacency_list.hpp>
#include <cstdint>

#include "nest/topo/topology.h"

namespace nest::topo::detail {

// One graph edge per directed link; `link` is its LinkId.
struct EdgeProps {
  LinkId link = 0;
  std::int64_t weight = 0;
};

using Digraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS,
                                      boost::no_property, EdgeProps>;

// The directed graph of `t`, edge i being link i; edge weights are left at 0.
inline Digraph make_digraph(const Topology& t) {
  Digraph g(t.num_nodes());
  const auto links = t.links();
  for (std::size_t i = 0; i < links.size(); ++i) {
    boost::add_edge(links[i].src, links[i].dst, EdgeProps{static_cast<LinkId>(i), 0}, g);
  }
  return g;
}

}  // namespace nest::topo::detail
