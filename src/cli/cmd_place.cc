// `nest place`: the NEST search for one workload on one network, with the baselines beside it.

#include <fmt/format.h>

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/options.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/io/plan_file.h"
#include "nest/job/job.h"
#include "nest/placer/plan.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;
using placer::BaselineResult;
using placer::Plan;

constexpr const char* kUsage =
    "nest place --model M --accelerator A | --profile FILE  --topology T [--devices N] "
    "[--rules megatron|nest-artifact] [--network oracle|flat|zero] [--baselines all|none|LIST] "
    "[--tp N] [--pp N] [--dp N] [--cp N] [--ep N] [--vp N] [--mb N] [--zero 0..3] "
    "[--recompute none|selective|full] [--sp on|off] [--order ORDER] [--partition "
    "balanced|uniform] [--ignore-memory] [--fixed PLAN] [--verify K] [--threads N] [-o plan.yaml] "
    "[--json]";

// Devices of a stage: replica 0's ids as ranges, and how the other replicas follow.
std::string stage_devices(const placer::DeviceMap& map, int stage) {
  std::vector<topo::DeviceId> ids;
  for (int m = 0; m < map.devices_per_replica; ++m) ids.push_back(map.device(stage, 0, m));
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += (out.empty() ? "" : ",") +
           (j == i ? std::to_string(ids[i]) : fmt::format("{}-{}", ids[i], ids[j]));
    i = j + 1;
  }
  if (map.data_parallel > 1) {
    out += fmt::format(" (+k·{} for replicas k < {})", map.replica_stride, map.data_parallel);
  }
  return out;
}

std::string describe_choice(const Plan& p) {
  const auto& v = p.degrees;
  return fmt::format(
      "tensor {}{}, expert {}, context {}, micro-batch {} | pipeline {} stage{} | data parallel "
      "{} | ZeRO-{} | recompute {} | order {}",
      v.tensor_parallel, v.sequence_parallel ? " (sequence parallel)" : "", v.expert_parallel,
      v.context_parallel, v.micro_batch, p.choice.stages(), p.choice.stages() == 1 ? "" : "s",
      p.choice.data_parallel, p.choice.zero_stage, workload::to_string(p.choice.recompute),
      placer::to_string(p.choice.order));
}

// "does not fit: stage k needs X per device, Y more than the Z of device memory" for the stage
// that exceeds memory most.
std::string memory_excess(const Plan& p) {
  std::size_t worst = 0;
  for (std::size_t s = 1; s < p.stages.size(); ++s) {
    if (p.stages[s].memory.total() > p.stages[worst].memory.total()) worst = s;
  }
  const Bytes need = p.stages[worst].memory.total();
  return fmt::format(
      "does not fit: stage {} needs {} per device, {} more than the {} of device memory (priced "
      "with --ignore-memory)",
      worst, format_bytes(need), format_bytes(need - p.capacity), format_bytes(p.capacity));
}

std::string short_choice(const Plan& p) {
  const auto& c = p.choice;
  std::string out = fmt::format(
      "t{} mb{} S{}{} d{} ZeRO-{} {} {}", p.degrees.tensor_parallel, p.degrees.micro_batch,
      c.stages(), c.virtual_stages > 1 ? fmt::format(" v{}", c.virtual_stages) : "",
      c.data_parallel, c.zero_stage, workload::to_string(c.recompute), placer::to_string(c.order));
  if (p.degrees.expert_parallel > 1) out += fmt::format(" ep{}", p.degrees.expert_parallel);
  return out;
}

void print_verification(const placer::Verification& v) {
  const placer::VerifiedCandidate& chosen = v.candidates[v.chosen];
  std::cout << fmt::format(
      "verified by replay (--verify {}): {} candidates; chosen plan: rank {} by estimate, {} by "
      "replay; the estimate's best replays {:+.1f}% against it\n",
      v.requested, v.candidates.size(), chosen.estimate_rank, chosen.replay_rank,
      100 * v.estimate_regret());
  std::cout << fmt::format("  {:>3}  {:>3}  {:>10}  {:>10}  {:>7}  {}\n", "est", "rep", "estimate",
                           "replayed", "error", "plan");
  for (std::size_t i = 0; i < v.candidates.size(); ++i) {
    const placer::VerifiedCandidate& c = v.candidates[i];
    const double est = c.plan.iteration_time.to_seconds();
    std::cout << fmt::format("{} {:>3}  {:>3}  {:>10}  {:>10}  {:>+6.1f}%  {}\n",
                             i == v.chosen ? '*' : ' ', c.estimate_rank, c.replay_rank,
                             format_time(c.plan.iteration_time), format_time(c.replayed),
                             100 * (c.replayed.to_seconds() - est) / est, short_choice(c.plan));
  }
}

void print_text(const Plan& p, const std::vector<BaselineResult>& baselines,
                const std::string& header, const placer::Verification* verification) {
  const auto& b = p.breakdown;
  std::cout << header << "\n";
  std::cout << "plan: " << describe_choice(p) << "\n";
  std::cout << fmt::format("devices: {} of {}\n", p.devices_used, p.devices_available);
  std::cout << fmt::format(
      "iteration time: {}  (compute {}, bubble {}, TP/EP collectives {}, pipeline transfers {}, "
      "data-parallel sync {}, optimizer {})\n",
      format_time(p.iteration_time), format_time(b.compute), format_time(b.bubble),
      format_time(b.collectives), format_time(b.transfers), format_time(b.data_parallel_sync),
      p.optimizer_modeled ? format_time(b.optimizer) : std::string("not modeled"));
  std::string throughput = fmt::format("{} sequences/s", format_count(p.sequences_per_second));
  if (p.tokens_per_second > 0) {
    throughput += fmt::format(", {} tokens/s", format_count(p.tokens_per_second));
  }
  if (p.mfu) throughput += ", MFU " + format_percent(*p.mfu);
  std::cout << "throughput: " << throughput << "\n";
  if (!p.fits()) std::cout << "memory: " << memory_excess(p) << "\n";
  std::cout << fmt::format("stages (memory per device against {}):\n", format_bytes(p.capacity));
  std::cout << fmt::format("  {:>3}  {:>9}  {:>9}  {:>10}  {:>10}  {:>6}  {}\n", "#", "layers",
                           "in flight", "time/mb", "memory", "", "devices (replica 0)");
  const auto map = p.device_map();
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    std::cout << fmt::format("  {:>3}  {:>9}  {:>9}  {:>10}  {:>10}  {:>6}  {}\n", s,
                             fmt::format("{}-{}", st.first_layer, st.last_layer - 1), st.in_flight,
                             format_time(st.time.total()), format_bytes(st.memory.total()),
                             format_percent(st.memory.total().as_double() / p.capacity.as_double()),
                             stage_devices(map, static_cast<int>(s)));
  }
  if (verification != nullptr && !verification->candidates.empty()) {
    print_verification(*verification);
  }
  if (baselines.empty()) return;
  std::cout << "baselines (same cost model):\n";
  for (const auto& r : baselines) {
    if (r.plan) {
      std::cout << fmt::format("  {:<18} {:>10}  x{:.3f} of NEST's throughput  {}\n", r.name,
                               format_time(r.plan->iteration_time),
                               p.iteration_time.to_seconds() / r.plan->iteration_time.to_seconds(),
                               r.note);
    } else {
      std::cout << fmt::format("  {:<18} {:>10}  {}\n", r.name, "no plan", r.note);
    }
  }
}

std::string place_header(const job::Job& job) {
  const job::JobSpec& s = job.spec();
  const std::string what =
      !s.workload.profile.empty()
          ? fs::path(s.workload.profile).filename().string()
          : fmt::format("{} on {}", job.profile().model, job.profile().accelerator);
  return fmt::format("nest place: {}, {} devices, rules {}, network: {}", what, s.devices,
                     placer::to_string(s.rules), job.network().describe());
}

}  // namespace

void print_placement(const job::Job& job, const Plan& plan,
                     const std::vector<BaselineResult>& baselines,
                     const placer::Verification* verification) {
  print_text(plan, baselines, place_header(job), verification);
}

int run_place(std::span<char* const> args, const Context& context) {
  JobArgs a;
  std::string output;
  bool json = false;
  Options o(kUsage);
  add_job_options(o, a);
  o.add("output,o", &output, "write the plan file here")
      .add("json", &json, "print the plan document as JSON instead of the text report");
  if (!o.parse(args)) return 0;
  return o.run([&] {
    job::Job job(job_spec(a), catalog(), context.log);
    job.start_baselines();  // beside the search, on the second core
    const job::Placement placed = place(job);
    const Plan& plan = placed.plan;
    const placer::Verification* verified = placed.verification ? &*placed.verification : nullptr;
    const std::vector<BaselineResult> baselines = job.baselines();
    const fs::path plan_path = output.empty() ? fs::path("plan.yaml") : fs::path(output);
    if (!output.empty()) {
      write_text_atomically(output, job.plan_yaml(plan, baselines, plan_path, verified));
    }
    if (json) {
      std::cout << io::plan_to_json(job.plan_inputs(plan_path), plan, baselines, verified) << "\n";
      return 0;
    }
    print_placement(job, plan, baselines, verified);
    if (!output.empty()) std::cout << "plan written to " << output << "\n";
    return 0;
  });
}

}  // namespace nest::cli
