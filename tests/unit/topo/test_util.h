#pragma once
// Helpers shared by the topology tests: brute-force oracles over the raw link arrays, and the
// small clusters several of them build.

#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "nest/topo/generators.h"
#include "nest/topo/topology.h"

namespace nest::topo::testing {

constexpr int kUnreachable = std::numeric_limits<int>::max();

// A rail-optimized cluster of `nodes` nodes of `gpus` GPUs (an NVSwitch when gpus > 1), 50 GB/s
// NICs and spine cables and 1 us per cable.
inline RailOptimizedParams rail(int nodes, int gpus, int per_leaf, int spines) {
  const Bandwidth bw = Bandwidth::gigabytes_per_second(50);
  const Time lat = Time::microseconds(1);
  return {.nodes = nodes,
          .gpus_per_node = gpus,
          .nodes_per_leaf = per_leaf,
          .spines = spines,
          .nvlink_bandwidth = bw * 9,
          .nvlink_latency = lat,
          .nic_bandwidth = bw,
          .nic_latency = lat,
          .spine_bandwidth = bw,
          .spine_latency = lat};
}

// Hop distance from `src` to every node by breadth-first search. With `devices_forward` false,
// the search never leaves a device other than `src` (devices are endpoints, not routers).
inline std::vector<int> bfs_hops(const Topology& t, NodeId src, bool devices_forward) {
  std::vector<int> dist(t.num_nodes(), kUnreachable);
  std::vector<NodeId> queue = {src};
  dist[src] = 0;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const NodeId n = queue[head];
    if (n != src && t.is_device(n) && !devices_forward) continue;
    for (const LinkId l : t.out_links(n)) {
      const NodeId next = t.link(l).dst;
      if (dist[next] == kUnreachable) {
        dist[next] = dist[n] + 1;
        queue.push_back(next);
      }
    }
  }
  return dist;
}

// True when `route` is a connected walk of directed links from src to dst.
inline bool is_walk(const Topology& t, std::span<const LinkId> route, NodeId src, NodeId dst) {
  NodeId at = src;
  for (const LinkId l : route) {
    if (t.link(l).src != at) return false;
    at = t.link(l).dst;
  }
  return at == dst;
}

// Dimension-wise torus distance: sum over dims of min(|dx|, m - |dx|).
inline int torus_distance(const std::vector<int>& dims, std::int64_t a, std::int64_t b) {
  int total = 0;
  for (const int m : dims) {
    const auto xa = static_cast<int>(a % m);
    const auto xb = static_cast<int>(b % m);
    a /= m;
    b /= m;
    const int d = xa > xb ? xa - xb : xb - xa;
    total += d < m - d ? d : m - d;
  }
  return total;
}

}  // namespace nest::topo::testing
