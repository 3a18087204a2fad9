// Solve time of the NEST search (nest place), including the network oracle.
// - GPT-3 175B and Llama-2-7B (workloads/models) on H100s (workloads/accelerators/h100-sxm) with
//   micro-batches 1, 2, 4 and tensor parallel 1..8 (sequence parallel with t > 1): 12 variants,
//   megatron rules, ZeRO 0..3, recomputation on/off, placement orders tp-pp-dp and tp-dp-pp;
// - networks: the collective oracle (flow-level simulation) on rail-optimized H100 clusters of
//   8-GPU nodes, 32 nodes per leaf, 1:1 (topologies/h100_rail_1024.yaml's parameters, with
//   nodes = devices / 8 and spines = 32), and the zero network for comparison;
// - growth with devices (GPT-3, 128..16,384) and with layers (GPT-3's block with 24..384
//   blocks, 1,024 devices).
// - what the search keeps for verification by replay (GPT-3, 256 and 1,024 devices).
// Each iteration builds a fresh oracle (no memo carried between iterations). The profile is
// built outside the timed region (it takes milliseconds). Counters: DP tables, states, memory
// queries, candidates priced in full, distinct network queries and oracle simulations.

#include <benchmark/benchmark.h>

#include <map>
#include <memory>
#include <string>

#include "nest/placer/comm_cost.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/topo/generators.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

namespace {

using namespace nest;

const workload::Accelerator& h100() {
  static const workload::Accelerator a = workload::load_accelerator(
      std::string(NEST_SOURCE_DIR) + "/workloads/accelerators/h100-sxm.yaml");
  return a;
}

workload::LayerProfile profile_of(const std::string& name, int blocks = 0) {
  workload::Model m =
      workload::load_model(std::string(NEST_SOURCE_DIR) + "/workloads/models/" + name + ".yaml");
  if (blocks > 0) m.layers = blocks;
  const workload::BuildOptions build;
  return workload::build_profile(m, h100(), placer::candidate_configs(m, build, {}), build);
}

const topo::Topology& rail(int devices) {
  static std::map<int, std::unique_ptr<topo::Topology>> cache;  // bench-local, one thread
  auto& t = cache[devices];
  if (!t) {
    t = std::make_unique<topo::Topology>(
        topo::build_rail_optimized({.nodes = devices / 8,
                                    .gpus_per_node = 8,
                                    .nodes_per_leaf = 32,
                                    .spines = 32,
                                    .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                    .nvlink_latency = Time::microseconds(0.5),
                                    .nic_bandwidth = Bandwidth::gigabits_per_second(400),
                                    .nic_latency = Time::microseconds(1),
                                    .spine_bandwidth = Bandwidth::gigabits_per_second(400),
                                    .spine_latency = Time::microseconds(1)}));
  }
  return *t;
}

// What the search keeps for verification by replay (nest place --verify 4).
enum class Keep { kBest = 0, kFourPerOrder = 1, kFourToReplay = 2 };

void run(benchmark::State& state, const workload::LayerProfile& profile, int devices, bool oracle,
         Keep keep = Keep::kBest, bool capped = true) {
  placer::SearchOptions options;
  options.cost = {.rules = workload::MemoryRules::kMegatron,
                  .devices = devices,
                  .memory_bandwidth = h100().hbm_bandwidth * h100().memory_efficiency};
  if (keep == Keep::kFourPerOrder) options.keep_per_order = 4;
  if (keep == Keep::kFourToReplay) options.replay_candidates = 4;
  options.capped_passes = capped;
  placer::SearchStats stats;
  std::uint64_t simulations = 0;
  double seconds = 0;
  for (auto _ : state) {
    std::unique_ptr<placer::CommCost> comm;
    placer::OracleCommCost* o = nullptr;
    if (oracle) {
      auto p = std::make_unique<placer::OracleCommCost>(rail(devices));
      o = p.get();
      comm = std::move(p);
    } else {
      comm = std::make_unique<placer::ZeroCommCost>();
    }
    const auto result = placer::search(profile, *comm, options);
    benchmark::DoNotOptimize(result.best);
    stats = result.stats;
    simulations = o != nullptr ? o->stats().simulations : 0;
    if (result.best) seconds = result.best->iteration_time.to_seconds();
  }
  state.counters["tables"] = static_cast<double>(stats.tables);
  state.counters["states"] = static_cast<double>(stats.states);
  state.counters["memory_queries"] = static_cast<double>(stats.memory_queries);
  state.counters["candidates"] = static_cast<double>(stats.candidates);
  state.counters["net_queries"] = static_cast<double>(stats.network_queries);
  state.counters["passes"] = static_cast<double>(stats.passes);
  state.counters["simulations"] = static_cast<double>(simulations);
  state.counters["iteration_s"] = seconds;
}

void BM_Gpt3OnRail(benchmark::State& state) {
  static const auto profile = profile_of("gpt3-175b");
  run(state, profile, static_cast<int>(state.range(0)), state.range(1) != 0);
}
BENCHMARK(BM_Gpt3OnRail)
    ->ArgNames({"devices", "oracle"})
    ->ArgsProduct({{128, 256, 512, 1024, 2048, 4096, 8192, 16384}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The search of `nest place --verify 4`: the best plan only (--verify 0), the 4 best of each
// placement order (the verification's search before replay_candidates), and the 4 plans the
// verification replays (replay_candidates; the same candidates).
void BM_Gpt3KeepForVerify(benchmark::State& state) {
  static const auto profile = profile_of("gpt3-175b");
  run(state, profile, static_cast<int>(state.range(0)), true, static_cast<Keep>(state.range(1)));
}
BENCHMARK(BM_Gpt3KeepForVerify)
    ->ArgNames({"devices", "keep"})
    ->ArgsProduct({{256, 1024}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The --verify 4 search (replay_candidates 4) of Llama-3.1-405B on 4,096 rail GPUs in one
// uncapped pass (capped 0) and in capped passes (capped 1, the default since e0f7e7d): the same
// candidates; the uncapped pass prices a ZeRO-3 plan over 1,024-GPU groups in full.
void BM_Llama405BVerifyOnRail4096(benchmark::State& state) {
  static const auto profile = profile_of("llama3.1-405b");
  run(state, profile, 4096, true, Keep::kFourToReplay, state.range(0) != 0);
}
BENCHMARK(BM_Llama405BVerifyOnRail4096)
    ->ArgNames({"capped"})
    ->Arg(0)
    ->Arg(1)
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_Llama2_7BOnRail(benchmark::State& state) {
  static const auto profile = profile_of("llama2-7b");
  run(state, profile, static_cast<int>(state.range(0)), state.range(1) != 0);
}
BENCHMARK(BM_Llama2_7BOnRail)
    ->ArgNames({"devices", "oracle"})
    ->ArgsProduct({{1024}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

void BM_Gpt3BlocksOnRail1024(benchmark::State& state) {
  static std::map<int, workload::LayerProfile> profiles;
  const int blocks = static_cast<int>(state.range(0));
  if (!profiles.count(blocks)) profiles[blocks] = profile_of("gpt3-175b", blocks);
  run(state, profiles[blocks], 1024, state.range(1) != 0);
}
BENCHMARK(BM_Gpt3BlocksOnRail1024)
    ->ArgNames({"blocks", "oracle"})
    ->ArgsProduct({{24, 48, 96, 192, 384}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(1);

// The network's lower bounds, the search's pruning queries, on the rail cluster of `devices`
// GPUs: the data-parallel rings of tensor-parallel-8 replicas (one member per node, 8 groups
// of devices/8; uncalibrated: the ring bound), a pairwise all-to-all over the 8 GPUs of every
// node, and a stage-to-stage transfer from the first half of the nodes to the second. Each
// call walks every device of its layout into buffers the oracle owns (no allocation per walk):
// every iteration asks at sizes one byte larger than the last (the bounds are kept by their
// arguments, so asking the same again is `/kept:1`, a lookup).
void BM_OracleBounds(benchmark::State& state) {
  const int devices = static_cast<int>(state.range(0));
  const bool kept = state.range(1) != 0;
  placer::OracleCommCost oracle(rail(devices));
  const auto nodes = static_cast<std::uint32_t>(devices / 8);
  const placer::GroupLayout dp{
      .base = 0, .member = {static_cast<int>(nodes), 8}, .groups = {{{8, 1}, {1, 0}, {1, 0}}}};
  const placer::GroupLayout ep{
      .base = 0, .member = {8, 1}, .groups = {{{static_cast<int>(nodes), 8}, {1, 0}, {1, 0}}}};
  const placer::GroupLayout from{
      .base = 0, .member = {8, 1}, .groups = {{{static_cast<int>(nodes / 2), 8}, {1, 0}, {1, 0}}}};
  placer::GroupLayout to = from;
  to.base = nodes / 2 * 8;
  std::int64_t sum = 0;
  std::int64_t extra = 0;
  for (auto _ : state) {
    sum += oracle
               .collective_bound(workload::CollectiveOp::kAllReduce,
                                 Bytes::mebibytes(256) + Bytes(extra), dp)
               .ps();
    sum += oracle
               .collective_bound(workload::CollectiveOp::kAllToAll,
                                 Bytes::mebibytes(64) + Bytes(extra), ep)
               .ps();
    sum += oracle.transfer_bound(Bytes::mebibytes(64) + Bytes(extra), from, to).ps();
    benchmark::DoNotOptimize(sum);
    if (!kept) ++extra;
  }
  // Devices walked per iteration: the ring and the all-to-all every device, the transfer half.
  state.counters["devices_walked"] = kept ? 0.0 : 2.5 * devices;
}
BENCHMARK(BM_OracleBounds)
    ->ArgNames({"devices", "kept"})
    ->ArgsProduct({{16384, 65536, 131072}, {0, 1}})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
