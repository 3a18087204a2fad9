// Prints what the placer and the replay choose per group for GPT-3 175B on the bundled
// h100_rail_1024 (NCCL model nvlink4 + ndr): the best plan of the search, then every collective
// its cost model asked of the network (tensor-parallel all-gathers and reduce-scatters per
// stage, the data-parallel sync per stage) with the tuner's algorithm, protocol and channels,
// and the algorithms of the replay's gradient buckets. Usage: bench_coll_choices (no options);
// the output is results/coll_choices.md's body.

#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/core/unit_parse.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/replay/plan_replay.h"
#include "nest/topo/loader.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

namespace {

using namespace nest;

const char* op_name(workload::CollectiveOp op) {
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      return "allreduce";
    case workload::CollectiveOp::kAllGather:
      return "all_gather";
    case workload::CollectiveOp::kReduceScatter:
      return "reduce_scatter";
    case workload::CollectiveOp::kAllToAll:
      return "all_to_all";
  }
  return "?";
}

// The axis a layout stands for in this plan: members one apart are tensor groups; the others
// are the data-parallel replicas of a shard.
std::string axis_of(const placer::GroupLayout& g, int tensor) {
  if (g.member.count == tensor && g.member.stride == 1) return "TP";
  return "DP";
}

}  // namespace

int main() {
  const std::string src = NEST_SOURCE_DIR;
  const auto model = workload::load_model(src + "/workloads/models/gpt3-175b.yaml");
  const auto device = workload::load_accelerator(src + "/workloads/accelerators/h100-sxm.yaml");
  const auto topology = topo::load_topology(src + "/topologies/h100_rail_1024.yaml");
  const workload::BuildOptions build;
  const auto profile = workload::build_profile(
      model, device, placer::candidate_configs(model, build, placer::CandidateOptions{}), build);
  placer::SearchOptions o;
  o.cost = {.rules = workload::MemoryRules::kMegatron,
            .devices = 1024,
            .memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency};
  placer::OracleCommCost search_net(topology);
  const placer::Plan best = *placer::search(profile, search_net, o).best;
  std::printf("Plan: t = %d%s, %d stages, d = %d, ZeRO-%d, %s; %.3f s per iteration.\n\n",
              best.degrees.tensor_parallel, best.degrees.sequence_parallel ? " (SP)" : "",
              best.choice.stages(), best.choice.data_parallel, best.choice.zero_stage,
              std::string(placer::to_string(best.choice.order)).c_str(),
              best.iteration_time.to_seconds());

  // The same plan priced on a fresh network: what it asks, and what the tuner chose for it.
  placer::OracleCommCost net(topology);
  (void)placer::evaluate(profile, best.choice, net, o.cost);
  // Stages whose groups ask the same thing and get the same answer share a row.
  std::map<std::string, int> rows;
  std::vector<std::string> order;
  for (const placer::GroupChoice& c : net.choices()) {
    const std::string row =
        fmt::format("| {} | {} | {} | {} x {} | {} | {} | {} | {} | {:.4f} |",
                    axis_of(c.layout, best.degrees.tensor_parallel), op_name(c.op),
                    format_bytes(c.size), c.layout.group_count(), c.layout.group_size(),
                    c.layout.member.stride, coll::algorithm_name(c.algorithm),
                    topo::protocol_name(c.protocol), c.channels, c.time.to_seconds() * 1e3);
    if (rows[row]++ == 0) order.push_back(row);
  }
  std::printf(
      "| axis | operation | size | groups x ranks | member stride | algorithm | protocol | "
      "channels | time (ms) | stages |\n|---|---|---:|---:|---:|---|---|---:|---:|---:|\n");
  for (const std::string& row : order) std::printf("%s %d |\n", row.c_str(), rows[row]);
  std::printf("\nStage-to-stage transfers are point-to-point sends (the oracle's transfers).\n\n");

  const replay::RunRecord run = replay::replay_plan(best, profile, topology, {});
  std::map<std::tuple<std::string, std::size_t, std::int64_t>, int> buckets;
  for (const auto& c : run.collectives) ++buckets[{c.algorithm, c.group.size(), c.size.count()}];
  std::printf(
      "Replay: %.3f s per iteration (estimate %.3f s).\n\n| bucket algorithm | ranks | "
      "bytes | buckets |\n|---|---:|---:|---:|\n",
      run.summary.iteration_time.to_seconds(), best.iteration_time.to_seconds());
  for (const auto& [key, count] : buckets) {
    std::printf("| %s | %zu | %s | %d |\n", std::get<0>(key).c_str(), std::get<1>(key),
                format_bytes(Bytes(std::get<2>(key))).c_str(), count);
  }
  return 0;
}
