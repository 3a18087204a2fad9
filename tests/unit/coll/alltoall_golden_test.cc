// Golden results of the contended pairwise all-to-all through the collective layer, as
// tests/bench/alltoall_bench.cc runs it (1 MiB per pair, the first n devices of a 400 Gb/s,
// 1 us fat-tree, ECMP seed 0): every rank's end, the events and every link's statistics
// (bytes as bits, busy picoseconds, peak flows) folded into a digest, and `coll::simulate`'s
// makespan and busiest links. The expected values were recorded with commit 132f4cb (main
// before the per-flow cost work of issue 18, item 2): a change of the simulator, the router or
// the pairwise program that moved any arrival by one picosecond or any link's bytes by one bit
// fails here. To re-bless after an intended change of results, run with NEST_GOLDEN_PRINT=1 in
// the environment and copy the printed values (and say why in the commit).

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/rng.h"
#include "nest/net/simulator.h"
#include "nest/topo/generators.h"
#include "nest/topo/router.h"

namespace nest::coll {
namespace {

topo::Topology fat_tree(int k) {
  topo::FatTreeParams p;
  p.k = k;
  p.link_bandwidth = Bandwidth::gigabits_per_second(400);
  p.link_latency = Time::microseconds(1);
  return topo::build_fat_tree(p);
}

void fold(std::uint64_t& digest, std::uint64_t value) { digest = hash_mix(digest, value); }

struct Outcome {
  std::uint64_t digest = 0;
  std::int64_t makespan_ps = 0;
  std::uint64_t events = 0;
  std::uint64_t links_used = 0;  // links that carried bytes
};

CollectiveSpec pairwise(int n) {
  return {Operation::kAllToAll, Algorithm::kPairwise, Bytes::mebibytes(n)};
}

// The event simulation through an `Execution`, as `simulate` runs it.
Outcome run_execution(const topo::Topology& t, int n) {
  std::vector<topo::DeviceId> group(static_cast<std::size_t>(n));
  std::iota(group.begin(), group.end(), 0U);
  const auto program = lower_program(resolve(pairwise(n), t, group), n);
  topo::Router router(t, 0);
  net::Simulator sim(t);
  Execution execution(sim, router, program, group, 0);
  execution.start();
  sim.run();
  EXPECT_TRUE(execution.finished());
  Outcome out;
  for (const Time end : execution.rank_end_times()) {
    fold(out.digest, static_cast<std::uint64_t>(end.ps()));
  }
  const auto links = static_cast<topo::LinkId>(t.num_links());
  for (topo::LinkId l = 0; l < links; ++l) {
    const net::LinkStats& s = sim.link_stats(l);
    fold(out.digest, std::bit_cast<std::uint64_t>(s.bytes));
    fold(out.digest, static_cast<std::uint64_t>(s.busy.ps()));
    fold(out.digest, s.peak_flows);
    if (s.bytes > 0) ++out.links_used;
  }
  fold(out.digest, sim.events_processed());
  out.makespan_ps = execution.duration().ps();
  out.events = sim.events_processed();
  return out;
}

// `simulate` as `nest collective` calls it: makespan, events and every used link's statistics.
Outcome run_simulate(const topo::Topology& t, int n) {
  std::vector<topo::DeviceId> group(static_cast<std::size_t>(n));
  std::iota(group.begin(), group.end(), 0U);
  const std::vector<std::vector<topo::DeviceId>> groups{group};
  const SimulationResult r =
      simulate(t, pairwise(n), groups, {.busiest_links = static_cast<int>(t.num_links())});
  EXPECT_FALSE(r.contention_free);
  Outcome out;
  for (const LinkUse& use : r.busiest) {
    fold(out.digest, use.link);
    fold(out.digest, std::bit_cast<std::uint64_t>(use.bytes));
    fold(out.digest, static_cast<std::uint64_t>(use.busy.ps()));
    fold(out.digest, use.peak_flows);
    ++out.links_used;
  }
  fold(out.digest, r.events);
  out.makespan_ps = r.makespan.ps();
  out.events = r.events;
  return out;
}

struct Golden {
  const char* name;
  int k;
  int n;
  bool through_simulate;
  Outcome expected;
};

TEST(AllToAllGolden, PairwiseRunsMatchTheRecordedRunsToThePicosecond) {
  // Recorded at commit 132f4cb (see the file comment).
  const Golden goldens[] = {
      {"k26_256_execution", 26, 256, false, {0xa4ddc43d03654198ULL, 16454312444, 130560, 1708}},
      {"k26_256_simulate", 26, 256, true, {0x105f0a53ef93071ULL, 16454312444, 130560, 1708}},
      {"k12_384_execution", 12, 384, false, {0x4b8c19683e8290a5ULL, 27145754559, 294144, 2328}},
  };
  const bool print = std::getenv("NEST_GOLDEN_PRINT") != nullptr;
  for (const Golden& g : goldens) {
    SCOPED_TRACE(g.name);
    const topo::Topology t = fat_tree(g.k);
    const Outcome got = g.through_simulate ? run_simulate(t, g.n) : run_execution(t, g.n);
    if (print) {
      std::printf(
          "%s: {%#llxULL, %lld, %llu, %llu}\n", g.name, static_cast<unsigned long long>(got.digest),
          static_cast<long long>(got.makespan_ps), static_cast<unsigned long long>(got.events),
          static_cast<unsigned long long>(got.links_used));
      continue;
    }
    EXPECT_EQ(got.makespan_ps, g.expected.makespan_ps);
    EXPECT_EQ(got.events, g.expected.events);
    EXPECT_EQ(got.links_used, g.expected.links_used);
    EXPECT_EQ(got.digest, g.expected.digest);
  }
}

}  // namespace
}  // namespace nest::coll
