// Do contended data-parallel rings repeat step by step? (issue 18: a contended ring could be
// simulated until its state repeats shifted in time, and the rest extrapolated.) The layout the
// placer's joint sync query prices: GPT-3-like plans in `tp-pp-dp` order on a rail-optimized
// H100 cluster (8 GPUs per node, 32 nodes per leaf, 50 GB/s NICs and spine cables, 1 us per
// cable, ECMP seed 0), tensor parallel 8, S = 8 stages, d = nodes / 8 replicas: stage s,
// replica k on node s + 8k, so the S rings of one rail (d members each) cross the same leaves'
// up-links. A ring allreduce of 256 MiB (`kJointSyncReference`) on every stage's ring of rail 0
// at once, event-simulated, every transfer's arrival recorded (the loop of `coll::Execution`).
//
// Counters, with a(g, r, k) the arrival of rank r's send of step k in ring g and
// v(k) = (a(g, r, k) - a(0, 0, k)) over all g, r (the offsets of step k):
// - repeat_1 / repeat_8: steps k with v(k) = v(k + q) exactly (q = 1, 8), over all steps: the
//   steps an extrapolation from a repeated observable state could skip at best (a repeated
//   state needs more than repeated arrivals, so this is an upper bound of what it would save);
// - offset_drift_us: the largest |v(k) - v(k - 1)| over the last quarter of the steps (0 when
//   the rings have settled into lockstep);
// - events, steps, simulated_ms.

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <vector>

#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/net/simulator.h"
#include "nest/topo/generators.h"
#include "nest/topo/router.h"

namespace {

using nest::Bandwidth;
using nest::Bytes;
using nest::Time;
using namespace nest::coll;
namespace topo = nest::topo;
namespace net = nest::net;

// `Execution`'s gate rule, recording each transfer's arrival.
class Recorder {
 public:
  Recorder(net::Simulator& simulator, topo::Router& router, std::shared_ptr<const Program> program,
           std::vector<topo::DeviceId> group)
      : simulator_(simulator),
        router_(router),
        program_(std::move(program)),
        group_(std::move(group)) {}

  void start() {
    arrival_.assign(program_->transfer_count(), Time::zero());
    const std::uint64_t dense = program_->dense_gates();
    waits_.resize(dense);
    for (std::uint64_t g = 0; g < dense; ++g) waits_[g] = program_->waits(g);
    std::vector<GateId> initial;
    program_->initial_gates(initial);
    for (GateId g : initial) open(g);
  }
  [[nodiscard]] const std::vector<Time>& arrivals() const { return arrival_; }

 private:
  void open(GateId gate) {
    std::vector<TransferId> sends;
    program_->sends(gate, sends);
    for (TransferId id : sends) {
      const Transfer t = program_->transfer(id);
      const topo::DeviceId src = group_[t.src];
      const topo::DeviceId dst = group_[t.dst];
      router_.route_into(src, dst, flow_key(src, dst, t.channel, 0), route_);
      simulator_.start_flow(route_, t.bytes, [this, id](net::FlowId, Time now) {
        arrival_[id] = now;
        for (GateId g : program_->successors(id)) {
          if (g != kNoGateId) count(g);
        }
      });
    }
  }
  void count(GateId gate) {
    if (!waits_.empty()) {
      if (--waits_[gate] == 0) open(gate);
      return;
    }
    const auto [it, added] = pending_.try_emplace(gate, 0U);
    if (added) it->second = program_->waits(gate);
    if (--it->second == 0) {
      pending_.erase(it);
      open(gate);
    }
  }

  net::Simulator& simulator_;
  topo::Router& router_;
  std::shared_ptr<const Program> program_;
  std::vector<topo::DeviceId> group_;
  std::vector<std::uint32_t> waits_;
  std::unordered_map<GateId, std::uint32_t> pending_;
  std::vector<Time> arrival_;
  std::vector<topo::LinkId> route_;
};

// Arguments: nodes, spines.
void BM_JointRingPeriodicity(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  topo::RailOptimizedParams p;
  p.nodes = nodes;
  p.gpus_per_node = 8;
  p.nodes_per_leaf = 32;
  p.spines = static_cast<int>(state.range(1));
  p.nvlink_bandwidth = Bandwidth::gigabytes_per_second(450);
  p.nvlink_latency = Time::nanoseconds(500);
  p.nic_bandwidth = Bandwidth::gigabytes_per_second(50);
  p.nic_latency = Time::microseconds(1);
  p.spine_bandwidth = Bandwidth::gigabytes_per_second(50);
  p.spine_latency = Time::microseconds(1);
  const topo::Topology t = topo::build_rail_optimized(p);
  constexpr int kStages = 8;
  const int d = nodes / kStages;
  const auto program = lower_program(
      CollectiveSpec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(256)}, d);
  const int steps = static_cast<int>(program->steps());
  std::vector<std::vector<std::int64_t>> offsets;  // [step][ring * d + rank]
  std::uint64_t events = 0;
  std::uint64_t updates = 0;
  std::uint64_t rated = 0;
  Time end;
  for (auto _ : state) {
    net::Simulator simulator(t);
    topo::Router router(t, 0);
    std::vector<std::unique_ptr<Recorder>> rings;
    for (int s = 0; s < kStages; ++s) {
      std::vector<topo::DeviceId> group;
      for (int k = 0; k < d; ++k)
        group.push_back(static_cast<topo::DeviceId>((s + kStages * k) * 8));
      rings.push_back(std::make_unique<Recorder>(simulator, router, program, group));
    }
    for (auto& r : rings) r->start();
    simulator.run();
    events = simulator.events_processed();
    updates = simulator.rate_updates();
    rated = simulator.flows_rated();
    offsets.assign(static_cast<std::size_t>(steps),
                   std::vector<std::int64_t>(static_cast<std::size_t>(kStages * d)));
    std::vector<std::vector<std::int64_t>> at = offsets;
    for (int g = 0; g < kStages; ++g) {
      const auto& a = rings[static_cast<std::size_t>(g)]->arrivals();
      for (TransferId id = 0; id < program->transfer_count(); ++id) {
        const Transfer tr = program->transfer(id);
        at[tr.step][static_cast<std::size_t>(g * d) + tr.src] = a[id].ps();
        end = std::max(end, a[id]);
      }
    }
    for (int k = 0; k < steps; ++k) {
      for (std::size_t i = 0; i < at[static_cast<std::size_t>(k)].size(); ++i) {
        offsets[static_cast<std::size_t>(k)][i] =
            at[static_cast<std::size_t>(k)][i] - at[static_cast<std::size_t>(k)][0];
      }
    }
  }
  const auto repeats = [&](int q) {
    int n = 0;
    for (int k = 0; k + q < steps; ++k) {
      n += offsets[static_cast<std::size_t>(k)] == offsets[static_cast<std::size_t>(k + q)] ? 1 : 0;
    }
    return n;
  };
  long long drift = 0;
  for (int k = std::max(1, steps - steps / 4); k < steps; ++k) {
    for (std::size_t i = 0; i < offsets[0].size(); ++i) {
      drift = std::max(drift, std::llabs(offsets[static_cast<std::size_t>(k)][i] -
                                         offsets[static_cast<std::size_t>(k - 1)][i]));
    }
  }
  state.counters["steps"] = steps;
  state.counters["repeat_1"] = repeats(1);
  state.counters["repeat_8"] = repeats(8);
  state.counters["offset_drift_us"] = static_cast<double>(drift) / 1e6;
  state.counters["events"] = static_cast<double>(events);
  state.counters["rate_updates"] = static_cast<double>(updates);
  state.counters["flows_rated"] = static_cast<double>(rated);
  state.counters["simulated_ms"] = end.to_seconds() * 1e3;
}

BENCHMARK(BM_JointRingPeriodicity)
    ->ArgsProduct({{128, 512, 1024, 2048}, {8, 16, 32}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
