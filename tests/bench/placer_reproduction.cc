// Prints results/placer_reproduction.md's tables: the published NEST iteration times
// (tests/validation/reference/nest-artifact/expected-nest.tsv) against this placer under the
// nest-artifact rules (zero network), the published fixed baselines evaluated by the same cost
// model, and what the corrected megatron memory rules and the artifact's own networks (simulated
// by the collective oracle) give for the same cases. Usage: bench_placer_reproduction
// (reads files under NEST_SOURCE_DIR; no options).

#include <fmt/format.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "nest/core/unit_parse.h"
#include "nest/placer/baselines.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/topo/loader.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/profile_file.h"

namespace {

using namespace nest;

struct Row {
  std::string profile;
  std::int64_t devices = 0;
  double ms = 0;
  int stages = 0, data_parallel = 0, tensor_parallel = 0;
};

std::string plan_text(const placer::Plan& p) {
  return fmt::format("({}, {}, {}){}{}", p.choice.stages(), p.choice.data_parallel,
                     p.degrees.tensor_parallel,
                     p.choice.recompute != nest::workload::Recompute::kNone ? " rc" : "",
                     p.choice.zero_stage > 0 ? fmt::format(" Z{}", p.choice.zero_stage) : "");
}

// The fixed (p, d, t) configurations of the published baselines, layers split evenly.
std::optional<placer::Plan> fixed(const workload::LayerProfile& profile, int p, int d, int t,
                                  placer::CommCost& comm, const placer::CostOptions& options) {
  for (std::size_t vi = 0; vi < profile.variants.size(); ++vi) {
    if (profile.variants[vi].tensor_parallel != t) continue;
    const placer::PlanChoice c{.variant = vi,
                               .boundaries = placer::even_partition(profile.variants[vi], p),
                               .data_parallel = d,
                               .recompute = workload::Recompute::kFull};
    return placer::evaluate(profile, c, comm, options);
  }
  return std::nullopt;
}

}  // namespace

int main() {
  const std::string src = NEST_SOURCE_DIR;
  const std::string ref = src + "/tests/validation/reference/nest-artifact/";
  std::ifstream tsv(ref + "expected-nest.tsv");
  std::vector<Row> rows;
  std::string line;
  std::getline(tsv, line);
  while (std::getline(tsv, line)) {
    std::istringstream f(line);
    Row r;
    f >> r.profile >> r.devices >> r.ms >> r.stages >> r.data_parallel >> r.tensor_parallel;
    if (f) rows.push_back(r);
  }

  std::printf(
      "## Published NEST times against this placer (nest-artifact rules, zero network)\n\n");
  std::printf(
      "| profile | devices | published (ms) | ours (ms) | difference | published (S, d, t) | "
      "ours (S, d, t) |\n|---|---:|---:|---:|---:|---|---|\n");
  std::map<std::string, workload::LayerProfile> profiles;
  std::map<std::string, double> nest_ms;
  for (const Row& r : rows) {
    auto& profile = profiles[r.profile];
    if (profile.variants.empty())
      profile = workload::load_layer_profile(src + "/workloads/profiles/" + r.profile);
    placer::ZeroCommCost zero;
    placer::SearchOptions o;
    o.cost = {.rules = workload::MemoryRules::kNestArtifact, .devices = r.devices};
    const auto best = *placer::search(profile, zero, o).best;
    const double ms = best.iteration_time.to_milliseconds();
    nest_ms[r.profile + std::to_string(r.devices)] = ms;
    std::printf("| %s | %lld | %.3f | %.3f | %+.5f%% | (%d, %d, %d) | %s |\n", r.profile.c_str(),
                static_cast<long long>(r.devices), r.ms, ms, 100 * (ms - r.ms) / r.ms, r.stages,
                r.data_parallel, r.tensor_parallel, plan_text(best).c_str());
  }

  // TPUv4 throughput relative to Manual at 128 devices (the paper's table).
  std::printf("\n## TPUv4 throughput relative to Manual (32, 1, 4) at 128 devices\n\n");
  std::printf(
      "| devices | NEST published | NEST ours | Manual published | Manual (p, d, t) ours | "
      "Phaze (p, d, t) ours |\n|---:|---:|---:|---:|---:|---:|\n");
  const auto& tpu = profiles["gpt3-175b-tpuv4.yaml"];
  placer::ZeroCommCost zero;
  const std::vector<std::int64_t> devices = {64, 128, 256, 512, 1024};
  const std::vector<double> nest_pub = {0.67, 1.33, 2.65, 5.22, 10.15};
  const std::vector<std::string> manual_pub = {"—", "1.00", "1.99", "3.91", "7.60"};
  const std::vector<int> manual_d = {1, 1, 2, 4, 8};
  const std::vector<int> phaze_d = {1, 2, 4, 8, 16};
  const placer::CostOptions big{.rules = workload::MemoryRules::kNestArtifact, .devices = 1024};
  const auto manual128 = fixed(tpu, 32, 1, 4, zero, big);
  const double base = manual128->iteration_time.to_milliseconds();
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const auto manual = fixed(tpu, 32, manual_d[i], 4, zero, big);
    const auto phaze = fixed(tpu, 16, phaze_d[i], 4, zero, big);
    std::printf("| %lld | %.2f | %.2f | %s | %.2f (32, %d, 4)%s | %.2f (16, %d, 4)%s |\n",
                static_cast<long long>(devices[i]), nest_pub[i],
                base / nest_ms["gpt3-175b-tpuv4.yaml" + std::to_string(devices[i])],
                manual_pub[i].c_str(), base / manual->iteration_time.to_milliseconds(), manual_d[i],
                manual->fits() ? "" : " does not fit",
                base / phaze->iteration_time.to_milliseconds(), phaze_d[i],
                phaze->fits() ? "" : " does not fit");
  }

  // The same cases under the megatron rules and the artifact's own networks.
  std::printf("\n## The same cases, megatron memory rules, the artifact's networks simulated\n\n");
  std::printf(
      "| profile | devices | nest-artifact rules, zero network (s) | megatron rules, oracle "
      "network (s) | plan (S, d, t) | breakdown: compute / bubble / transfers / DP sync / "
      "optimizer | manual baseline (s) |\n|---|---:|---:|---:|---|---|---:|\n");
  const std::map<std::string, std::pair<std::string, std::string>> setup = {
      {"gpt3-175b-h100.yaml", {"nest_h100_spineleaf", "h100-sxm"}},
      {"gpt3-175b-tpuv4.yaml", {"nest_tpuv4_fattree", "tpuv4"}}};
  for (const Row& r : rows) {
    const auto& [topo_name, device_name] = setup.at(r.profile);
    const auto topology = topo::load_topology(src + "/topologies/" + topo_name + ".yaml");
    const auto device =
        workload::load_accelerator(src + "/workloads/accelerators/" + device_name + ".yaml");
    placer::OracleCommCost oracle(topology);
    placer::SearchOptions o;
    o.cost = {.rules = workload::MemoryRules::kMegatron,
              .devices = r.devices,
              .memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency};
    const auto& profile = profiles[r.profile];
    const auto found = placer::search(profile, oracle, o);
    const auto manual = placer::manual_baseline(profile, oracle, o);
    const double artifact_s = nest_ms[r.profile + std::to_string(r.devices)] / 1e3;
    if (!found.best) {
      std::printf("| %s | %lld | %.3f | nothing fits: %s | | | |\n", r.profile.c_str(),
                  static_cast<long long>(r.devices), artifact_s, found.infeasible_reason.c_str());
      continue;
    }
    const auto& p = *found.best;
    const auto& b = p.breakdown;
    std::printf(
        "| %s | %lld | %.3f | %.3f | %s %s | %s / %s / %s / %s / %s | %s |\n", r.profile.c_str(),
        static_cast<long long>(r.devices), artifact_s, p.iteration_time.to_seconds(),
        plan_text(p).c_str(), std::string(placer::to_string(p.choice.order)).c_str(),
        format_time(b.compute).c_str(), format_time(b.bubble).c_str(),
        format_time(b.transfers).c_str(), format_time(b.data_parallel_sync).c_str(),
        format_time(b.optimizer).c_str(),
        manual.plan ? fmt::format("{:.3f}", manual.plan->iteration_time.to_seconds()).c_str()
                    : "no plan");
  }
  return 0;
}
