#pragma once
// Topologies the benchmark programs share, built once per program.

#include <map>
#include <memory>

#include "nest/core/units.h"
#include "nest/topo/generators.h"
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

}  // namespace nest::bench
