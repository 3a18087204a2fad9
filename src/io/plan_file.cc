#include "nest/io/plan_file.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>

#include "nest/config/limits.h"
#include "nest/config/node.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::io {

using placer::BaselineResult;
using placer::Breakdown;
using placer::DeviceMap;
using placer::parse_placement_order;
using placer::parse_rules;
using placer::Plan;
using placer::StageReport;
using placer::to_string;
using placer::VariantDegrees;

namespace {

// A time as seconds with all 12 picosecond digits: exact, and readable by parse_time.
std::string exact_time(Time t) {
  const std::int64_t ps = t.ps();
  const char* sign = ps < 0 ? "-" : "";
  const std::int64_t a = ps < 0 ? -ps : ps;
  return fmt::format("{}{}.{:012d} s", sign, a / 1'000'000'000'000LL, a % 1'000'000'000'000LL);
}

std::string exact_bytes(Bytes b) { return fmt::format("{} B", b.count()); }

std::string exact_rate(Bandwidth b) { return fmt::format("{} B/s", b.bytes_per_s()); }

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string device_lists(const DeviceMap& map, int stage) {
  std::string out = "[";
  for (int k = 0; k < map.data_parallel; ++k) {
    out += k == 0 ? "[" : ", [";
    for (int m = 0; m < map.devices_per_replica; ++m) {
      out += (m == 0 ? "" : ", ") + std::to_string(map.device(stage, k, m));
    }
    out += "]";
  }
  return out + "]";
}

// Whether a map has `key`, even with a null value (which `find` treats as absent).
bool has_key(const config::Node& map, std::string_view key) {
  for (const auto& entry : map.entries()) {
    if (entry.first == key) return true;
  }
  return false;
}

int as_count(const config::Node& n, std::int64_t min = 1) {
  return static_cast<int>(n.as_int(min, 1 << 30));
}

}  // namespace

std::string plan_to_yaml(const PlanInputs& in, const Plan& plan,
                         const std::vector<BaselineResult>& baselines) {
  std::string y;
  auto line = [&y](const std::string& s) { y += s + "\n"; };
  line("# NEST placement plan (nest place). Times are exact to the picosecond.");
  line("kind: plan");
  line(fmt::format("nest_version: \"{}\"", NEST_VERSION));
  line("inputs:");
  if (!in.profile.empty()) line("  profile: " + quoted(in.profile));
  if (!in.model.empty()) line("  model: " + quoted(in.model));
  if (!in.accelerator.empty()) line("  accelerator: " + quoted(in.accelerator));
  if (!in.topology.empty()) line("  topology: " + quoted(in.topology));
  line("  network: " + in.network);
  if (in.network == "flat") {
    line("  flat_bandwidth: " + exact_rate(in.flat_bandwidth));
    line("  flat_latency: " + exact_time(in.flat_latency));
  }
  line(fmt::format("  rules: {}", to_string(in.rules)));
  line(fmt::format("  devices: {}", in.devices));
  if (in.memory_bandwidth.bytes_per_s() > 0) {
    line("  memory_bandwidth: " + exact_rate(in.memory_bandwidth));
  }
  const VariantDegrees& v = plan.degrees;
  line("variant:");
  line(fmt::format("  tensor_parallel: {}", v.tensor_parallel));
  line(fmt::format("  expert_parallel: {}", v.expert_parallel));
  line(fmt::format("  context_parallel: {}", v.context_parallel));
  line(fmt::format("  sequence_parallel: {}", v.sequence_parallel));
  line(fmt::format("  micro_batch: {}", v.micro_batch));
  line(fmt::format("  devices_per_replica: {}", v.devices_per_replica));
  line(fmt::format("stages: {}", plan.choice.stages()));
  line(fmt::format("data_parallel: {}", plan.choice.data_parallel));
  line(fmt::format("zero_stage: {}", plan.choice.zero_stage));
  line(fmt::format("recompute: {}", plan.choice.recompute));
  line(fmt::format("placement_order: {}", to_string(plan.choice.order)));
  line(fmt::format("microbatches: {}", plan.microbatches));
  line(fmt::format("devices_used: {}", plan.devices_used));
  const Breakdown& b = plan.breakdown;
  line("predicted:");
  line("  iteration_time: " + exact_time(plan.iteration_time));
  line("  compute: " + exact_time(b.compute));
  line("  bubble: " + exact_time(b.bubble));
  line("  collectives: " + exact_time(b.collectives));
  line("  transfers: " + exact_time(b.transfers));
  line("  data_parallel_sync: " + exact_time(b.data_parallel_sync));
  line("  optimizer: " + exact_time(b.optimizer));
  line(fmt::format("  sequences_per_second: {}", plan.sequences_per_second));
  line(fmt::format("  tokens_per_second: {}", plan.tokens_per_second));
  if (plan.mfu) line(fmt::format("  mfu: {}", *plan.mfu));
  line("partition:");
  const DeviceMap map = plan.device_map();
  for (std::size_t p = 0; p < plan.stages.size(); ++p) {
    const StageReport& s = plan.stages[p];
    line(fmt::format("  - layers: [{}, {}]", s.first_layer, s.last_layer - 1));
    line(fmt::format("    in_flight: {}", s.in_flight));
    line("    compute: " + exact_time(s.time.compute));
    line("    collectives: " + exact_time(s.time.collectives));
    line("    transfer: " + exact_time(s.time.transfer));
    line("    data_parallel_sync: " + exact_time(s.data_parallel_sync));
    line("    optimizer: " + exact_time(s.optimizer));
    line(
        fmt::format("    memory: {{weights: {}, gradients: {}, optimizer: {}, activations: {}, "
                    "total: {}}}",
                    exact_bytes(s.memory.weights), exact_bytes(s.memory.gradients),
                    exact_bytes(s.memory.optimizer), exact_bytes(s.memory.activations),
                    exact_bytes(s.memory.total())));
    line("    devices: " + device_lists(map, static_cast<int>(p)));
  }
  if (!baselines.empty()) {
    line("baselines:");
    for (const auto& r : baselines) {
      if (r.plan) {
        line(fmt::format(
            "  {}: {{iteration_time: {}, stages: {}, data_parallel: {}, "
            "tensor_parallel: {}, note: {}}}",
            r.name, exact_time(r.plan->iteration_time), r.plan->choice.stages(),
            r.plan->choice.data_parallel, r.plan->degrees.tensor_parallel, quoted(r.note)));
      } else {
        line(fmt::format("  {}: {{iteration_time: null, note: {}}}", r.name, quoted(r.note)));
      }
    }
  }
  return y;
}

void write_plan_file(const std::string& path, const PlanInputs& inputs, const Plan& plan,
                     const std::vector<BaselineResult>& baselines) {
  write_text_atomically(path, plan_to_yaml(inputs, plan, baselines));
}

PlanRecord parse_plan(std::string_view text, const std::string& name) {
  const config::Node root = config::Node::load_string(text, name);
  root.expect_keys({"kind", "nest_version", "inputs", "variant", "stages", "data_parallel",
                    "zero_stage", "recompute", "placement_order", "microbatches", "devices_used",
                    "predicted", "partition", "baselines"});
  if (root.at("kind").as_string() != "plan") throw root.at("kind").error("not a plan file", "plan");
  (void)root.at("nest_version").as_string();
  PlanRecord r;

  const config::Node in = root.at("inputs");
  in.expect_keys({"profile", "model", "accelerator", "topology", "network", "flat_bandwidth",
                  "flat_latency", "rules", "devices", "memory_bandwidth"});
  if (auto n = in.find("profile")) r.inputs.profile = n->as_string();
  if (auto n = in.find("model")) r.inputs.model = n->as_string();
  if (auto n = in.find("accelerator")) r.inputs.accelerator = n->as_string();
  if (auto n = in.find("topology")) r.inputs.topology = n->as_string();
  if (r.inputs.profile.empty() == r.inputs.model.empty()) {
    throw in.error("a plan names either a profile or a model", "profile or model + accelerator");
  }
  if (!r.inputs.model.empty() && r.inputs.accelerator.empty()) {
    throw in.error("a model needs an accelerator", "accelerator");
  }
  r.inputs.network = in.at("network").as_choice({"zero", "flat", "oracle"});
  if (r.inputs.network == "flat") {
    r.inputs.flat_bandwidth = in.at("flat_bandwidth").as_bandwidth();
    r.inputs.flat_latency = in.at("flat_latency").as_time(true);
  }
  if (r.inputs.network == "oracle" && r.inputs.topology.empty()) {
    throw in.error("the oracle network needs a topology", "topology");
  }
  r.inputs.rules = parse_rules(in.at("rules").as_choice({"megatron", "nest-artifact"}));
  r.inputs.devices = in.at("devices").as_int(1);
  if (auto n = in.find("memory_bandwidth")) r.inputs.memory_bandwidth = n->as_bandwidth();

  const config::Node v = root.at("variant");
  v.expect_keys({"tensor_parallel", "expert_parallel", "context_parallel", "sequence_parallel",
                 "micro_batch", "devices_per_replica"});
  r.degrees.tensor_parallel = as_count(v.at("tensor_parallel"));
  r.degrees.expert_parallel = as_count(v.at("expert_parallel"));
  r.degrees.context_parallel = as_count(v.at("context_parallel"));
  r.degrees.sequence_parallel = v.at("sequence_parallel").as_bool();
  r.degrees.micro_batch = as_count(v.at("micro_batch"));
  r.degrees.devices_per_replica = as_count(v.at("devices_per_replica"));

  const int stages = as_count(root.at("stages"));
  r.choice.data_parallel = as_count(root.at("data_parallel"));
  r.choice.zero_stage = static_cast<int>(root.at("zero_stage").as_int(0, 3));
  r.choice.recompute = root.at("recompute").as_bool();
  try {
    r.choice.order = parse_placement_order(root.at("placement_order").as_string());
  } catch (const Error& e) {
    throw root.at("placement_order").error(e.message(), e.context().expected);
  }
  r.microbatches = root.at("microbatches").as_int(1);
  const std::int64_t used = root.at("devices_used").as_int(1);
  if (used !=
      static_cast<std::int64_t>(stages) * r.degrees.devices_per_replica * r.choice.data_parallel) {
    throw root.at("devices_used")
        .error(
            "inconsistent with stages · devices_per_replica · "
            "data_parallel",
            std::to_string(static_cast<std::int64_t>(stages) * r.degrees.devices_per_replica *
                           r.choice.data_parallel));
  }

  const config::Node predicted = root.at("predicted");
  predicted.expect_keys({"iteration_time", "compute", "bubble", "collectives", "transfers",
                         "data_parallel_sync", "optimizer", "sequences_per_second",
                         "tokens_per_second", "mfu"});
  r.predicted_iteration_time = predicted.at("iteration_time").as_time(true);

  const DeviceMap map = DeviceMap::make(r.choice.order, stages, r.choice.data_parallel,
                                        r.degrees.devices_per_replica);
  const auto parts = root.at("partition").elements();
  if (static_cast<int>(parts.size()) != stages) {
    throw root.at("partition")
        .error("one entry per stage is needed", std::to_string(stages) + " entries");
  }
  r.choice.boundaries.push_back(0);
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const config::Node& s = parts[p];
    s.expect_keys({"layers", "in_flight", "compute", "collectives", "transfer",
                   "data_parallel_sync", "optimizer", "memory", "devices"});
    const auto layers = s.at("layers").as_int_list(0);
    if (layers.size() != 2 || layers[0] != static_cast<std::int64_t>(r.choice.boundaries.back()) ||
        layers[1] < layers[0]) {
      throw s.at("layers").error(
          "stages must cover the layers in order",
          fmt::format("[{}, last] with last >= first", r.choice.boundaries.back()));
    }
    r.choice.boundaries.push_back(static_cast<std::size_t>(layers[1]) + 1);
    const config::Node devices = s.at("devices");
    const auto replicas = devices.elements();
    bool same = static_cast<int>(replicas.size()) == map.data_parallel;
    for (std::size_t k = 0; same && k < replicas.size(); ++k) {
      const auto ids = replicas[k].as_int_list(0);
      same = static_cast<int>(ids.size()) == map.devices_per_replica;
      for (std::size_t m = 0; same && m < ids.size(); ++m) {
        same = ids[m] == map.device(static_cast<int>(p), static_cast<int>(k), static_cast<int>(m));
      }
    }
    if (!same) {
      throw devices.error("the devices differ from those of the placement order",
                          device_lists(map, static_cast<int>(p)));
    }
  }

  if (auto bl = root.find("baselines")) {
    for (const auto& [key, node] : bl->entries()) {
      node.expect_keys({"iteration_time", "stages", "data_parallel", "tensor_parallel", "note"});
      BaselineSummary b{.name = key};
      if (!has_key(node, "iteration_time")) {
        throw node.error("missing required key \"iteration_time\"", "a time or null");
      }
      if (const auto t = node.find("iteration_time")) {
        b.iteration_time = t->as_time(true);
        b.stages = as_count(node.at("stages"));
        b.data_parallel = as_count(node.at("data_parallel"));
        b.tensor_parallel = as_count(node.at("tensor_parallel"));
      }
      b.note = node.at("note").as_string();
      r.baselines.push_back(std::move(b));
    }
  }
  return r;
}

PlanRecord read_plan_file(const std::string& path, const config::Limits& limits) {
  return parse_plan(config::read_input_file(path, limits.max_input_bytes, "a readable plan file"),
                    path);
}

}  // namespace nest::io
