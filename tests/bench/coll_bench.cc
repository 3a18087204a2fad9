// Benchmarks of collectives end to end (lowering, routing, simulation) on generated topologies:
// - ring allreduce of 1 GiB over the first n devices of a 1:1 k-ary fat-tree (k = 16, 26, 42,
//   64: 1,024, 4,394, 18,522 and 65,536 hosts), n = 1,024, 4,096, 16,384, 65,536: 2n(n-1)
//   flows, every step of every rank a flow with its per-rank dependencies (the contention-free
//   evaluation derives these uniform rings from one step, coll/uncontended.h);
// - pairwise all-to-all with 1 MiB per pair over 512 devices of a k = 16 fat-tree (512 MiB
//   per rank in all, nccl-tests convention): 512·511 = 261,632 flows (the issue counts the
//   512 local copies too: 262,144);
// - the oracle on a repeated and on a shifted layout (memo and structural memo);
// - calibrated collectives (the bundled NCCL models): nccl-tests' 30-size allreduce sweep
//   8 B..4 GiB on one DGX H100 (topologies/dgx_h100.yaml), the tuner's choice at each size, as
//   `nest collective --sizes 8:4G` runs it; and the calibrated oracle's tuned first query for
//   the 8 data-parallel groups of 8 on eight DGX H100 (topologies/h100_rail_64.yaml);
// - 1, 4 and 17 concurrent double binary trees on 65,536 rail GPUs under the NCCL models, the
//   placer's joint data-parallel sync at scale (BM_ConcurrentTreesOnRail65536);
// - the event-free bound of NCCL's channel rings over 64, 512 and 2,048 GPUs of 4,096 rail
//   GPUs, derived from the ranks (BM_RingBoundOnRail4096);
// - one double binary tree of 192 or 256 GPUs on 16,384 rail GPUs, a placer's single-stage sync
//   (BM_TreeOnRail16384), and its event-free bound (BM_TreeBoundOnRail16384);
// - NCCL's rings whose pieces queue on their own routes, 1,024 of 4,096 rail GPUs, by the
//   private rings' run and by the event simulator (BM_QueuedForwardingRingOnRail4096);
// - a stage's data-parallel trees on the 8 rails of 16,384 rail GPUs, the oracle's 8 sets
//   simulated on 1 or 2 threads (BM_OracleRailsOnThreads16384, wall time);
// - lowering one double binary tree of 96 or 1,024 ranks to a stored schedule, afresh and like
//   the same tree at another size (BM_LowerTree).
// 400 Gb/s links, 1 us per cable, ECMP seed 0. Counters: flows, simulator events, flows per
// second of CPU time, the simulated time (ms), the process's peak resident memory so far (MB)
// and whether the contention-free evaluation answered (1) or the event simulation (0); the
// trees report events per second instead of flows per second, and no memory or method. The
// ring runs both ways (second argument 1: event simulation only). Rings above 100,000
// transfers run as implicit programs (memory O(ranks)).

#include <benchmark/benchmark.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "bench_topologies.h"
#include "nest/coll/calibration.h"
#include "nest/coll/execution.h"
#include "nest/coll/group.h"
#include "nest/coll/measure.h"
#include "nest/coll/oracle.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

namespace {

using nest::Bandwidth;
using nest::Bytes;
using nest::Time;
using nest::coll::Algorithm;
using nest::coll::CollectiveSpec;
using nest::coll::Operation;
using nest::topo::DeviceId;

using nest::bench::fat_tree;

std::vector<DeviceId> first_devices(int n) {
  std::vector<DeviceId> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), 0U);
  return g;
}

// The process's peak resident memory so far (VmHWM), in MB; 0 if unknown.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1e3;
  }
  return 0;
}

// `events_only`: skip the contention-free evaluation (measures the event simulator).
void run(benchmark::State& state, const nest::topo::Topology& t, const CollectiveSpec& spec, int n,
         bool events_only) {
  const std::vector<std::vector<DeviceId>> groups{first_devices(n)};
  nest::coll::SimulationResult r;
  for (auto _ : state) {
    r = nest::coll::simulate(t, spec, groups, {.events_only = events_only});
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["flows"] = static_cast<double>(r.flows);
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["flows_per_s"] = benchmark::Counter(static_cast<double>(r.flows),
                                                     benchmark::Counter::kIsIterationInvariantRate);
  state.counters["simulated_ms"] = r.makespan.to_milliseconds();
  state.counters["peak_rss_MB"] = peak_rss_mb();
  state.counters["contention_free"] = r.contention_free ? 1 : 0;
}

void BM_RingAllReduceFatTree(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int k = n <= 1024 ? 16 : n <= 4096 ? 26 : n <= 16384 ? 42 : 64;
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::gibibytes(1)};
  run(state, fat_tree(k), spec, n, state.range(1) != 0);
}
// Second argument: 1 = event simulation only, 0 = the default (contention-free evaluation
// first). The 16,384-device event simulation (537M flows) is left out: hours. 65,536 devices:
// all the hosts of a k=64 fat-tree (8.6 G flows), derived from one step (uniform ring).
BENCHMARK(BM_RingAllReduceFatTree)
    ->Args({1024, 0})
    ->Args({4096, 0})
    ->Args({16384, 0})
    ->Args({65536, 0})
    ->Args({1024, 1})
    ->Args({4096, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// NCCL's ring (forwarding on arrival) over a buffer that does not split evenly (1 GiB + 1
// byte: chunks of two sizes a byte apart), contention-free on the fat tree: derived from the
// chunks the sends carry since 251148c, a pass over its 2(n - 1)n transfers before.
void BM_UnevenForwardingRingFatTree(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const int k = n <= 1024 ? 16 : n <= 4096 ? 26 : 42;
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing,
                      Bytes(Bytes::gibibytes(1).count() + 1)};
  spec.forward_on_arrival = true;
  run(state, fat_tree(k), spec, n, false);
}
BENCHMARK(BM_UnevenForwardingRingFatTree)
    ->Arg(1024)
    ->Arg(4096)
    ->Arg(16384)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_PairwiseAllToAll512(benchmark::State& state) {
  const CollectiveSpec spec{Operation::kAllToAll, Algorithm::kPairwise, Bytes::mebibytes(512)};
  run(state, fat_tree(16), spec, 512, false);
}
BENCHMARK(BM_PairwiseAllToAll512)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_DirectAllToAll512(benchmark::State& state) {
  const CollectiveSpec spec{Operation::kAllToAll, Algorithm::kDirect, Bytes::mebibytes(512)};
  run(state, fat_tree(16), spec, 512, false);
}
BENCHMARK(BM_DirectAllToAll512)->Unit(benchmark::kMillisecond)->Iterations(1);

// 64 data-parallel rings of 16 (stride 64) on the k = 16 fat-tree: a placer-style query.
std::vector<std::vector<DeviceId>> dp_layout(DeviceId offset) {
  std::vector<std::vector<DeviceId>> groups;
  for (DeviceId g = 0; g < 64; ++g) {
    std::vector<DeviceId> members;
    for (DeviceId m = 0; m < 16; ++m) members.push_back(offset + g + 64 * m);
    groups.push_back(std::move(members));
  }
  return groups;
}

void BM_OracleFirstQuery(benchmark::State& state) {
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(64)};
  const auto layout = dp_layout(0);
  for (auto _ : state) {
    nest::coll::CollectiveOracle oracle(fat_tree(16));
    benchmark::DoNotOptimize(oracle.collective(spec, layout).slowest);
  }
}
BENCHMARK(BM_OracleFirstQuery)->Unit(benchmark::kMillisecond);

void BM_OracleRepeatedQuery(benchmark::State& state) {
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(64)};
  const auto layout = dp_layout(0);
  nest::coll::CollectiveOracle oracle(fat_tree(16));
  (void)oracle.collective(spec, layout);
  for (auto _ : state) benchmark::DoNotOptimize(oracle.collective(spec, layout).slowest);
}
BENCHMARK(BM_OracleRepeatedQuery)->Unit(benchmark::kMicrosecond);

nest::topo::Topology bundled(const std::string& name) {
  return nest::topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/" + name + ".yaml");
}

// The tuner's choice for 1 GiB over all 4,096 GPUs of a rail cluster under the bundled NCCL
// models, as `nest collective --op allreduce|allgather --size 1GiB` runs it (argument 0:
// allreduce, 1: all-gather): its candidates simulated in the order of their event-free bounds,
// each only while it can still win, since 2026-12-04; in turn and to the end before (the
// 8-channel rings' 537 M events).
void BM_TunedOnRail4096(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(512);
  const nest::coll::CalibratedNetwork network(rail);
  CollectiveSpec spec{state.range(0) == 0 ? Operation::kAllReduce : Operation::kAllGather,
                      Algorithm::kRing, Bytes::gibibytes(1), 0};
  spec.channels = 0;
  const std::vector<std::vector<DeviceId>> all{first_devices(4096)};
  std::optional<nest::coll::TunedRun> r;
  for (auto _ : state) r = nest::coll::simulate_fastest(network, spec, all);
  state.counters["simulated_ms"] = r->result.makespan.to_milliseconds();
  state.counters["events"] = static_cast<double>(r->result.events);
  state.counters["algorithm"] = static_cast<double>(r->spec.algorithm);
}
BENCHMARK(BM_TunedOnRail4096)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

void BM_CalibratedSweepDgxH100(benchmark::State& state) {
  const nest::topo::Topology dgx = bundled("dgx_h100");
  const auto sizes = nest::coll::parse_size_sweep("8:4G");
  const std::vector<std::vector<DeviceId>> node = {{0, 1, 2, 3, 4, 5, 6, 7}};
  double last = 0;
  for (auto _ : state) {
    const nest::coll::CalibratedNetwork network(dgx);
    for (const Bytes size : sizes) {
      CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, size, 0};
      spec.channels = 0;
      last = nest::coll::simulate_fastest(network, spec, node).result.makespan.to_seconds();
    }
  }
  state.counters["sizes"] = static_cast<double>(sizes.size());
  state.counters["sim_4GiB_us"] = last * 1e6;
}
BENCHMARK(BM_CalibratedSweepDgxH100)->Unit(benchmark::kMillisecond);

void BM_CalibratedOracleTunedFirstQuery(benchmark::State& state) {
  const nest::topo::Topology rail = bundled("h100_rail_64");
  std::vector<std::vector<DeviceId>> groups;
  for (DeviceId g = 0; g < 8; ++g) {
    std::vector<DeviceId> members;
    for (DeviceId m = 0; m < 8; ++m) members.push_back(g + 8 * m);
    groups.push_back(std::move(members));
  }
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(256), 0};
  spec.channels = 0;
  for (auto _ : state) {
    nest::coll::CollectiveOracle oracle(rail);
    benchmark::DoNotOptimize(oracle.fastest(spec, groups).answer.slowest);
  }
}
BENCHMARK(BM_CalibratedOracleTunedFirstQuery)->Unit(benchmark::kMillisecond);

// A placer's joint data-parallel sync at scale: K stages' groups of 154 members (one GPU every 53
// nodes, as tp-pp-dp lays out 53 stages of 8-GPU tensor groups; K = 53: every stage at once,
// components of thousands of flows) reduce 256 MiB at once with the double binary tree (16 pieces)
// under the bundled NCCL models, on `h100_rail_1024.yaml`'s cluster grown to 8,192 nodes (65,536
// GPUs). The groups are shifted by one node, so the trees share spine up-links wherever ECMP puts
// them together: one max-min component across trees. `nest collective --algorithm tree --concurrent
// stride:8:K` runs the same (its JSON is the same byte for byte before and after the simulator
// change of results/net_bench.md step 11).
void BM_ConcurrentTreesOnRail65536(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(8192);
  const nest::coll::CalibratedNetwork network(rail);
  std::vector<DeviceId> group;
  for (DeviceId r = 0; r < 154; ++r) group.push_back(r * 53 * 8);
  const auto copies = state.range(0);
  const auto groups = nest::coll::concurrent_groups(group, "stride:8:" + std::to_string(copies),
                                                    rail.num_devices());
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 0};
  spec.channels = 0;
  nest::coll::Measurement m;
  for (auto _ : state) {
    m = nest::coll::measure(network, {.spec = spec, .groups = groups});
    benchmark::DoNotOptimize(m.result.makespan);
  }
  state.counters["flows"] = static_cast<double>(m.result.flows);
  state.counters["events"] = static_cast<double>(m.result.events);
  state.counters["simulated_ms"] = m.result.makespan.to_milliseconds();
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(m.result.events), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_ConcurrentTreesOnRail65536)
    ->Arg(1)
    ->Arg(4)
    ->Arg(17)
    ->Arg(53)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The placer's single-stage data-parallel sync at 16,384 GPUs, as GPT-3 175B's search prices it
// 171 times: one double binary tree allreduce of 256 MiB in 16 pieces over n GPUs one node
// apart (rail 5, every 8th GPU from 5), on the bundled NCCL model's Simple topology of
// `h100_rail_1024.yaml`'s cluster grown to 2,048 nodes. The trees cross the spines wherever a
// parent sits under another leaf, and every rank's NIC carries both trees' pieces: one max-min
// component, event-simulated. The simulator and router persist across iterations (reset
// between runs), as in the oracle. Counters: events, rate updates, flows rated per update,
// events per second, the simulated time (ms).
void BM_TreeOnRail16384(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(2048);
  static const nest::coll::CalibratedNetwork network(rail);
  const nest::topo::Topology& t = network.topology(nest::topo::Protocol::kSimple);
  nest::topo::Router router(t, 0);
  nest::net::Simulator simulator(t);
  std::vector<DeviceId> group;
  for (DeviceId r = 0; r < static_cast<DeviceId>(state.range(0)); ++r) group.push_back(5 + 8 * r);
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 16};
  const auto program = nest::coll::lower_program(spec, static_cast<int>(group.size()));
  Time makespan;
  for (auto _ : state) {
    simulator.reset();
    nest::coll::Execution run(simulator, router, program, group, 0);
    run.start();
    simulator.run();
    makespan = run.duration();
    benchmark::DoNotOptimize(makespan);
  }
  const auto updates = static_cast<double>(simulator.rate_updates());
  state.counters["events"] = static_cast<double>(simulator.events_processed());
  state.counters["updates"] = updates;
  state.counters["rated_per_update"] = static_cast<double>(simulator.flows_rated()) / updates;
  state.counters["events_per_s"] =
      benchmark::Counter(static_cast<double>(simulator.events_processed()),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["simulated_ms"] = makespan.to_milliseconds();
}
BENCHMARK(BM_TreeOnRail16384)->Arg(192)->Arg(256)->Unit(benchmark::kMillisecond);

// The event-free bound of that sync (`CollectiveOracle::lower_bound`, what the search asks of
// every stage's sync before it simulates one): the double binary tree allreduce of 256 MiB in 16
// pieces over n GPUs one node apart on rail 5 of the 16,384 rail GPUs, under the NCCL models.
// One oracle, each iteration on a group one node further on (a new structure: the oracle's memo
// does not answer; a fresh oracle, outside the timing, once every layout was asked). Counters:
// transfers.
void BM_TreeBoundOnRail16384(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(2048);
  std::optional<nest::coll::CollectiveOracle> oracle(std::in_place, rail);
  const auto n = static_cast<DeviceId>(state.range(0));
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 16};
  DeviceId offset = 0;
  for (auto _ : state) {
    std::vector<DeviceId> group;
    for (DeviceId r = 0; r < n; ++r) group.push_back(5 + 8 * (offset + r));
    const std::vector<std::vector<DeviceId>> groups{group};
    benchmark::DoNotOptimize(oracle->lower_bound(spec, groups));
    if (++offset == 2048 - n) {  // every layout asked: a fresh memo, outside the timing
      state.PauseTiming();
      offset = 0;
      oracle.emplace(rail);
      state.ResumeTiming();
    }
  }
  state.counters["transfers"] =
      static_cast<double>(nest::coll::transfer_count(spec, static_cast<int>(n)));
}
BENCHMARK(BM_TreeBoundOnRail16384)->Arg(192)->Arg(1024)->Unit(benchmark::kMillisecond);

// A pipeline stage's data-parallel sync as the placer asks it: a double binary tree allreduce of
// 256 MiB in 16 pieces on each of the 8 rails (192 GPUs one node apart per rail, all rails at
// once) of `h100_rail_1024.yaml`'s cluster grown to 16,384 GPUs, under the NCCL models. The
// rails share no link, so the oracle prices them as 8 sets; ECMP hashes each rail's flows apart,
// so they are 8 structures, each event-simulated. A fresh oracle per iteration, on 1 or 2
// threads (`OracleSettings::threads`: the sets' simulations side by side, the same answer).
// Counters: simulations and events (the same on any thread count).
void BM_OracleRailsOnThreads16384(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(2048);
  std::vector<std::vector<DeviceId>> groups(8);
  for (DeviceId r = 0; r < 8; ++r) {
    for (DeviceId n = 0; n < 192; ++n) groups[r].push_back(r + 8 * n);
  }
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 16};
  nest::coll::OracleStats stats;
  Time answer;
  for (auto _ : state) {
    nest::coll::CollectiveOracle oracle(
        rail, nest::coll::OracleSettings{.threads = static_cast<int>(state.range(0))});
    answer = oracle.collective(spec, groups).slowest;
    stats = oracle.stats();
  }
  state.counters["simulations"] = static_cast<double>(stats.simulations);
  state.counters["events"] = static_cast<double>(stats.events);
  state.counters["simulated_ms"] = answer.to_milliseconds();
}
BENCHMARK(BM_OracleRailsOnThreads16384)
    ->Arg(1)
    ->Arg(2)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The tuner at 131,072 GPUs (`h100_rail_1024.yaml`'s cluster grown to 16,384 nodes, the bundled
// NCCL models), a stage's gradient sync as two searches ask it. A fresh oracle per iteration.
// Counters: the choice's time (ms), the simulations run to their end, the events run and those
// counted but not run.
// - Arg 0, Llama-3.1-405B's tp-pp-dp plans (8 stages of 8-GPU tensor groups, data-parallel
//   2,048): an allreduce of 3,187,933,184 bytes over 2,048 GPUs 8 nodes apart on each of the 8
//   rails. The ring (contention-free, derived) answers first; the double binary tree and the
//   hierarchical ring (4 GPUs per leaf, then 512 leaves) have event-free bounds below it, so each
//   is simulated, rail by rail, until one rail shows it slower. The rails differ only in where
//   ECMP hashes their flows; the five slow ones (235-254 ms for the hierarchical ring, against
//   184-187 ms) have the larger bounds, so simulated largest bound first, the hierarchical ring's
//   query stops on its first rail (before 32a06ee: two fast rails ran to their ends first).
// - Arg 1, Mixtral-8x7B's: an allreduce of 148,434,944 bytes over 16 groups of 512 GPUs 22 nodes
//   apart (two per rail, sharing its spine up-links). The ring, the tuner's first, is contended
//   (22.1 ms, 16.7 M events) and loses to the double binary tree (11.05 ms, 1.05 M events), whose
//   bound is the smaller: priced first since a0fe95f, it rules the ring out by its bound.
void BM_TunerWithinOnRail131072(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(16384);
  const bool mixtral = state.range(0) == 1;
  std::vector<std::vector<DeviceId>> groups;
  if (mixtral) {
    for (DeviceId g = 0; g < 16; ++g) {
      groups.emplace_back();
      for (DeviceId k = 0; k < 512; ++k) groups.back().push_back(160 + g + 176 * k);
    }
  } else {
    for (DeviceId r = 0; r < 8; ++r) {
      groups.emplace_back();
      for (DeviceId k = 0; k < 2048; ++k) groups.back().push_back(24 + r + 64 * k);
    }
  }
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing,
                      Bytes(mixtral ? 148434944 : 3187933184)};
  spec.chunks = 0;
  spec.channels = 0;
  nest::coll::OracleStats stats;
  Time answer;
  for (auto _ : state) {
    nest::coll::CollectiveOracle oracle(rail);
    answer = oracle.fastest(spec, groups).answer.slowest;
    stats = oracle.stats();
  }
  state.counters["simulated_ms"] = answer.to_milliseconds();
  state.counters["simulations"] = static_cast<double>(stats.simulations);
  state.counters["events_run"] = static_cast<double>(stats.events - stats.avoided_events);
  state.counters["events_not_run"] = static_cast<double>(stats.avoided_events);
}
BENCHMARK(BM_TunerWithinOnRail131072)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(1);

// The event-free bound the placer's searches and the anneal's walk ask for
// (`CollectiveOracle::lower_bound`): a ring allreduce of 256 MiB under the bundled NCCL models
// over the n GPUs of the first n / 8 nodes of `h100_rail_1024.yaml`'s cluster grown to 512 nodes
// (4,096 GPUs): NCCL's channel rings (one per rail, forwarding on arrival), whose bound is
// derived from the ranks (coll/uncontended.h, `bound_ring`) instead of a pass over the rings'
// 2(n-1)·n transfers per channel. A fresh oracle per iteration (no memo; its
// routing tables included). Counters: channels and transfers.
void BM_RingBoundOnRail4096(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(512);
  const auto group = first_devices(static_cast<int>(state.range(0)));
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(256), 0};
  spec.channels = 0;
  const std::vector<std::vector<DeviceId>> groups{group};
  for (auto _ : state) {
    nest::coll::CollectiveOracle oracle(rail);
    benchmark::DoNotOptimize(oracle.lower_bound(spec, groups));
  }
  const nest::coll::CalibratedNetwork network(rail);
  const CollectiveSpec resolved = nest::coll::resolve(spec, network, group);
  state.counters["channels"] = resolved.channels;
  state.counters["transfers"] =
      static_cast<double>(nest::coll::transfer_count(resolved, static_cast<int>(group.size())));
}
BENCHMARK(BM_RingBoundOnRail4096)->Arg(64)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond);

// NCCL's rings whose pieces queue on their own routes: a two-channel all-gather of 1 GiB over
// 2 GPUs of each of the 512 nodes of `h100_rail_1024.yaml`'s cluster grown to 4,096 GPUs (GPU 0
// and 4 of each node, the topology-agnostic baseline's ZeRO-3 gathers of Llama-3.1-405B): the
// NVLink hop into each InfiniBand hop is faster, so up to 2 pieces share a NIC and the
// contention-free evaluation steps aside, but no two senders share a link, so the private
// rings' run answers (coll/private_rings.h); argument 1: the event simulator (`simulate`
// with `events_only`), the same numbers. The ideal network (line rates, no calibration).
// Counters: flows, events, events per second of CPU time, the simulated time (ms).
void BM_QueuedForwardingRingOnRail4096(benchmark::State& state) {
  static const nest::topo::Topology rail = nest::bench::h100_rail(512);
  std::vector<DeviceId> group;
  for (DeviceId d = 0; d < 4096; d += 4) group.push_back(d);
  CollectiveSpec spec{Operation::kAllGather, Algorithm::kRing, Bytes::gibibytes(1)};
  spec.channels = 2;
  spec.ranks_per_node = 2;
  spec.forward_on_arrival = true;
  const std::vector<std::vector<DeviceId>> groups{group};
  nest::coll::SimulationResult r;
  for (auto _ : state) {
    r = nest::coll::simulate(rail, spec, groups, {.events_only = state.range(0) == 1});
    benchmark::DoNotOptimize(r.makespan);
  }
  state.counters["flows"] = static_cast<double>(r.flows);
  state.counters["events"] = static_cast<double>(r.events);
  state.counters["simulated_ms"] = r.makespan.to_milliseconds();
  state.counters["events_per_s"] = benchmark::Counter(
      static_cast<double>(r.events), benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_QueuedForwardingRingOnRail4096)
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// Lowering the placer's single-stage sync, a double binary tree allreduce of 256 MiB in 16
// pieces over n ranks, to a stored schedule: afresh (second argument 0), or like the same tree
// lowered at 64 MiB (1: `lower`'s `like`, the placer's two probe sizes of one shape), which
// shares the other's gates and successors. Counter: transfers.
void BM_LowerTree(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 16};
  CollectiveSpec probe = spec;
  probe.size = Bytes::mebibytes(64);
  const nest::coll::Schedule like = nest::coll::lower(probe, n);
  std::uint64_t transfers = 0;
  for (auto _ : state) {
    const nest::coll::Schedule s =
        state.range(1) == 1 ? nest::coll::lower(spec, n, &like) : nest::coll::lower(spec, n);
    transfers = s.transfer_count();
    benchmark::DoNotOptimize(s.total_bytes());
  }
  state.counters["transfers"] = static_cast<double>(transfers);
}
BENCHMARK(BM_LowerTree)
    ->Args({96, 0})
    ->Args({96, 1})
    ->Args({1024, 0})
    ->Args({1024, 1})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
