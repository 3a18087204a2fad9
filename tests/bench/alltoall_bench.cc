// The contended-collective curve: pairwise all-to-all with 1 MiB per pair over the first n
// devices of the 1:1 k = 26 fat-tree (4,394 hosts, 400 Gb/s and 1 us per cable, ECMP seed 0),
// n = 128 .. 4,096: n(n-1) flows (16.8 M at 4,096), every rank's step k+1 gated by its step-k
// send and receive (coll's pairwise schedule, no barrier). ECMP collisions make it contended,
// so the event simulation answers. The figure to read is the CPU time per flow
// (`cpu_per_flow`): constant when the cost is linear in flows; the growth exponent between two
// rows is log(t2/t1)/log(f2/f1) (results/net_bench.md).
//
// Rows (`BM_PairwiseAllToAll/n/mode/fabric`; fabric 1 = the smallest fat-tree that holds n
// hosts instead of k = 26: k = 8, 12, 14, 16, 22 for n = 128 .. 2,048):
// - mode 0: `coll::simulate` as `nest collective` calls it (lowering, the
//   contention-free evaluation that gives up, then the event simulation).
// - mode 1: the event simulation alone (lowering and routing included), as
//   `simulate` runs it, with the simulator's counters: rate updates, flows rated (the work of
//   max-min sharing) and the routes the router holds at the end.
// Both print the exact makespan in picoseconds (the same in both rows and in every version: the
// simulation is exact) and the row's peak resident memory (`peak_rss_MB`, the process's peak
// since the row started, the topology included); mode 1 also prints a digest of every rank's
// end and every link's bytes, busy time and peak flows (as tests/unit/coll/alltoall_golden_test.cc
// folds them), so that two builds can be compared exactly at every size.

#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "bench_topologies.h"
#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/rng.h"
#include "nest/net/simulator.h"
#include "nest/topo/generators.h"
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

// Restarts the peak resident memory count (Linux: "5" to clear_refs resets VmHWM to VmRSS).
void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// The process's peak resident memory since `reset_peak_rss` (VmHWM), in MB; 0 if unknown.
double peak_rss_mb() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1e3;
  }
  return 0;
}

void BM_PairwiseAllToAll(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool events_alone = state.range(1) != 0;
  // Third argument 1: the smallest k-ary fat-tree that holds n hosts (k even, k^3/4 >= n), so
  // that the fabric is about as loaded at every size; 0 (default): k = 26 for every n.
  int k = 26;
  if (state.range(2) != 0) {
    for (k = 2; k * k * k / 4 < n; k += 2) {
    }
  }
  const nest::topo::Topology& topology = fat_tree(k);
  state.counters["k"] = k;
  // nccl-tests convention: the size is what each rank sends in all, 1 MiB to each of n ranks.
  const CollectiveSpec spec{Operation::kAllToAll, Algorithm::kPairwise,
                            Bytes::mebibytes(static_cast<std::int64_t>(n))};
  std::vector<DeviceId> group(static_cast<std::size_t>(n));
  std::iota(group.begin(), group.end(), 0U);
  std::uint64_t flows = 0;
  std::uint64_t events = 0;
  Time makespan;
  std::uint64_t digest = 0;
  reset_peak_rss();
  for (auto _ : state) {
    if (!events_alone) {
      const std::vector<std::vector<DeviceId>> groups{group};
      const nest::coll::SimulationResult r = nest::coll::simulate(topology, spec, groups, {});
      flows = r.flows;
      events = r.events;
      makespan = r.makespan;
      if (r.contention_free) state.SkipWithError("expected a contended run");
      continue;
    }
    const auto program = nest::coll::lower_program(nest::coll::resolve(spec, topology, group), n);
    nest::topo::Router router(topology, 0);
    nest::net::Simulator simulator(topology);
    nest::coll::Execution execution(simulator, router, program, group, 0);
    execution.start();
    simulator.run();
    if (!execution.finished()) state.SkipWithError("all-to-all did not finish");
    flows = program->transfer_count();
    events = simulator.events_processed();
    makespan = execution.duration();
    state.counters["rate_updates"] = static_cast<double>(simulator.rate_updates());
    state.counters["flows_rated"] = static_cast<double>(simulator.flows_rated());
    state.counters["routes_cached"] = static_cast<double>(router.cached_routes());
    state.PauseTiming();
    digest = 0;
    for (const Time end : execution.rank_end_times()) {
      digest = nest::hash_mix(digest, static_cast<std::uint64_t>(end.ps()));
    }
    for (nest::topo::LinkId l = 0; l < topology.num_links(); ++l) {
      const nest::net::LinkStats& s = simulator.link_stats(l);
      digest = nest::hash_mix(digest, std::bit_cast<std::uint64_t>(s.bytes));
      digest = nest::hash_mix(digest, static_cast<std::uint64_t>(s.busy.ps()));
      digest = nest::hash_mix(digest, s.peak_flows);
    }
    digest = nest::hash_mix(digest, simulator.events_processed());
    state.ResumeTiming();
  }
  state.counters["flows"] = static_cast<double>(flows);
  state.counters["events"] = static_cast<double>(events);
  state.SetLabel("makespan " + std::to_string(makespan.ps()) + " ps" +
                 (events_alone ? fmt::format(", digest {:#018x}", digest) : ""));
  state.counters["cpu_per_flow"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsIterationInvariantRate |
                                                         benchmark::Counter::kInvert);
  state.counters["peak_rss_MB"] = peak_rss_mb();
}
BENCHMARK(BM_PairwiseAllToAll)
    // Fabrics sized to n first: the process keeps the memory a large row freed.
    ->Args({128, 1, 1})
    ->Args({256, 1, 1})
    ->Args({512, 1, 1})
    ->Args({1024, 1, 1})
    ->Args({2048, 1, 1})
    ->Args({128, 1, 0})
    ->Args({128, 0, 0})
    ->Args({256, 1, 0})
    ->Args({256, 0, 0})
    ->Args({512, 1, 0})
    ->Args({512, 0, 0})
    ->Args({1024, 1, 0})
    ->Args({1024, 0, 0})
    ->Args({2048, 1, 0})
    ->Args({2048, 0, 0})
    ->Args({4096, 1, 0})
    ->Args({4096, 0, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
