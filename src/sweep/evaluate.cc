#include "nest/sweep/evaluate.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <optional>

#include "nest/core/error.h"
#include "nest/job/job.h"
#include "nest/placer/variants.h"
#include "nest/topo/loader.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace nest::sweep {
namespace {

using placer::Plan;

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

std::string column_prefix(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// Integer picoseconds divided (not multiplied by 1e-12) give the double nearest the decimal value.
Cell seconds(Time t) { return static_cast<double>(t.ps()) / 1e12; }
Cell integer(std::int64_t v) { return v; }

std::string partition(const Plan& plan) {
  std::string out;
  const auto& b = plan.choice.boundaries;
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    out += (i ? " " : "") + std::to_string(b[i + 1] - b[i]);
  }
  return out;
}

std::string plan_summary(const Plan& plan) {
  std::string out = fmt::format("t{}", plan.degrees.tensor_parallel);
  if (plan.degrees.expert_parallel > 1) out += fmt::format(" e{}", plan.degrees.expert_parallel);
  if (plan.degrees.context_parallel > 1) out += fmt::format(" c{}", plan.degrees.context_parallel);
  out += fmt::format(" pp{} dp{} mb{} zero{}", plan.choice.stages(), plan.choice.data_parallel,
                     plan.degrees.micro_batch, plan.choice.zero_stage);
  if (plan.choice.recompute != workload::Recompute::kNone) out += " recompute";
  return out;
}

Bytes peak_memory(const Plan& plan) {
  Bytes peak;
  for (const auto& s : plan.stages) peak = std::max(peak, s.memory.total());
  return peak;
}

// The devices a point's topology will have, from its parameters, without building it.
double estimated_devices(const Study& study, const Point& point) {
  if (point.devices) return static_cast<double>(*point.devices);
  try {
    double product = 1;
    for (const auto& [key, value] : topology_parameters(study, point)) {
      if (key == "nodes" || key == "gpus_per_node" || key == "leaves" || key == "hosts_per_leaf") {
        product *= std::stod(value.text());
      }
      if (key == "dims" || key == "devices_per_level") {
        for (const auto& item : value.items) product *= std::stod(item);
      }
    }
    return product;
  } catch (const std::exception&) {
    return 1;  // the point will fail; its cost does not matter
  }
}

}  // namespace

topo::Topology build_topology(const Study& study, const Point& point) {
  const TopologyEntry& entry = study.topology(point);
  if (entry.kind == "file") return topo::load_topology(entry.file.string(), study.limits);
  const std::string yaml = topology_yaml(entry.kind, entry.name, topology_parameters(study, point));
  try {
    return topo::load_topology_string(yaml, entry.name, study.limits);
  } catch (const Error& e) {
    // The YAML text is made here, so its lines mean nothing to the user: name the parameter.
    const ErrorContext& c = e.context();
    throw Error::input(e.message(), {.key = c.key.empty() ? "topology" : "topology." + c.key,
                                     .value = c.value,
                                     .expected = c.expected});
  }
}

namespace {

// An error of a fixed dimension under the study axis that fixed it ("pp", not the spec's
// "search.stages").
Error as_axis(const Error& e) {
  static constexpr std::pair<std::string_view, std::string_view> kAxes[] = {
      {"tensor_parallel", "tp"},       {"search.stages", "pp"}, {"search.data_parallel", "dp"},
      {"search.virtual_stages", "vp"}, {"zero_stages", "zero"}, {"recompute_modes", "recompute"}};
  const ErrorContext& c = e.context();
  if (!c.file.empty()) return e;
  for (const auto& [field, axis] : kAxes) {
    if (c.key != field) continue;
    ErrorContext renamed = c;
    renamed.key = std::string(axis);
    return Error(e.kind(), e.message(), renamed);
  }
  return e;
}

}  // namespace

StudyEvaluator::StudyEvaluator(const Study& study) : study_(study) {
  for (const WorkloadEntry& w : study.workloads) {
    Loaded loaded;
    loaded.name = w.name;
    if (!w.profile.empty()) {
      loaded.profile = std::make_shared<const workload::LayerProfile>(
          workload::load_layer_profile(w.profile.string(), study.limits));
    } else {
      const workload::Model model = workload::load_model(w.model.string(), study.limits);
      const workload::Accelerator device =
          workload::load_accelerator(w.accelerator.string(), study.limits);
      const workload::BuildOptions build{.precision = w.precision,
                                         .flash_attention = w.flash_attention,
                                         .sequence_length = w.sequence_length,
                                         .global_batch = w.global_batch};
      const placer::CandidateOptions candidates{.max_tensor_parallel = w.max_tensor_parallel,
                                                .max_expert_parallel = w.max_expert_parallel,
                                                .context_parallel = w.context_parallel,
                                                .micro_batches = w.micro_batches};
      const auto configs = placer::candidate_configs(model, build, candidates);
      if (configs.empty()) {
        throw Error::input("no parallel configuration of this model fits the variant bounds",
                           {.file = study.file,
                            .line = w.line,
                            .key = "workloads." + w.name,
                            .expected = "larger max_tensor_parallel or other micro_batches"});
      }
      loaded.profile = std::make_shared<const workload::LayerProfile>(
          workload::build_profile(model, device, configs, build));
      loaded.memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency;
    }
    workloads_.push_back(std::move(loaded));
  }
}

const workload::LayerProfile& StudyEvaluator::profile(const std::string& workload) const {
  for (const auto& w : workloads_) {
    if (w.name == workload) return *w.profile;
  }
  throw Error::internal("unknown workload \"" + workload + "\"");
}

double StudyEvaluator::cost(const Point& point) const {
  return estimated_devices(study_, point) * (point.replay ? 3.0 : 1.0);
}

std::vector<Column> StudyEvaluator::columns() const {
  using T = ColumnType;
  std::vector<Column> c = {
      {"topology_devices", T::kInt, ""},
      {"devices_available", T::kInt, ""},
      {"devices_used", T::kInt, ""},
      {"tensor_parallel", T::kInt, ""},
      {"expert_parallel", T::kInt, ""},
      {"context_parallel", T::kInt, ""},
      {"sequence_parallel", T::kInt, ""},
      {"micro_batch", T::kInt, ""},
      {"pipeline_stages", T::kInt, ""},
      {"data_parallel", T::kInt, ""},
      {"zero_stage", T::kInt, ""},
      {"recompute", T::kInt, ""},
      {"order", T::kText, ""},
      {"partition", T::kText, ""},
      {"iteration_s", T::kReal, "s"},
      {"compute_s", T::kReal, "s"},
      {"bubble_s", T::kReal, "s"},
      {"collectives_s", T::kReal, "s"},
      {"transfers_s", T::kReal, "s"},
      {"dp_sync_s", T::kReal, "s"},
      {"optimizer_s", T::kReal, "s"},
      {"sequences_per_s", T::kReal, "1/s"},
      {"tokens_per_s", T::kReal, "1/s"},
      {"mfu", T::kReal, ""},
      {"peak_memory_bytes", T::kInt, "B"},
      {"memory_capacity_bytes", T::kInt, "B"},
      {"replay_iteration_s", T::kReal, "s"},
      {"replay_error", T::kReal, ""},
      {"replay_tokens_per_s", T::kReal, "1/s"},
      {"replay_mfu", T::kReal, ""},
      {"replay_bubble_fraction", T::kReal, ""},
      {"replay_peak_memory_bytes", T::kInt, "B"},
      {"oracle_simulations", T::kInt, ""},
  };
  for (const auto& b : study_.placer.baselines) {
    const std::string p = column_prefix(b);
    c.push_back({p + "_iteration_s", T::kReal, "s"});
    c.push_back({p + "_tokens_per_s", T::kReal, "1/s"});
    c.push_back({p + "_plan", T::kText, ""});
    c.push_back({p + "_note", T::kText, ""});
    c.push_back({"speedup_vs_" + p, T::kReal, ""});
  }
  if (study_.placer.verify > 0) {
    c.push_back({"verified_candidates", T::kInt, ""});
    c.push_back({"estimate_rank", T::kInt, ""});
    c.push_back({"replay_rank", T::kInt, ""});
    c.push_back({"regret", T::kReal, ""});
    c.push_back({"estimate_best_iteration_s", T::kReal, "s"});
    c.push_back({"estimate_best_replay_s", T::kReal, "s"});
    c.push_back({"verified_replay_s", T::kReal, "s"});
  }
  const bool replays = std::any_of(study_.points.begin(), study_.points.end(),
                                   [](const Point& p) { return p.replay; });
  if (study_.placer.verify > 0 || replays) {
    for (const auto& b : study_.placer.baselines) {
      const std::string p = column_prefix(b);
      c.push_back({p + "_replay_s", T::kReal, "s"});
      c.push_back({"replay_speedup_vs_" + p, T::kReal, ""});
    }
  }
  return c;
}

Outcome StudyEvaluator::evaluate(const Point& point) const {
  topo::Topology topology = build_topology(study_, point);
  const auto available = static_cast<std::int64_t>(topology.num_devices());
  const std::int64_t budget = point.devices.value_or(available);
  if (budget > available) {
    throw Error::input(fmt::format("the topology has only {} devices", available),
                       {.key = "devices",
                        .value = std::to_string(budget),
                        .expected = "a budget the topology holds (leave its size unset to "
                                    "size it from devices)"});
  }
  const auto& loaded = *std::find_if(workloads_.begin(), workloads_.end(),
                                     [&](const Loaded& w) { return w.name == point.workload; });
  const bool megatron = point.rules == workload::MemoryRules::kMegatron;

  job::JobSpec spec;
  spec.devices = budget;
  spec.rules = point.rules;
  spec.network = megatron ? job::NetworkModel::kOracle : job::NetworkModel::kZero;
  spec.seed = point.seed;
  spec.anneal_seed = point.seed + 1;
  if (!study_.placer.orders.empty()) spec.search.orders = study_.placer.orders;
  if (megatron && !study_.placer.zero_stages.empty()) {
    spec.search.zero_stages = study_.placer.zero_stages;
  }
  if (!study_.placer.recompute) spec.search.recompute_modes = {workload::Recompute::kNone};
  spec.search.max_stages = study_.placer.max_stages;
  for (const auto& [axis, value] : point.configuration) {
    if (axis == "recompute") {
      spec.search.recompute_modes = {workload::parse_recompute(value)};
    } else if (axis == "order") {
      spec.search.orders = {placer::parse_placement_order(value)};
    } else {
      const int v = std::stoi(value);
      if (axis == "tp") spec.workload.candidates.tensor_parallel = {v};
      if (axis == "pp") spec.search.stages = {v};
      if (axis == "dp") spec.search.data_parallel = {v};
      if (axis == "vp") spec.search.virtual_stages = {v};
      if (axis == "zero") spec.search.zero_stages = {v};
    }
  }
  spec.baselines = study_.placer.baselines;
  spec.verify = megatron ? study_.placer.verify : 0;
  spec.threads = 1;  // the points are what runs on the sweep's threads
  job::Prebuilt prebuilt{.topology = std::make_shared<const topo::Topology>(std::move(topology)),
                         .topology_name = point.topology,
                         .profile = loaded.profile,
                         .memory_bandwidth = megatron
                                                 ? std::optional<Bandwidth>(loaded.memory_bandwidth)
                                                 : std::optional<Bandwidth>(Bandwidth())};
  job::Job job = [&] {
    try {
      return job::Job(std::move(spec), std::move(prebuilt));
    } catch (const Error& e) {
      throw as_axis(e);
    }
  }();
  placer::SearchResult result = job.search();

  Outcome out;
  const std::vector<Column> columns = this->columns();
  out.cells.assign(columns.size(), std::monostate{});
  // Cells by column name, so that the order lives in `columns()` alone.
  auto put = [&](std::string_view name, Cell cell) {
    for (std::size_t c = 0; c < columns.size(); ++c) {
      if (columns[c].name == name) {
        out.cells[c] = std::move(cell);
        return;
      }
    }
    throw Error::internal(fmt::format("no output column \"{}\"", name));
  };
  put("topology_devices", integer(available));
  put("devices_available", integer(budget));
  if (megatron) {
    put("oracle_simulations", integer(static_cast<std::int64_t>(job.oracle_stats().simulations)));
  }
  if (!result.best) {
    out.status = "infeasible";
    out.error = result.infeasible_reason;
    return out;
  }
  // A replayed point reuses the verification's replay of the chosen plan.
  job::Placement placed = job.verify(std::move(result), {.keep_replay = point.replay});
  const Plan& plan = placed.plan;
  if (placed.verification) {
    const placer::Verification& v = *placed.verification;
    const placer::VerifiedCandidate& first = v.candidates.front();
    put("verified_candidates", integer(static_cast<std::int64_t>(v.candidates.size())));
    put("estimate_rank", integer(v.candidates[v.chosen].estimate_rank));
    put("replay_rank", integer(first.replay_rank));
    put("regret", v.estimate_regret());
    put("estimate_best_iteration_s", seconds(first.plan.iteration_time));
    put("estimate_best_replay_s", seconds(first.replayed));
    put("verified_replay_s", seconds(v.candidates[v.chosen].replayed));
  }
  put("devices_used", integer(plan.devices_used));
  put("tensor_parallel", integer(plan.degrees.tensor_parallel));
  put("expert_parallel", integer(plan.degrees.expert_parallel));
  put("context_parallel", integer(plan.degrees.context_parallel));
  put("sequence_parallel", integer(plan.degrees.sequence_parallel ? 1 : 0));
  put("micro_batch", integer(plan.degrees.micro_batch));
  put("pipeline_stages", integer(plan.choice.stages()));
  put("data_parallel", integer(plan.choice.data_parallel));
  put("zero_stage", integer(plan.choice.zero_stage));
  put("recompute", integer(plan.choice.recompute != workload::Recompute::kNone ? 1 : 0));
  put("order", std::string(placer::to_string(plan.choice.order)));
  put("partition", partition(plan));
  put("iteration_s", seconds(plan.iteration_time));
  put("compute_s", seconds(plan.breakdown.compute));
  put("bubble_s", seconds(plan.breakdown.bubble));
  put("collectives_s", seconds(plan.breakdown.collectives));
  put("transfers_s", seconds(plan.breakdown.transfers));
  put("dp_sync_s", seconds(plan.breakdown.data_parallel_sync));
  put("optimizer_s", seconds(plan.breakdown.optimizer));
  put("sequences_per_s", plan.sequences_per_second);
  put("tokens_per_s", plan.tokens_per_second);
  if (plan.mfu) put("mfu", *plan.mfu);
  put("peak_memory_bytes", integer(peak_memory(plan).count()));
  put("memory_capacity_bytes", integer(plan.capacity.count()));
  // The chosen plan's replayed time, when it was replayed (verified, or replay: true).
  std::optional<Time> chosen_replay;
  if (placed.verification) {
    chosen_replay = placed.verification->candidates[placed.verification->chosen].replayed;
  }
  if (point.replay) {
    const replay::RunRecord record = job.simulate(placed, {});
    if (!chosen_replay) chosen_replay = record.summary.iteration_time;
    const replay::Summary& s = record.summary;
    put("replay_iteration_s", seconds(s.iteration_time));
    put("replay_error", (s.iteration_time.to_seconds() - plan.iteration_time.to_seconds()) /
                            plan.iteration_time.to_seconds());
    put("replay_tokens_per_s", s.tokens_per_s);
    if (s.model_flops_utilization > 0) put("replay_mfu", s.model_flops_utilization);
    put("replay_bubble_fraction", s.bubble_fraction);
    put("replay_peak_memory_bytes", integer(s.peak_memory.count()));
  }
  const std::vector<placer::BaselineResult> baselines = job.baselines();
  for (const placer::BaselineResult& b : baselines) {
    const std::string p = column_prefix(b.name);
    put(p + "_note", one_line(b.note));
    if (!b.plan) continue;
    put(p + "_iteration_s", seconds(b.plan->iteration_time));
    put(p + "_tokens_per_s", b.plan->tokens_per_second);
    put(p + "_plan", plan_summary(*b.plan));
    put("speedup_vs_" + p, static_cast<double>(b.plan->iteration_time.ps()) /
                               static_cast<double>(plan.iteration_time.ps()));
    if (chosen_replay && b.plan->fits()) {
      const Time replayed = job.simulate(*b.plan).summary.iteration_time;
      put(p + "_replay_s", seconds(replayed));
      put("replay_speedup_vs_" + p, replayed.to_seconds() / chosen_replay->to_seconds());
    }
  }
  return out;
}

}  // namespace nest::sweep
