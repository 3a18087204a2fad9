#pragma once
// Topologies the benchmark programs share, built once per program.

#include <fmt/format.h>

#include <map>
#include <memory>
#include <string>

#include "nest/core/units.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/topo/topology.h"

namespace nest::bench {

/// The k-ary fat-tree of 400 Gb/s, 1 us links, built on first use (one thread per benchmark
/// program: the cache is program-local).
inline const topo::Topology& fat_tree(int k) {
  static std::map<int, std::unique_ptr<topo::Topology>> cache;
  auto& t = cache[k];
  if (!t) {
    topo::FatTreeParams p;
    p.k = k;
    p.link_bandwidth = Bandwidth::gigabits_per_second(400);
    p.link_latency = Time::microseconds(1);
    t = std::make_unique<topo::Topology>(topo::build_fat_tree(p));
  }
  return *t;
}

/// A rail-optimized cluster of `nodes` DGX-H100-style nodes as topologies/h100_rail_1024.yaml
/// describes them (8 GPUs per node, 32 spines, 400 Gb/s NICs and cables, the bundled NCCL
/// models) with `nodes_per_leaf` nodes per leaf. Benchmark programs define NEST_SOURCE_DIR (the
/// collective models are read from its topologies/collectives/).
inline topo::Topology h100_rail(int nodes, int nodes_per_leaf = 32) {
  const std::string yaml = fmt::format(
      "kind: rail_optimized\nname: h100-rail-{}\nnodes: {}\ngpus_per_node: 8\n"
      "nodes_per_leaf: {}\nspines: 32\nnvlink_bandwidth: 450 GB/s\nnvlink_latency: 0.5 us\n"
      "nic_bandwidth: 400 Gb/s\nnic_latency: 1 us\nspine_bandwidth: 400 Gb/s\n"
      "spine_latency: 1 us\nnvlink_sharp: true\n"
      "collectives: [collectives/nvlink4.yaml, collectives/ndr.yaml]\n",
      8 * nodes, nodes, nodes_per_leaf);
  return topo::load_topology_string(yaml,
                                    std::string(NEST_SOURCE_DIR) + "/topologies/bench_rail.yaml");
}

}  // namespace nest::bench
