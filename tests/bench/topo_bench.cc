// Topology generator and routing throughput (issue 2, "Speed and scale"): building a
// 65,536-device fat-tree and routing 1M random device pairs. Heap growth is measured with glibc's
// mallinfo2 and reported per directed link (topology) and per route (router cache).

#include <benchmark/benchmark.h>
#include <malloc.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "nest/core/rng.h"
#include "nest/topo/generators.h"
#include "nest/topo/metrics.h"
#include "nest/topo/router.h"

namespace {

using nest::Bandwidth;
using nest::Time;
namespace topo = nest::topo;

const Bandwidth kBw = Bandwidth::gigabits_per_second(400);
const Time kLat = Time::microseconds(1);

// Bytes allocated: from the heap arenas plus large blocks that malloc maps directly.
double heap_in_use() {
  const struct mallinfo2 m = mallinfo2();
  return static_cast<double>(m.uordblks + m.hblkhd);
}

topo::Topology fat_tree(int k) {
  return topo::build_fat_tree({.k = k, .link_bandwidth = kBw, .link_latency = kLat});
}

void BM_BuildFatTree(benchmark::State& state) {
  const auto k = static_cast<int>(state.range(0));
  double bytes = 0;
  std::size_t links = 0;
  for (auto _ : state) {
    const double before = heap_in_use();
    topo::Topology t = fat_tree(k);
    bytes = heap_in_use() - before;
    links = t.num_links();
    benchmark::DoNotOptimize(t);
  }
  state.counters["devices"] = static_cast<double>(k) * k * k / 4;
  state.counters["links"] = static_cast<double>(links);
  state.counters["heap_B_per_link"] = bytes / static_cast<double>(links);
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(links));
}
BENCHMARK(BM_BuildFatTree)->Arg(16)->Arg(32)->Arg(64)->Unit(benchmark::kMillisecond);

void BM_BuildTorus(benchmark::State& state) {
  const auto side = static_cast<int>(state.range(0));
  std::size_t links = 0;
  for (auto _ : state) {
    topo::Topology t = topo::build_torus(
        {.dims = {side, side, 2 * side}, .link_bandwidth = kBw, .link_latency = kLat});
    links = t.num_links();
    benchmark::DoNotOptimize(t);
  }
  state.counters["devices"] = 2.0 * side * side * side;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(links));
}
BENCHMARK(BM_BuildTorus)->Arg(8)->Arg(32)->Unit(benchmark::kMillisecond);

// `nodes` DGX-H100-style nodes of 8 rails, 32 nodes per leaf, 32 spines.
topo::Topology rail(int nodes) {
  return topo::build_rail_optimized({.nodes = nodes,
                                     .gpus_per_node = 8,
                                     .nodes_per_leaf = 32,
                                     .spines = 32,
                                     .nvlink_bandwidth = kBw * 9,
                                     .nvlink_latency = kLat,
                                     .nic_bandwidth = kBw,
                                     .nic_latency = kLat,
                                     .spine_bandwidth = kBw,
                                     .spine_latency = kLat});
}

void BM_BuildRailOptimized(benchmark::State& state) {
  const auto nodes = static_cast<int>(state.range(0));
  std::size_t links = 0;
  for (auto _ : state) {
    topo::Topology t = rail(nodes);
    links = t.num_links();
    benchmark::DoNotOptimize(t);
  }
  state.counters["devices"] = 8.0 * nodes;
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(links));
}
BENCHMARK(BM_BuildRailOptimized)->Arg(128)->Arg(8192)->Unit(benchmark::kMillisecond);

std::vector<std::pair<topo::DeviceId, topo::DeviceId>> random_pairs(std::size_t n,
                                                                    std::uint64_t devices) {
  nest::Rng rng(42);
  std::vector<std::pair<topo::DeviceId, topo::DeviceId>> pairs(n);
  for (auto& p : pairs) {
    p.first = static_cast<topo::DeviceId>(rng.below(devices));
    p.second = static_cast<topo::DeviceId>(rng.below(devices));
  }
  return pairs;
}

// 1M random pairs on a fresh router (every route computed and cached): the scale test.
void BM_RouteRandomPairsCold(benchmark::State& state, topo::Topology (*make)()) {
  const topo::Topology t = make();
  const auto pairs = random_pairs(static_cast<std::size_t>(state.range(0)), t.num_devices());
  double bytes = 0;
  std::size_t hops = 0;
  for (auto _ : state) {
    const double before = heap_in_use();
    topo::Router router(t, 1);
    std::uint64_t flow = 0;
    for (const auto& [s, d] : pairs) hops += router.route(s, d, flow++).size();
    bytes = heap_in_use() - before;
    benchmark::DoNotOptimize(hops);
  }
  state.counters["devices"] = static_cast<double>(t.num_devices());
  state.counters["heap_B_per_route"] = bytes / static_cast<double>(pairs.size());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pairs.size()));
}

// The same pairs again on a warm router: cache lookups only.
void BM_RouteRandomPairsWarm(benchmark::State& state, topo::Topology (*make)()) {
  const topo::Topology t = make();
  const auto pairs = random_pairs(static_cast<std::size_t>(state.range(0)), t.num_devices());
  topo::Router router(t, 1);
  std::uint64_t flow = 0;
  for (const auto& [s, d] : pairs) benchmark::DoNotOptimize(router.route(s, d, flow++));
  for (auto _ : state) {
    flow = 0;
    std::size_t hops = 0;
    for (const auto& [s, d] : pairs) hops += router.route(s, d, flow++).size();
    benchmark::DoNotOptimize(hops);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pairs.size()));
}

// 1M random pairs through `route_into`, the simulator's path (no stored route: fat-tree and
// rail routes are walked from tables, the others go through a small recent-route table).
void BM_RouteIntoRandomPairs(benchmark::State& state, topo::Topology (*make)()) {
  const topo::Topology t = make();
  const auto pairs = random_pairs(static_cast<std::size_t>(state.range(0)), t.num_devices());
  topo::Router router(t, 1);
  std::vector<topo::LinkId> route;
  for (auto _ : state) {
    std::uint64_t flow = 0;
    std::size_t hops = 0;
    for (const auto& [s, d] : pairs) {
      router.route_into(s, d, flow++, route);
      hops += route.size();
    }
    benchmark::DoNotOptimize(hops);
  }
  state.counters["devices"] = static_cast<double>(t.num_devices());
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(pairs.size()));
}

topo::Topology fat_tree_64() { return fat_tree(64); }
// 16,384 nodes: 131,072 GPUs.
topo::Topology rail_131072() { return rail(16384); }
topo::Topology torus_65536() {
  return topo::build_torus({.dims = {32, 32, 64}, .link_bandwidth = kBw, .link_latency = kLat});
}
topo::Topology dragonfly_16k() {
  // Balanced dragonfly a = 2p = 2h = 16: 129 groups, 16,512 hosts.
  return topo::build_dragonfly({.groups = 129,
                                .routers_per_group = 16,
                                .hosts_per_router = 8,
                                .global_links_per_router = 8,
                                .host_bandwidth = kBw,
                                .host_latency = kLat,
                                .local_bandwidth = kBw,
                                .local_latency = kLat,
                                .global_bandwidth = kBw,
                                .global_latency = kLat});
}

BENCHMARK_CAPTURE(BM_RouteRandomPairsCold, fat_tree_k64, fat_tree_64)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_RouteRandomPairsWarm, fat_tree_k64, fat_tree_64)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RouteRandomPairsCold, rail_131072, rail_131072)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_RouteIntoRandomPairs, fat_tree_k64, fat_tree_64)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RouteIntoRandomPairs, rail_131072, rail_131072)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_RouteRandomPairsCold, torus_32x32x64, torus_65536)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);
BENCHMARK_CAPTURE(BM_RouteRandomPairsCold, dragonfly_16512, dragonfly_16k)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Describe's metrics on the bundled-size topologies and on the 65,536-device fat-tree.
void BM_SummarizeFatTree(benchmark::State& state) {
  const topo::Topology t = fat_tree(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(topo::summarize(t));
}
BENCHMARK(BM_SummarizeFatTree)->Arg(16)->Arg(64)->Unit(benchmark::kMillisecond);

// Max-flow bisection (the explicit-graph path) on a k=16 fat-tree's graph (1024 devices).
void BM_MaxFlowBisectionK16(benchmark::State& state) {
  const topo::Topology t = fat_tree(16);
  for (auto _ : state) benchmark::DoNotOptimize(topo::max_flow_bisection(t));
}
BENCHMARK(BM_MaxFlowBisectionK16)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
