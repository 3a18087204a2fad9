#include "topo/graph.h"

#include <boost/graph/dijkstra_shortest_paths.hpp>
#include <boost/graph/visitors.hpp>

#include <algorithm>
#include <functional>

#include "nest/core/error.h"

namespace nest::topo::detail {

std::unique_ptr<Digraph> make_latency_digraph(const Topology& t) {
  auto g = std::make_unique<Digraph>(t.num_nodes() + t.num_devices());
  const auto v = static_cast<std::int64_t>(t.num_nodes());
  std::int64_t total = 0;
  const auto links = t.links();
  for (std::size_t i = 0; i < links.size(); ++i) {
    const std::int64_t lat = links[i].latency.ps();
    if (lat > std::numeric_limits<std::int64_t>::max() / 4 / v - total) {
      throw Error::input("link latencies too large to route exactly", {.key = t.name()});
    }
    total += lat;
    boost::add_edge(links[i].src, arrival_vertex(t, links[i].dst),
                    EdgeProps{static_cast<LinkId>(i), lat * v + 1}, *g);
  }
  return g;
}

std::vector<LinkId> latency_tree(const Digraph& g, NodeId src) {
  using Edge = boost::graph_traits<Digraph>::edge_descriptor;
  const std::size_t n = boost::num_vertices(g);
  std::vector<LinkId> pred(n, kNoLink);
  struct Recorder : boost::default_dijkstra_visitor {
    std::vector<LinkId>* pred;
    void edge_relaxed(Edge e, const Digraph& graph) const {
      (*pred)[boost::target(e, graph)] = graph[e].link;
    }
  };
  Recorder rec;
  rec.pred = &pred;
  // The no-init variant skips Boost's scan of all edges for negative weights (ours are > 0).
  constexpr std::int64_t kInf = std::numeric_limits<std::int64_t>::max();
  std::vector<std::int64_t> dist(n, kInf);
  dist[src] = 0;
  std::vector<boost::default_color_type> color(n, boost::white_color);
  const auto index = boost::get(boost::vertex_index, g);
  boost::dijkstra_shortest_paths_no_init(
      g, src, boost::dummy_property_map(), boost::make_iterator_property_map(dist.begin(), index),
      boost::get(&EdgeProps::weight, g), index, std::less<>(),
      boost::closed_plus<std::int64_t>(kInf), std::int64_t{0}, rec,
      boost::make_iterator_property_map(color.begin(), index));
  return pred;
}

}  // namespace nest::topo::detail
