// Benchmarks of the flow-level simulator (net): raw event throughput (user events and hold
// models with 2^10 .. 2^20 events pending, through the simulator and on the event queue alone),
// and collective-shaped flow patterns over a two-level leaf-spine built by hand (so the figures
// do not depend on the topology generators or the router). The all-to-all curve through the
// collective layer is tests/bench/alltoall_bench.cc.
//
// Fabric: `hosts` devices, leaves of 16 hosts, 16 spines, every leaf joined to every spine
// (non-blocking, 1:1): 50 GB/s (400 Gb/s) everywhere, 500 ns per hop. Routes: host -> leaf ->
// (spine) -> leaf -> host; the spine is dst mod 16 ("d-mod-k", contention-free for the shift
// patterns below) or an ECMP hash of (src, dst) (collisions make contention and many distinct
// completion times).
//
// Patterns, each with per-rank dependencies (a rank starts step k+1 when its step-k send has
// been delivered and its step-k receive has arrived; no global barrier):
// - pairwise all-to-all: step k (0..n-1), rank i sends `size` to (i+k) mod n and receives from
//   (i-k) mod n; step 0 is the local copy (empty route). n^2 flows.
// - ring: 2(n-1) steps, rank i sends size/n to i+1 and receives from i-1 (the flows of a ring
//   allreduce). 2n(n-1) flows.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "nest/core/rng.h"
#include "nest/net/event_queue.h"
#include "nest/net/simulator.h"
#include "nest/topo/topology.h"

namespace {

using nest::Bandwidth;
using nest::Bytes;
using nest::Time;
using nest::net::FlowId;
using nest::net::Simulator;
using nest::topo::LinkId;

constexpr int kHostsPerLeaf = 16;
constexpr int kSpines = 16;

enum class Routing { kDestinationModK, kEcmpHash };

class LeafSpine {
 public:
  explicit LeafSpine(int hosts)
      : hosts_(hosts), topology_("leafspine", nest::topo::Family::kSpineLeaf) {
    const auto rate = Bandwidth::gigabytes_per_second(50);
    const auto latency = Time::nanoseconds(500);
    for (int h = 0; h < hosts; ++h) topology_.add_device("h" + std::to_string(h));
    const int leaves = (hosts + kHostsPerLeaf - 1) / kHostsPerLeaf;
    std::vector<nest::topo::NodeId> leaf_ids, spine_ids;
    for (int l = 0; l < leaves; ++l) leaf_ids.push_back(topology_.add_switch("leaf", 1));
    for (int s = 0; s < kSpines; ++s) spine_ids.push_back(topology_.add_switch("spine", 2));
    for (int h = 0; h < hosts; ++h) {
      topology_.add_link(static_cast<nest::topo::NodeId>(h), leaf_ids[h / kHostsPerLeaf], rate,
                         latency);
    }
    for (const auto leaf : leaf_ids) {
      for (const auto spine : spine_ids) topology_.add_link(leaf, spine, rate, latency);
    }
  }

  [[nodiscard]] const nest::topo::Topology& topology() const { return topology_; }

  /// Appends the route src -> dst to `out`.
  void route(int src, int dst, Routing routing, std::vector<LinkId>& out) const {
    if (src == dst) return;
    const auto up = static_cast<LinkId>(2 * src);
    const auto down = static_cast<LinkId>(2 * dst + 1);
    const int src_leaf = src / kHostsPerLeaf;
    const int dst_leaf = dst / kHostsPerLeaf;
    if (src_leaf == dst_leaf) {
      out.insert(out.end(), {up, down});
      return;
    }
    const int spine =
        routing == Routing::kDestinationModK
            ? dst % kSpines
            : static_cast<int>(nest::hash_mix(static_cast<std::uint64_t>(src) * 65536U +
                                                  static_cast<std::uint64_t>(dst),
                                              1) %
                               kSpines);
    const auto uplink = static_cast<LinkId>(2 * (hosts_ + src_leaf * kSpines + spine));
    const auto downlink = static_cast<LinkId>(2 * (hosts_ + dst_leaf * kSpines + spine) + 1);
    out.insert(out.end(), {up, uplink, downlink, down});
  }

 private:
  int hosts_;
  nest::topo::Topology topology_;
};

/// A step pattern: what each rank sends at each step, and the routes, flat (route r is
/// links[offset[r]..offset[r+1])). A ring keeps one route per rank, all-to-all one per pair.
struct Pattern {
  int ranks = 0;
  int steps = 0;
  bool ring = false;
  Bytes size;
  std::vector<LinkId> links;
  std::vector<std::size_t> offset;

  [[nodiscard]] int to(int rank, int step) const {
    return ring ? (rank + 1) % ranks : (rank + step) % ranks;
  }
  [[nodiscard]] std::span<const LinkId> route(int rank, int step) const {
    const auto r = static_cast<std::size_t>(rank) * (ring ? 1U : static_cast<std::size_t>(ranks)) +
                   (ring ? 0U : static_cast<std::size_t>(to(rank, step)));
    return {links.data() + offset[r], offset[r + 1] - offset[r]};
  }
  [[nodiscard]] std::size_t flows() const {
    return static_cast<std::size_t>(ranks) * static_cast<std::size_t>(steps);
  }
};

Pattern make_pattern(const LeafSpine& fabric, int n, bool ring, Bytes size, Routing routing) {
  Pattern p;
  p.ranks = n;
  p.steps = ring ? 2 * (n - 1) : n;
  p.ring = ring;
  // A ring allreduce of `size` moves size/n per step.
  p.size = ring ? Bytes(size.count() / n) : size;
  for (int i = 0; i < n; ++i) {
    for (int dst = 0; dst < n; ++dst) {
      if (ring && dst != (i + 1) % n) continue;
      p.offset.push_back(p.links.size());
      fabric.route(i, dst, routing, p.links);
    }
  }
  p.offset.push_back(p.links.size());
  return p;
}

/// Runs a pattern with per-rank dependencies on a fresh simulator.
class Driver {
 public:
  Driver(const nest::topo::Topology& topology, const Pattern& pattern)
      : sim_(topology),
        pattern_(pattern),
        step_(static_cast<std::size_t>(pattern.ranks), 0),
        sent_(pattern.flows(), 0),
        received_(pattern.flows(), 0) {}

  void run() {
    for (int i = 0; i < pattern_.ranks; ++i) start(i);
    sim_.run();
  }
  [[nodiscard]] const Simulator& sim() const { return sim_; }

 private:
  [[nodiscard]] std::size_t index(int rank, int step) const {
    return static_cast<std::size_t>(rank) * static_cast<std::size_t>(pattern_.steps) +
           static_cast<std::size_t>(step);
  }

  void start(int rank) {
    const int step = step_[static_cast<std::size_t>(rank)];
    const int dst = pattern_.to(rank, step);
    const std::span<const LinkId> route = pattern_.route(rank, step);
    sim_.start_flow(route, pattern_.size, [this, rank, dst, step](FlowId, Time) {
      sent_[index(rank, step)] = 1;
      received_[index(dst, step)] = 1;
      advance(rank);
      if (dst != rank) advance(dst);
    });
  }

  void advance(int rank) {
    const auto r = static_cast<std::size_t>(rank);
    const std::size_t i = index(rank, step_[r]);
    if (!sent_[i] || !received_[i]) return;
    if (++step_[r] < pattern_.steps) start(rank);
  }

  Simulator sim_;
  const Pattern& pattern_;
  std::vector<int> step_;
  std::vector<std::uint8_t> sent_;
  std::vector<std::uint8_t> received_;
};

void report(benchmark::State& state, const Simulator& sim, std::size_t flows) {
  const auto events = static_cast<double>(sim.events_processed());
  state.counters["flows"] = static_cast<double>(flows);
  state.counters["events"] = events;
  state.counters["rate_updates"] = static_cast<double>(sim.rate_updates());
  state.counters["flows_rated"] = static_cast<double>(sim.flows_rated());
  state.counters["simulated_ms"] = sim.now().to_milliseconds();
  state.counters["events_per_s"] =
      benchmark::Counter(events, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["flows_per_s"] =
      benchmark::Counter(static_cast<double>(flows), benchmark::Counter::kIsIterationInvariantRate);
}

void run_pattern(benchmark::State& state, bool ring, Bytes size) {
  const int n = static_cast<int>(state.range(0));
  const auto routing = static_cast<Routing>(state.range(1));
  const LeafSpine fabric(n);
  const Pattern pattern = make_pattern(fabric, n, ring, size, routing);
  std::uint64_t events = 0;
  for (auto _ : state) {
    Driver driver(fabric.topology(), pattern);
    driver.run();
    events = driver.sim().events_processed();
    if (driver.sim().active_flows() != 0) state.SkipWithError("flows left undelivered");
    state.PauseTiming();
    report(state, driver.sim(), pattern.flows());
    state.ResumeTiming();
  }
  benchmark::DoNotOptimize(events);
}

// Pairwise all-to-all, 1 MiB per pair. Args: devices, routing (0 d-mod-k, 1 ECMP hash).
void BM_PairwiseAllToAll(benchmark::State& state) {
  run_pattern(state, /*ring=*/false, Bytes::mebibytes(1));
}
BENCHMARK(BM_PairwiseAllToAll)
    ->Args({128, 0})
    ->Args({256, 0})
    ->Args({512, 0})
    ->Args({128, 1})
    ->Args({256, 1})
    ->Args({512, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Flows of a ring allreduce of 1 GiB. Args: devices, routing.
void BM_RingAllreduceFlows(benchmark::State& state) {
  run_pattern(state, /*ring=*/true, Bytes::gibibytes(1));
}
BENCHMARK(BM_RingAllreduceFlows)
    ->Args({256, 0})
    ->Args({512, 0})
    ->Args({1024, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Direct (one-shot) all-to-all: every pair's 1 MiB flow starts at once, one connected component
// of n(n-1) flows. With ECMP collisions rates differ, flows drain at many different times and
// each drain re-rates the whole remaining component: the worst case of max-min sharing.
// Args: devices, routing, reuse of lower max-min levels (1 = on, the default; 0 = full refill).
void BM_DirectAllToAll(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const auto routing = static_cast<Routing>(state.range(1));
  const bool reuse = state.range(2) != 0;
  const LeafSpine fabric(n);
  const Pattern pattern = make_pattern(fabric, n, /*ring=*/false, Bytes::mebibytes(1), routing);
  for (auto _ : state) {
    Simulator sim(fabric.topology());
    sim.reuse_lower_levels(reuse);
    for (int i = 0; i < n; ++i) {
      for (int k = 1; k < n; ++k) sim.start_flow(pattern.route(i, k), pattern.size, nullptr);
    }
    sim.run();
    state.PauseTiming();
    report(state, sim, static_cast<std::size_t>(n) * static_cast<std::size_t>(n - 1));
    state.ResumeTiming();
  }
}
BENCHMARK(BM_DirectAllToAll)
    ->Args({128, 0, 1})
    ->Args({512, 0, 1})
    ->Args({128, 1, 0})
    ->Args({128, 1, 1})
    ->Args({256, 1, 1})
    ->Args({512, 1, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Raw event throughput: `n` user events at pseudo-random times, each a small callback.
void BM_UserEvents(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const LeafSpine fabric(16);
  std::uint64_t sum = 0;
  for (auto _ : state) {
    Simulator sim(fabric.topology());
    nest::Rng rng(1);
    for (std::size_t i = 0; i < n; ++i) {
      sim.schedule(Time::picoseconds(static_cast<std::int64_t>(rng.below(1'000'000'000))),
                   [&sum, i] { sum += i; });
    }
    sim.run();
    state.counters["events_per_s"] = benchmark::Counter(
        static_cast<double>(sim.events_processed()), benchmark::Counter::kIsIterationInvariantRate);
  }
  benchmark::DoNotOptimize(sum);
}
BENCHMARK(BM_UserEvents)
    ->Arg(1 << 10)
    ->Arg(1 << 16)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// Events of a hold model with `pending` events queued: 2^20, or 4 x pending when larger (so that
// most events run with about `pending` others queued).
std::uint64_t hold_events(std::uint64_t pending) {
  return std::max<std::uint64_t>(1 << 20, 4 * pending);
}

// The classic "hold" model through the simulator: `pending` events in the queue; each one, when
// it runs, schedules its successor at a pseudo-random delay of 1 ps..1 us (a user action: the
// queue, the action table and a std::function call per event).
void BM_HoldModel(benchmark::State& state) {
  const auto pending = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t total = hold_events(pending);
  const LeafSpine fabric(16);
  for (auto _ : state) {
    Simulator sim(fabric.topology());
    nest::Rng rng(2);
    std::uint64_t scheduled = 0;
    std::function<void()> hold = [&] {
      if (scheduled >= total) return;
      ++scheduled;
      sim.schedule(
          sim.now() + Time::picoseconds(static_cast<std::int64_t>(1 + rng.below(1'000'000))),
          [&hold] { hold(); });
    };
    for (std::uint64_t i = 0; i < pending; ++i) hold();
    sim.run();
    state.counters["events_per_s"] = benchmark::Counter(
        static_cast<double>(sim.events_processed()), benchmark::Counter::kIsIterationInvariantRate);
  }
}
BENCHMARK(BM_HoldModel)
    ->Arg(1 << 10)
    ->Arg(1 << 16)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The hold model on the event queue alone (nest/net/event_queue.h): pop the earliest event and
// push its successor 1 ps..1 us later, with `pending` events queued; a share of the successors
// (one in 8) get the same time as the event popped, at a higher priority, as a simulator's
// same-time follow-ups do.
void BM_EventQueueHold(benchmark::State& state) {
  const auto pending = static_cast<std::uint64_t>(state.range(0));
  const std::uint64_t total = hold_events(pending);
  std::uint64_t checksum = 0;
  for (auto _ : state) {
    nest::net::EventQueue queue;
    nest::Rng rng(3);
    for (std::uint64_t i = 0; i < pending; ++i) {
      queue.push(Time::picoseconds(static_cast<std::int64_t>(1 + rng.below(1'000'000))), 0, 0,
                 static_cast<std::uint32_t>(i), 0);
    }
    for (std::uint64_t i = pending; i < total; ++i) {
      const nest::net::QueuedEvent e = queue.pop();
      checksum += e.target;
      const bool follow_up = (i & 7U) == 0;
      const Time at =
          follow_up
              ? e.time
              : e.time + Time::picoseconds(static_cast<std::int64_t>(1 + rng.below(1'000'000)));
      queue.push(at, follow_up ? 1 : 0, 0, static_cast<std::uint32_t>(i), 0);
    }
    while (!queue.empty()) checksum += queue.pop().target;
    state.counters["events_per_s"] = benchmark::Counter(
        static_cast<double>(total), benchmark::Counter::kIsIterationInvariantRate);
  }
  benchmark::DoNotOptimize(checksum);
}
BENCHMARK(BM_EventQueueHold)
    ->Arg(1 << 10)
    ->Arg(1 << 16)
    ->Arg(1 << 20)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
