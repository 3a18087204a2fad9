#include "nest/topo/metrics.h"

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/push_relabel_max_flow.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <variant>
#include <vector>

#include "nest/core/error.h"
#include "nest/topo/router.h"
#include "topo/graph.h"
#include "topo/layout.h"

namespace nest::topo {
namespace {

// Diameters of the generated families (checked against all-pairs routes in the tests).
int fat_tree_diameter(const FatTreeParams& p) { return p.devices_per_host > 1 ? 8 : 6; }

int spine_leaf_diameter(const SpineLeafParams& p) {
  if (p.leaves * p.hosts_per_leaf == 1) return 0;
  return p.leaves > 1 ? 4 : 2;
}

int torus_diameter(const TorusParams& p) {
  int d = 0;
  for (const int m : p.dims) d += m / 2;
  return d;
}

int rail_diameter(const RailOptimizedParams& p) {
  const detail::RailLayout r(p);
  if (r.devices == 1) return 0;
  if (r.nodes == 1) return 2;
  return r.gpus > 1 || r.units > 1 ? 4 : 2;
}

int hierarchical_diameter(const HierarchicalParams& p) {
  int top = -1;
  for (std::size_t i = 0; i < p.devices_per_level.size(); ++i) {
    if (p.devices_per_level[i] > 1) top = static_cast<int>(i);
  }
  return 2 * (top + 1);
}

// Longest route over router pairs (the first host of each router stands for it).
int dragonfly_diameter(const Topology& t, const DragonflyParams& p) {
  if (t.num_devices() == 1) return 0;
  Router router(t);
  const auto routers = static_cast<DeviceId>(p.groups * p.routers_per_group);
  std::size_t longest = 0;
  for (DeviceId a = 0; a < routers; ++a) {
    for (DeviceId b = 0; b < routers; ++b) {
      const auto hosts = static_cast<DeviceId>(p.hosts_per_router);
      const DeviceId s = a * hosts;
      // Two hosts of one router are 2 apart; a router with one host has no such pair.
      const DeviceId d = a == b ? (hosts > 1 ? s + 1 : s) : b * hosts;
      longest = std::max(longest, router.route_path(s, d, 0).size());
    }
  }
  return static_cast<int>(longest);
}

int explicit_diameter(const Topology& t) {
  const auto g = detail::make_latency_digraph(t);
  int longest = 0;
  // Depths by vertex (detail::arrival_vertex): a device that does not forward is reached at a
  // vertex of its own; every link leaves from its source node's vertex.
  std::vector<int> hops(t.num_nodes() + t.num_devices());
  for (DeviceId s = 0; s < t.num_devices(); ++s) {
    const std::vector<LinkId> pred = detail::latency_tree(*g, s);
    std::fill(hops.begin(), hops.end(), -1);
    hops[s] = 0;
    for (DeviceId d = 0; d < t.num_devices(); ++d) {
      if (d == s) continue;
      // Walk up to a vertex of known depth, then fill the depths on the way back.
      std::vector<std::size_t> chain;
      std::size_t v = detail::arrival_vertex(t, d);
      while (hops[v] < 0) {
        if (pred[v] == detail::kNoLink) {
          throw Error::input("no route from " + t.node(s).name + " to " + t.node(d).name +
                                 " that does not pass through a device (devices do not forward)",
                             {.key = "nodes",
                              .value = t.name(),
                              .expected = "a path through switches, or forwarding: true on the "
                                          "devices in between"});
        }
        chain.push_back(v);
        v = t.link(pred[v]).src;
      }
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        hops[*it] = hops[t.link(pred[*it]).src] + 1;
      }
      longest = std::max(longest, hops[detail::arrival_vertex(t, d)]);
    }
  }
  return longest;
}

Bandwidth min3(Bandwidth a, Bandwidth b, Bandwidth c) { return std::min({a, b, c}); }

std::optional<Bandwidth> fat_tree_bisection(const FatTreeParams& p) {
  const detail::FatTreeLayout f(p);
  // The halves are k/2 whole pods each; the cut is the thinnest tier on the way out of them.
  const double half_hosts = static_cast<double>(f.hosts) / 2;
  const Bandwidth edge_up = p.link_bandwidth / p.edge_oversubscription;
  const Bandwidth agg_up = edge_up / p.aggregation_oversubscription;
  Bandwidth cut = min3(p.link_bandwidth * half_hosts, edge_up * half_hosts, agg_up * half_hosts);
  if (f.d > 1) cut = std::min(cut, p.scale_up_bandwidth * (half_hosts * f.d));
  return cut;
}

std::optional<Bandwidth> spine_leaf_bisection(const SpineLeafParams& p) {
  if (p.leaves % 2 != 0) return std::nullopt;
  // Each leaf of a half passes min(its hosts' rate, its uplinks' rate) across.
  return std::min(p.host_bandwidth * p.hosts_per_leaf, p.uplink_bandwidth * p.spines) *
         (p.leaves / 2.0);
}

std::optional<Bandwidth> torus_bisection(const TorusParams& p) {
  // Every node is a device, so the cut is exactly the cables between the two halves: the halves
  // split the most significant dimension larger than 1 in two, cutting each of its rings twice
  // (once for a ring of 2).
  const detail::TorusLayout tl(p);
  for (std::size_t i = p.dims.size(); i-- > 0;) {
    const int m = p.dims[i];
    if (m == 1) continue;
    if (m % 2 != 0) return std::nullopt;
    const double rings = static_cast<double>(tl.devices / m);
    return p.link_bandwidth * (rings * (m > 2 ? 2 : 1));
  }
  return Bandwidth{};
}

std::optional<Bandwidth> rail_bisection(const RailOptimizedParams& p) {
  const detail::RailLayout r(p);
  if (r.nodes % 2 != 0 || (r.nodes / 2) % r.per_leaf != 0) return std::nullopt;
  // Like a leaf-spine: each leaf of a half passes min(its GPUs' NICs, its spine cables).
  const double leaves = static_cast<double>(r.units / 2) * r.gpus;
  return std::min(p.nic_bandwidth * r.per_leaf, p.spine_bandwidth * r.spines) * leaves;
}

std::optional<Bandwidth> hierarchical_bisection(const HierarchicalParams& p) {
  // up(j): what one level-j subtree can push through its up cable (level j).
  Bandwidth up = p.bandwidth_per_level[0];
  int top = -1;
  std::vector<Bandwidth> ups = {up};
  for (std::size_t j = 1; j < p.devices_per_level.size(); ++j) {
    up = std::min(p.bandwidth_per_level[j], up * p.devices_per_level[j - 1]);
    ups.push_back(up);
  }
  for (std::size_t i = 0; i < p.devices_per_level.size(); ++i) {
    if (p.devices_per_level[i] > 1) top = static_cast<int>(i);
  }
  if (top < 0) return Bandwidth{};
  const int fanout = p.devices_per_level[top];
  if (fanout % 2 != 0) return std::nullopt;
  return ups[top] * (fanout / 2.0);
}

}  // namespace

int diameter_hops(const Topology& t) {
  const TopologyParams& p = t.params();
  if (const auto* q = std::get_if<FatTreeParams>(&p)) return fat_tree_diameter(*q);
  if (const auto* q = std::get_if<SpineLeafParams>(&p)) return spine_leaf_diameter(*q);
  if (const auto* q = std::get_if<TorusParams>(&p)) return torus_diameter(*q);
  if (const auto* q = std::get_if<RailOptimizedParams>(&p)) return rail_diameter(*q);
  if (const auto* q = std::get_if<HierarchicalParams>(&p)) return hierarchical_diameter(*q);
  if (const auto* q = std::get_if<DragonflyParams>(&p)) return dragonfly_diameter(t, *q);
  return explicit_diameter(t);
}

Bandwidth injection_bandwidth(const Topology& t) {
  Bandwidth least;
  for (DeviceId d = 0; d < t.num_devices(); ++d) {
    Bandwidth sum;
    for (const LinkId l : t.out_links(d)) sum = sum + t.link(l).bandwidth;
    if (d == 0 || sum < least) least = sum;
  }
  return least;
}

std::optional<Bandwidth> structural_bisection(const Topology& t) {
  const TopologyParams& p = t.params();
  if (const auto* q = std::get_if<FatTreeParams>(&p)) return fat_tree_bisection(*q);
  if (const auto* q = std::get_if<SpineLeafParams>(&p)) return spine_leaf_bisection(*q);
  if (const auto* q = std::get_if<TorusParams>(&p)) return torus_bisection(*q);
  if (const auto* q = std::get_if<RailOptimizedParams>(&p)) return rail_bisection(*q);
  if (const auto* q = std::get_if<HierarchicalParams>(&p)) return hierarchical_bisection(*q);
  return std::nullopt;
}

Bandwidth max_flow_bisection(const Topology& t) {
  using Traits = boost::adjacency_list_traits<boost::vecS, boost::vecS, boost::directedS>;
  using Graph = boost::adjacency_list<
      boost::vecS, boost::vecS, boost::directedS, boost::no_property,
      boost::property<
          boost::edge_capacity_t, std::int64_t,
          boost::property<boost::edge_residual_capacity_t, std::int64_t,
                          boost::property<boost::edge_reverse_t, Traits::edge_descriptor>>>>;
  const std::size_t n = t.num_devices();
  if (n < 2) return Bandwidth{};
  Graph g(t.num_nodes() + 2);
  const auto source = static_cast<std::size_t>(t.num_nodes());
  const std::size_t sink = source + 1;
  auto capacity = boost::get(boost::edge_capacity, g);
  auto reverse = boost::get(boost::edge_reverse, g);
  const auto rate = [](Bandwidth b) {
    return static_cast<std::int64_t>(std::llround(b.bytes_per_s()));
  };
  // A pair of opposite edges, each the other's reverse.
  const auto add_pair = [&](std::size_t a, std::size_t b, std::int64_t ab, std::int64_t ba) {
    const auto e1 = boost::add_edge(a, b, g).first;
    const auto e2 = boost::add_edge(b, a, g).first;
    capacity[e1] = ab;
    capacity[e2] = ba;
    reverse[e1] = e2;
    reverse[e2] = e1;
  };
  // Each directed link is an edge with a zero-capacity reverse edge of its own (the form Boost's
  // push-relabel expects; pairing a cable's two directions trips its flow check).
  std::int64_t total = 0;
  for (const Link& l : t.links()) {
    const std::int64_t c = rate(l.bandwidth);
    total += c;
    add_pair(l.src, l.dst, c, 0);
  }
  const std::int64_t unbounded = total + 1;  // more than any cut
  for (std::size_t d = 0; d < n; ++d) {
    if (d < n / 2) {
      add_pair(source, d, unbounded, 0);
    } else {
      add_pair(d, sink, unbounded, 0);
    }
  }
  const std::int64_t flow = boost::push_relabel_max_flow(g, source, sink);
  return Bandwidth::bytes_per_second(static_cast<double>(flow));
}

Bandwidth bisection_bandwidth(const Topology& t) {
  if (const auto b = structural_bisection(t)) return *b;
  return max_flow_bisection(t);
}

TopologySummary summarize(const Topology& t) {
  TopologySummary s;
  s.devices = t.num_devices();
  s.switches = t.num_switches();
  s.cables = t.num_cables();
  s.diameter_hops = diameter_hops(t);
  s.injection = injection_bandwidth(t);
  const auto exact = structural_bisection(t);
  s.bisection_exact_form = exact.has_value();
  s.bisection = exact ? *exact : max_flow_bisection(t);
  return s;
}

}  // namespace nest::topo
