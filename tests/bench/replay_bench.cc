// Replay speed: one iteration of GPT-3 175B (the NEST artifact's H100 profile, t = 4, 8
// stages of 12 blocks) on the 1,024-GPU rail-optimized cluster, with the data-parallel degree
// (devices) and the microbatches per iteration varied. Issue 6 target: 1,024 devices and 4,096
// microbatches in under 60 s.

#include <benchmark/benchmark.h>

#include <string>

#include "bench_topologies.h"
#include "nest/coll/oracle.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/replay/plan_replay.h"
#include "nest/topo/loader.h"
#include "nest/workload/profile_file.h"

namespace {

using namespace nest;

const std::string kRoot = NEST_SOURCE_DIR;

void BM_ReplayGpt3(benchmark::State& state) {
  const int d = static_cast<int>(state.range(0));
  const std::int64_t microbatches = state.range(1);
  workload::LayerProfile profile =
      workload::load_layer_profile(kRoot + "/workloads/profiles/gpt3-175b-h100.yaml");
  profile.variants.resize(1);  // t = 4
  profile.variants[0].microbatches = microbatches;
  profile.global_batch = microbatches;
  const topo::Topology topology = topo::load_topology(kRoot + "/topologies/h100_rail_1024.yaml");
  placer::PlanChoice choice;
  choice.boundaries = {0, 13, 25, 37, 49, 61, 73, 85, 97};
  choice.data_parallel = d;
  choice.recompute = nest::workload::Recompute::kFull;
  placer::OracleCommCost comm(topology);
  const placer::CostOptions options{.rules = workload::MemoryRules::kNestArtifact,
                                    .devices = static_cast<std::int64_t>(topology.num_devices())};
  const placer::Plan plan = placer::evaluate(profile, choice, comm, options);
  std::size_t rows = 0;
  for (auto _ : state) {
    const replay::RunRecord r = replay::replay_plan(plan, profile, topology, {});
    rows = r.timeline.size();
    benchmark::DoNotOptimize(r.summary.iteration_time);
  }
  state.counters["devices"] = static_cast<double>(plan.devices_used);
  state.counters["microbatches"] = static_cast<double>(microbatches);
  state.counters["timeline_rows"] = static_cast<double>(rows);
}

BENCHMARK(BM_ReplayGpt3)
    ->ArgsProduct({{4, 8, 16, 32}, {4096}})
    ->ArgsProduct({{32}, {1024, 2048}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// Issue 18, item 4: GPT-3 175B (the artifact profile's t = 8 variant, full recomputation) on
// rail clusters of `nodes` DGX-H100 nodes like topologies/h100_rail_1024.yaml (32 spines, the
// NCCL models) with `nodes_per_leaf` nodes per leaf, 16 stages of 6 blocks, d = nodes / 16
// replicas placed tp-dp-pp (the plan `nest place --tp 8 --pp 16 --dp 128` chooses at 16,384
// GPUs), 12 microbatches per replica; `merge` = PlanReplayOptions::merge_shards, `alone` =
// PlanReplayOptions::alone_reductions, `shared` = the buckets' algorithms chosen on the oracle
// that priced the plan (as `nest simulate` does; else a fresh one). Counters: devices, timeline
// rows, the shards simulated per stage replica (1 where one plane stands for all; 8 where the
// shards' flows meet: with 32 nodes per leaf, ECMP over the spines picks different paths in
// different rails; with one leaf per rail the planes are disjoint), and the bucket reductions timed
// alone.
void BM_ReplayGpt3Rail(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const auto nodes_per_leaf = state.range(1);
  const int d = nodes / 16;
  const std::int64_t microbatches = 12 * d;
  workload::LayerProfile profile =
      workload::load_layer_profile(kRoot + "/workloads/profiles/gpt3-175b-h100.yaml");
  profile.variants.erase(profile.variants.begin());  // t = 8
  profile.variants[0].microbatches = microbatches;
  profile.global_batch = microbatches;
  const topo::Topology topology = bench::h100_rail(nodes, static_cast<int>(nodes_per_leaf));
  placer::PlanChoice choice;
  choice.boundaries = {0};
  for (int i = 1; i < 16; ++i) choice.boundaries.push_back(1 + 6 * i);
  choice.boundaries.push_back(97);
  choice.data_parallel = d;
  choice.order = placer::PlacementOrder::kTensorDataPipeline;
  choice.recompute = nest::workload::Recompute::kFull;
  placer::OracleCommCost comm(topology);
  const placer::CostOptions options{.rules = workload::MemoryRules::kNestArtifact,
                                    .devices = static_cast<std::int64_t>(topology.num_devices())};
  const placer::Plan plan = placer::evaluate(profile, choice, comm, options);
  replay::PlanReplayOptions replay_options;
  replay_options.merge_shards = state.range(2) != 0;
  replay_options.alone_reductions = state.range(3) != 0;
  coll::CollectiveOracle* tuner = state.range(4) != 0 ? &comm.collective_oracle() : nullptr;
  std::size_t rows = 0;
  int simulated = 0;
  int alone = 0;
  for (auto _ : state) {
    const replay::RunRecord r = replay::replay_plan(plan, profile, topology, replay_options, tuner);
    rows = r.timeline.size();
    simulated = r.simulated_shards;
    alone = r.alone_reductions;
    benchmark::DoNotOptimize(r.summary.iteration_time);
  }
  state.counters["devices"] = static_cast<double>(plan.devices_used);
  state.counters["timeline_rows"] = static_cast<double>(rows);
  state.counters["simulated_shards"] = simulated;
  state.counters["alone_reductions"] = alone;
}

BENCHMARK(BM_ReplayGpt3Rail)
    ->Args({128, 32, 1, 1, 0})
    ->Args({128, 32, 1, 0, 0})
    ->Args({512, 32, 1, 1, 0})
    ->Args({512, 32, 1, 0, 0})
    ->Args({2048, 32, 1, 1, 0})
    ->Args({2048, 32, 1, 0, 0})
    ->Args({2048, 32, 1, 1, 1})
    ->Args({16384, 32, 1, 1, 0})
    ->Args({16384, 32, 1, 1, 1})
    ->Args({128, 128, 1, 1, 0})
    ->Args({128, 128, 0, 1, 0})
    ->Args({512, 512, 1, 1, 0})
    ->Args({512, 512, 0, 1, 0})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
