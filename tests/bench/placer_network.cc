// Prints results/placer_network.md's tables: the plan NEST chooses for GPT-3 175B on each of
// several networks, and every plan priced on every network (rows: the network the plan was
// chosen for; columns: the network it runs on). Usage: bench_placer_network (no options).

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "nest/core/unit_parse.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

namespace {

using namespace nest;

struct Net {
  std::string name;
  topo::Topology topology;
};

topo::Topology two_gpu_rail(int spines) {
  return topo::build_rail_optimized({.nodes = 64,
                                     .gpus_per_node = 2,
                                     .nodes_per_leaf = 8,
                                     .spines = spines,
                                     .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                     .nvlink_latency = Time::microseconds(0.5),
                                     .nic_bandwidth = Bandwidth::gigabits_per_second(400),
                                     .nic_latency = Time::microseconds(1),
                                     .spine_bandwidth = Bandwidth::gigabits_per_second(400),
                                     .spine_latency = Time::microseconds(1)});
}

void study(const std::string& title, std::vector<Net>& nets, std::int64_t devices,
           const workload::LayerProfile& profile, Bandwidth memory_bandwidth) {
  std::printf("## %s (%lld devices)\n\n", title.c_str(), static_cast<long long>(devices));
  placer::SearchOptions o;
  o.cost = {.rules = workload::MemoryRules::kMegatron,
            .devices = devices,
            .memory_bandwidth = memory_bandwidth};
  std::vector<std::unique_ptr<placer::OracleCommCost>> oracles;
  std::vector<placer::Plan> plans;
  std::printf(
      "| network | chosen plan (S, d, t, micro-batch, ZeRO, order) | iteration | "
      "collectives | transfers | DP sync |\n|---|---|---:|---:|---:|---:|\n");
  for (auto& n : nets) {
    oracles.push_back(std::make_unique<placer::OracleCommCost>(n.topology));
    plans.push_back(*placer::search(profile, *oracles.back(), o).best);
    const auto& p = plans.back();
    std::printf("| %s | (%d, %d, %d, mb %d, Z%d, %s)%s | %s | %s | %s | %s |\n", n.name.c_str(),
                p.choice.stages(), p.choice.data_parallel, p.degrees.tensor_parallel,
                p.degrees.micro_batch, p.choice.zero_stage,
                std::string(placer::to_string(p.choice.order)).c_str(),
                p.choice.recompute != nest::workload::Recompute::kNone ? " rc" : "",
                format_time(p.iteration_time).c_str(), format_time(p.breakdown.collectives).c_str(),
                format_time(p.breakdown.transfers).c_str(),
                format_time(p.breakdown.data_parallel_sync).c_str());
  }
  std::printf(
      "\nEvery chosen plan priced on every network (row: chosen for; column: runs on):\n\n|");
  for (const auto& n : nets) std::printf(" | %s", n.name.c_str());
  std::printf(" |\n|---");
  for (std::size_t i = 0; i < nets.size(); ++i) std::printf("|---:");
  std::printf("|\n");
  for (std::size_t i = 0; i < nets.size(); ++i) {
    std::printf("| %s", nets[i].name.c_str());
    for (std::size_t j = 0; j < nets.size(); ++j) {
      const auto t = placer::evaluate(profile, plans[i].choice, *oracles[j], o.cost).iteration_time;
      std::printf(" | %s%s", format_time(t).c_str(), i == j ? " (own)" : "");
    }
    std::printf(" |\n");
  }
  std::printf("\n");
}

}  // namespace

int main() {
  const std::string src = NEST_SOURCE_DIR;
  const auto model = workload::load_model(src + "/workloads/models/gpt3-175b.yaml");
  const auto device = workload::load_accelerator(src + "/workloads/accelerators/h100-sxm.yaml");
  const workload::BuildOptions build;
  placer::CandidateOptions candidates;
  candidates.micro_batches = {1, 2};
  const auto profile = workload::build_profile(
      model, device, placer::candidate_configs(model, build, candidates), build);
  const Bandwidth hbm = device.hbm_bandwidth * device.memory_efficiency;

  std::vector<Net> dgx;
  for (const char* f :
       {"h100_rail_1024", "h100_rail_1024_2to1", "h100_rail_1024_4to1", "tpuv4_torus_8x8x16"}) {
    dgx.push_back({f, topo::load_topology(src + "/topologies/" + std::string(f) + ".yaml")});
  }
  study("GPT-3 175B on 1,024 devices: DGX-style rail clusters and a 3D torus", dgx, 1024, profile,
        hbm);

  std::vector<Net> small;
  small.push_back({"rail 64×2 GPUs 1:1", two_gpu_rail(8)});
  small.push_back({"rail 64×2 GPUs 4:1", two_gpu_rail(2)});
  small.push_back(
      {"torus 4×4×8", topo::build_torus({.dims = {4, 4, 8},
                                         .link_bandwidth = Bandwidth::gigabits_per_second(400),
                                         .link_latency = Time::microseconds(1)})});
  study("GPT-3 175B on 128 devices: two-GPU nodes (the network-awareness test) and a torus", small,
        128, profile, hbm);
  return 0;
}
