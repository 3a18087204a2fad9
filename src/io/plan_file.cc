#include "nest/io/plan_file.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

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
using placer::PlanCollective;
using placer::StageReport;
using placer::to_string;
using placer::VariantDegrees;

using Json = nlohmann::ordered_json;

namespace {

// A time as seconds with all 12 picosecond digits: exact, and read back exactly.
std::string exact_seconds(Time t) {
  const std::int64_t ps = t.ps();
  const char* sign = ps < 0 ? "-" : "";
  const std::int64_t a = ps < 0 ? -ps : ps;
  return fmt::format("{}{}.{:012d}", sign, a / 1'000'000'000'000LL, a % 1'000'000'000'000LL);
}

std::string exact_rate(Bandwidth b) { return fmt::format("{} B/s", b.bytes_per_s()); }

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

// A figure in seconds: `<key>_s` as a decimal number (0.2 plans), or `<key>` with its unit (0.1).
std::optional<Time> find_seconds(const config::Node& map, const std::string& key) {
  if (const auto n = map.find(key + "_s")) {
    try {
      return parse_time(n->as_string() + " s");
    } catch (const Error& e) {
      throw n->error(e.message(), "seconds as a decimal number");
    }
  }
  if (const auto n = map.find(key)) return n->as_time(true);
  return std::nullopt;
}

Time at_seconds(const config::Node& map, const std::string& key) {
  if (auto t = find_seconds(map, key)) return *t;
  throw map.error("missing required key \"" + key + "_s\"", "seconds as a decimal number");
}

// Keys of a 0.2 figure map and the 0.1 names they replace.
std::vector<std::string> figure_keys(std::initializer_list<std::string_view> seconds,
                                     std::initializer_list<std::string_view> others) {
  std::vector<std::string> out;
  for (std::string_view k : seconds) {
    out.emplace_back(k);
    out.push_back(std::string(k) + "_s");
  }
  for (std::string_view k : others) out.emplace_back(k);
  return out;
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

// Seconds as the double nearest to the exact decimal (integer picoseconds divided, not
// multiplied by 1e-12); printed shortest, it reads back as that decimal.
double seconds(Time t) { return static_cast<double>(t.ps()) / 1e12; }

bool is_leaf(const Json& j) {
  if (j.is_object() || j.is_array()) {
    for (const auto& [key, value] : j.items()) {
      if (value.is_object()) return false;
      if (value.is_array() && !is_leaf(value)) return false;
    }
  }
  return true;
}

void emit_scalar(YAML::Emitter& out, const Json& j) {
  if (j.is_null()) {
    out << YAML::Null;
  } else if (j.is_boolean()) {
    out << j.get<bool>();
  } else if (j.is_number_unsigned()) {
    out << j.get<std::uint64_t>();
  } else if (j.is_number_integer()) {
    out << j.get<std::int64_t>();
  } else if (j.is_number_float()) {
    out << fmt::format("{}", j.get<double>());
  } else {
    out << j.get<std::string>();
  }
}

// Maps and lists below the top level whose values are all scalars (or lists of scalars) are
// written in flow style ("{weights_bytes: 1, ...}", "[[0, 1], [2, 3]]"), the rest as blocks.
void emit(YAML::Emitter& out, const Json& j, int depth) {
  const bool flow = depth >= 2 && is_leaf(j);
  if (j.is_object()) {
    if (flow) out << YAML::Flow;
    out << YAML::BeginMap;
    for (const auto& [key, value] : j.items()) {
      out << YAML::Key << key << YAML::Value;
      emit(out, value, depth + 1);
    }
    out << YAML::EndMap;
  } else if (j.is_array()) {
    if (flow || is_leaf(j)) out << YAML::Flow;
    out << YAML::BeginSeq;
    for (const auto& value : j) emit(out, value, depth + 1);
    out << YAML::EndSeq;
  } else {
    emit_scalar(out, j);
  }
}

Json search_document(const placer::SearchOptions& o) {
  Json recompute = Json::array();
  for (const workload::Recompute r : o.recompute_modes) {
    recompute.push_back(std::string(workload::to_string(r)));
  }
  Json orders = Json::array();
  for (const placer::PlacementOrder order : o.orders)
    orders.push_back(std::string(to_string(order)));
  return {{"stages", o.stages},
          {"data_parallel", o.data_parallel},
          {"virtual_stages", o.virtual_stages},
          {"zero_stages", o.zero_stages},
          {"recompute", std::move(recompute)},
          {"orders", std::move(orders)},
          {"max_stages", o.max_stages},
          {"uniform_partition", o.uniform_partition},
          {"ignore_memory", o.ignore_memory},
          {"gradient_buckets", o.cost.gradient_buckets},
          {"overlap_gradient_sync", o.cost.overlap_gradient_sync},
          {"overlap_boundary_transfers", o.cost.overlap_boundary_transfers}};
}

Json candidates_document(const placer::CandidateOptions& c) {
  Json j = {{"tensor_parallel", c.tensor_parallel},
            {"expert_parallel", c.expert_parallel},
            {"context_parallel", c.context_parallel},
            {"micro_batches", c.micro_batches},
            {"max_tensor_parallel", c.max_tensor_parallel},
            {"max_expert_parallel", c.max_expert_parallel}};
  if (c.sequence_parallel) j["sequence_parallel"] = *c.sequence_parallel;
  return j;
}

std::vector<int> int_list(const config::Node& n, std::int64_t min) {
  std::vector<int> out;
  for (const std::int64_t v : n.as_int_list(min)) {
    if (v > (1 << 30)) throw n.error("value out of range", "integers up to 2^30");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

placer::SearchOptions read_search(const config::Node& n) {
  n.expect_keys({"stages", "data_parallel", "virtual_stages", "zero_stages", "recompute", "orders",
                 "max_stages", "uniform_partition", "ignore_memory", "gradient_buckets",
                 "overlap_gradient_sync", "overlap_boundary_transfers"});
  placer::SearchOptions o;
  if (auto x = n.find("stages")) o.stages = int_list(*x, 1);
  if (auto x = n.find("data_parallel")) o.data_parallel = int_list(*x, 1);
  if (auto x = n.find("virtual_stages")) o.virtual_stages = int_list(*x, 1);
  if (auto x = n.find("zero_stages")) {
    o.zero_stages = int_list(*x, 0);
    for (const int z : o.zero_stages) {
      if (z > 3) throw x->error("ZeRO stage out of range", "0..3");
    }
  }
  if (auto x = n.find("recompute")) {
    o.recompute_modes.clear();
    for (const config::Node& e : x->elements()) {
      o.recompute_modes.push_back(
          workload::parse_recompute(e.as_choice({"none", "selective", "full"})));
    }
  }
  if (auto x = n.find("orders")) {
    o.orders.clear();
    for (const config::Node& e : x->elements()) {
      try {
        o.orders.push_back(parse_placement_order(e.as_string()));
      } catch (const Error& err) {
        throw e.error(err.message(), err.context().expected);
      }
    }
  }
  if (auto x = n.find("max_stages")) o.max_stages = static_cast<int>(x->as_int(0, 1 << 30));
  if (auto x = n.find("uniform_partition")) o.uniform_partition = x->as_bool();
  if (auto x = n.find("ignore_memory")) o.ignore_memory = x->as_bool();
  if (auto x = n.find("gradient_buckets")) {
    o.cost.gradient_buckets = static_cast<int>(x->as_int(1, 65'536));
  }
  if (auto x = n.find("overlap_gradient_sync")) o.cost.overlap_gradient_sync = x->as_bool();
  if (auto x = n.find("overlap_boundary_transfers")) {
    o.cost.overlap_boundary_transfers = x->as_bool();
  }
  return o;
}

placer::CandidateOptions read_candidates(const config::Node& n) {
  n.expect_keys({"tensor_parallel", "expert_parallel", "context_parallel", "micro_batches",
                 "max_tensor_parallel", "max_expert_parallel", "sequence_parallel"});
  placer::CandidateOptions c{.max_tensor_parallel = 0};
  if (auto x = n.find("tensor_parallel")) c.tensor_parallel = int_list(*x, 1);
  if (auto x = n.find("expert_parallel")) c.expert_parallel = int_list(*x, 1);
  if (auto x = n.find("context_parallel")) c.context_parallel = int_list(*x, 1);
  if (auto x = n.find("micro_batches")) c.micro_batches = int_list(*x, 1);
  if (auto x = n.find("max_tensor_parallel")) {
    c.max_tensor_parallel = static_cast<int>(x->as_int(0, 1 << 20));
  }
  if (auto x = n.find("max_expert_parallel")) {
    c.max_expert_parallel = static_cast<int>(x->as_int(0, 1 << 20));
  }
  if (auto x = n.find("sequence_parallel")) c.sequence_parallel = x->as_bool();
  return c;
}

Json plan_document(const PlanInputs& in, const Plan& plan,
                   const std::vector<BaselineResult>& baselines,
                   const placer::Verification* verification) {
  Json doc;
  doc["kind"] = "plan";
  doc["nest_version"] = NEST_VERSION;
  Json& inputs = doc["inputs"];
  if (!in.profile.empty()) inputs["profile"] = in.profile;
  if (!in.model.empty()) inputs["model"] = in.model;
  if (!in.accelerator.empty()) inputs["accelerator"] = in.accelerator;
  if (!in.topology.empty()) inputs["topology"] = in.topology;
  if (!in.hashes.empty()) {
    Json& hashes = inputs["hashes"];
    for (const auto& [kind, hash] : in.hashes) hashes[kind] = hash;
  }
  inputs["network"] = in.network;
  if (in.network == "flat") {
    inputs["flat_bandwidth"] = exact_rate(in.flat_bandwidth);
    inputs["flat_latency"] = exact_seconds(in.flat_latency) + " s";
  }
  inputs["rules"] = std::string(to_string(in.rules));
  inputs["devices"] = in.devices;
  if (in.memory_bandwidth.bytes_per_s() > 0) {
    inputs["memory_bandwidth"] = exact_rate(in.memory_bandwidth);
  }
  if (!in.model.empty()) {
    inputs["build"] = {{"precision", in.build.precision},
                       {"flash_attention", in.build.flash_attention},
                       {"sequence_length", in.build.sequence_length},
                       {"global_batch", in.build.global_batch},
                       {"tp_comm_overlap", in.build.tp_comm_overlap},
                       {"gradient_accumulation_bytes", in.build.gradient_accumulation_bytes}};
  }
  inputs["seed"] = in.seed;
  inputs["anneal_seed"] = in.anneal_seed;
  inputs["ideal"] = in.ideal;
  if (!in.algorithm.empty()) inputs["algorithm"] = in.algorithm;
  inputs["search"] = search_document(in.search);
  if (!in.model.empty()) inputs["candidates"] = candidates_document(in.candidates);

  const VariantDegrees& v = plan.degrees;
  doc["variant"] = {
      {"tensor_parallel", v.tensor_parallel},   {"expert_parallel", v.expert_parallel},
      {"context_parallel", v.context_parallel}, {"sequence_parallel", v.sequence_parallel},
      {"micro_batch", v.micro_batch},           {"devices_per_replica", v.devices_per_replica}};
  doc["stages"] = plan.choice.stages();
  doc["data_parallel"] = plan.choice.data_parallel;
  doc["zero_stage"] = plan.choice.zero_stage;
  doc["recompute"] = std::string(workload::to_string(plan.choice.recompute));
  doc["virtual_stages"] = plan.choice.virtual_stages;
  doc["placement_order"] = std::string(to_string(plan.choice.order));
  doc["microbatches"] = plan.microbatches;
  doc["devices_used"] = plan.devices_used;
  doc["devices_available"] = plan.devices_available;

  const Breakdown& b = plan.breakdown;
  Json& p = doc["predicted"];
  p["iteration_time_s"] = seconds(plan.iteration_time);
  p["compute_s"] = seconds(b.compute);
  p["bubble_s"] = seconds(b.bubble);
  p["collectives_s"] = seconds(b.collectives);
  p["transfers_s"] = seconds(b.transfers);
  p["data_parallel_sync_s"] = seconds(b.data_parallel_sync);
  p["optimizer_s"] = seconds(b.optimizer);
  p["optimizer_modeled"] = plan.optimizer_modeled;
  p["sequences_per_second"] = plan.sequences_per_second;
  p["tokens_per_second"] = plan.tokens_per_second;
  p["mfu"] = plan.mfu ? Json(*plan.mfu) : Json(nullptr);
  p["memory_capacity_bytes"] = plan.capacity.count();

  Json& partition = doc["partition"];
  partition = Json::array();
  const DeviceMap map = plan.device_map();
  for (std::size_t i = 0; i < plan.stages.size(); ++i) {
    const StageReport& s = plan.stages[i];
    Json stage;
    if (s.chunks.size() <= 1) {
      stage["layers"] = {s.first_layer, s.last_layer - 1};
    } else {
      Json chunks = Json::array();
      for (const auto& c : s.chunks) chunks.push_back({c.first_layer, c.last_layer - 1});
      stage["chunks"] = std::move(chunks);
    }
    stage["in_flight"] = s.in_flight;
    stage["compute_s"] = seconds(s.time.compute);
    stage["collectives_s"] = seconds(s.time.collectives);
    stage["transfer_s"] = seconds(s.time.transfer);
    stage["data_parallel_sync_s"] = seconds(s.data_parallel_sync);
    stage["optimizer_s"] = seconds(s.optimizer);
    stage["memory"] = {{"weights_bytes", s.memory.weights.count()},
                       {"gradients_bytes", s.memory.gradients.count()},
                       {"optimizer_bytes", s.memory.optimizer.count()},
                       {"activations_bytes", s.memory.activations.count()},
                       {"total_bytes", s.memory.total().count()}};
    Json devices = Json::array();
    for (int k = 0; k < map.data_parallel; ++k) {
      Json replica = Json::array();
      for (int m = 0; m < map.devices_per_replica; ++m) {
        replica.push_back(map.device(static_cast<int>(i), k, m));
      }
      devices.push_back(std::move(replica));
    }
    stage["devices"] = std::move(devices);
    partition.push_back(std::move(stage));
  }

  {
    Json& cs = doc["collectives"];  // empty unless the collective oracle priced the plan
    cs = Json::array();
    for (const PlanCollective& c : plan.collectives) {
      cs.push_back({{"group", c.group},
                    {"stage", c.stage},
                    {"op", std::string(workload::to_string(c.op))},
                    {"size_bytes", c.size.count()},
                    {"group_size", c.group_size},
                    {"groups", c.groups},
                    {"algorithm", c.algorithm},
                    {"protocol", c.protocol},
                    {"channels", c.channels},
                    {"tuned", c.tuned},
                    {"time_s", seconds(c.time)}});
    }
  }

  Json& bl = doc["baselines"];
  bl = Json::object();
  for (const auto& r : baselines) {
    Json entry;
    if (r.plan) {
      entry["iteration_time_s"] = seconds(r.plan->iteration_time);
      entry["stages"] = r.plan->choice.stages();
      entry["data_parallel"] = r.plan->choice.data_parallel;
      entry["tensor_parallel"] = r.plan->degrees.tensor_parallel;
    } else {
      entry["iteration_time_s"] = nullptr;
    }
    entry["note"] = r.note;
    bl[r.name] = std::move(entry);
  }
  if (verification != nullptr && !verification->candidates.empty()) {
    const placer::Verification& ver = *verification;
    Json& out = doc["verification"];
    out["requested"] = ver.requested;
    out["chosen_estimate_rank"] = ver.candidates[ver.chosen].estimate_rank;
    out["chosen_replay_rank"] = ver.candidates[ver.chosen].replay_rank;
    out["estimate_only_regret"] = ver.estimate_regret();
    Json list = Json::array();
    for (const placer::VerifiedCandidate& c : ver.candidates) {
      list.push_back({{"estimate_rank", c.estimate_rank},
                      {"replay_rank", c.replay_rank},
                      {"estimate_s", seconds(c.plan.iteration_time)},
                      {"replay_s", seconds(c.replayed)},
                      {"tensor_parallel", c.plan.degrees.tensor_parallel},
                      {"micro_batch", c.plan.degrees.micro_batch},
                      {"stages", c.plan.choice.stages()},
                      {"data_parallel", c.plan.choice.data_parallel},
                      {"zero_stage", c.plan.choice.zero_stage},
                      {"recompute", std::string(workload::to_string(c.plan.choice.recompute))},
                      {"virtual_stages", c.plan.choice.virtual_stages},
                      {"placement_order", std::string(to_string(c.plan.choice.order))}});
    }
    out["candidates"] = std::move(list);
  }
  return doc;
}

}  // namespace

std::string plan_to_yaml(const PlanInputs& inputs, const Plan& plan,
                         const std::vector<BaselineResult>& baselines,
                         const placer::Verification* verification) {
  YAML::Emitter out;
  out << YAML::Comment("NEST placement plan (nest place). Times in seconds, exact to 1 ps.");
  emit(out, plan_document(inputs, plan, baselines, verification), 0);
  if (!out.good()) throw Error::internal("plan YAML: " + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

std::string plan_to_json(const PlanInputs& inputs, const Plan& plan,
                         const std::vector<BaselineResult>& baselines,
                         const placer::Verification* verification) {
  return plan_document(inputs, plan, baselines, verification).dump(2);
}

void write_plan_file(const std::string& path, const PlanInputs& inputs, const Plan& plan,
                     const std::vector<BaselineResult>& baselines,
                     const placer::Verification* verification) {
  write_text_atomically(path, plan_to_yaml(inputs, plan, baselines, verification));
}

PlanRecord parse_plan(std::string_view text, const std::string& name) {
  const config::Node root = config::Node::load_string(text, name);
  root.expect_keys({"kind", "nest_version", "inputs", "variant", "stages", "data_parallel",
                    "zero_stage", "recompute", "virtual_stages", "placement_order", "microbatches",
                    "devices_used", "devices_available", "predicted", "partition", "collectives",
                    "baselines", "verification"});
  if (root.at("kind").as_string() != "plan") throw root.at("kind").error("not a plan file", "plan");
  (void)root.at("nest_version").as_string();
  PlanRecord r;

  const config::Node in = root.at("inputs");
  in.expect_keys({"profile", "model", "accelerator", "topology", "hashes", "network",
                  "flat_bandwidth", "flat_latency", "rules", "devices", "memory_bandwidth", "build",
                  "seed", "anneal_seed", "ideal", "algorithm", "search", "candidates"});
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
  if (auto n = in.find("hashes")) {
    for (const auto& [kind, hash] : n->entries()) {
      if (kind != "topology" && kind != "profile" && kind != "model" && kind != "accelerator") {
        throw hash.error("unknown input", "topology, profile, model or accelerator");
      }
      r.inputs.hashes.emplace_back(kind, hash.as_string());
    }
  }
  if (auto n = in.find("build")) {
    n->expect_keys({"precision", "flash_attention", "sequence_length", "global_batch",
                    "tp_comm_overlap", "gradient_accumulation_bytes"});
    workload::BuildOptions& b = r.inputs.build;
    if (auto x = n->find("precision")) b.precision = x->as_string();
    if (auto x = n->find("flash_attention")) b.flash_attention = x->as_bool();
    if (auto x = n->find("sequence_length")) b.sequence_length = x->as_int(0);
    if (auto x = n->find("global_batch")) b.global_batch = x->as_int(0);
    if (auto x = n->find("tp_comm_overlap")) b.tp_comm_overlap = x->as_bool();
    if (auto x = n->find("gradient_accumulation_bytes")) {
      b.gradient_accumulation_bytes = x->as_int(0, 1 << 20);
    }
  }
  if (auto n = in.find("search")) r.inputs.search = read_search(*n);
  if (auto n = in.find("candidates")) r.inputs.candidates = read_candidates(*n);
  if (auto n = in.find("seed")) r.inputs.seed = static_cast<std::uint64_t>(n->as_int(0));
  if (auto n = in.find("anneal_seed")) {
    r.inputs.anneal_seed = static_cast<std::uint64_t>(n->as_int(0));
  }
  if (auto n = in.find("ideal")) r.inputs.ideal = n->as_bool();
  if (auto n = in.find("algorithm")) r.inputs.algorithm = n->as_string();

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
  // Plans written before the three modes say true (full) or false (none).
  r.choice.recompute = workload::parse_recompute(
      root.at("recompute").as_choice({"none", "selective", "full", "true", "false"}));
  if (auto n = root.find("virtual_stages")) r.choice.virtual_stages = as_count(*n);
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
  predicted.expect_keys(figure_keys({"iteration_time", "compute", "bubble", "collectives",
                                     "transfers", "data_parallel_sync", "optimizer"},
                                    {"sequences_per_second", "tokens_per_second", "mfu",
                                     "optimizer_modeled", "memory_capacity_bytes"}));
  r.predicted_iteration_time = at_seconds(predicted, "iteration_time");

  const DeviceMap map = DeviceMap::make(r.choice.order, stages, r.choice.data_parallel,
                                        r.degrees.devices_per_replica);
  const auto parts = root.at("partition").elements();
  if (static_cast<int>(parts.size()) != stages) {
    throw root.at("partition")
        .error("one entry per stage is needed", std::to_string(stages) + " entries");
  }
  // Chunk c (model order) is chunk c / S of stage c mod S; its [first, last] and where it is.
  const int vs = r.choice.virtual_stages;
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks(static_cast<std::size_t>(stages * vs));
  std::vector<std::optional<config::Node>> chunk_nodes(chunks.size());
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const config::Node& s = parts[p];
    s.expect_keys(
        figure_keys({"compute", "collectives", "transfer", "data_parallel_sync", "optimizer"},
                    {"layers", "chunks", "in_flight", "memory", "devices"}));
    std::vector<config::Node> ranges;
    if (vs == 1) {
      ranges.push_back(s.at("layers"));
    } else {
      ranges = s.at("chunks").elements();
      if (static_cast<int>(ranges.size()) != vs) {
        throw s.at("chunks").error("one range per virtual stage is needed",
                                   std::to_string(vs) + " ranges [first, last]");
      }
    }
    for (std::size_t j = 0; j < ranges.size(); ++j) {
      const auto range = ranges[j].as_int_list(0);
      if (range.size() != 2 || range[1] < range[0]) {
        throw ranges[j].error("not a layer range", "[first, last] with last >= first");
      }
      const std::size_t c = p + j * parts.size();
      chunks[c] = {range[0], range[1]};
      chunk_nodes[c] = ranges[j];
    }
  }
  r.choice.boundaries.push_back(0);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    if (chunks[c].first != static_cast<std::int64_t>(r.choice.boundaries.back())) {
      throw chunk_nodes[c]->error(
          "stages must cover the layers in order",
          fmt::format("[{}, last] with last >= first", r.choice.boundaries.back()));
    }
    r.choice.boundaries.push_back(static_cast<std::size_t>(chunks[c].second) + 1);
  }
  for (std::size_t p = 0; p < parts.size(); ++p) {
    const config::Node& s = parts[p];
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
      node.expect_keys(
          figure_keys({"iteration_time"}, {"stages", "data_parallel", "tensor_parallel", "note"}));
      BaselineSummary b{.name = key};
      if (!has_key(node, "iteration_time") && !has_key(node, "iteration_time_s")) {
        throw node.error("missing required key \"iteration_time_s\"", "seconds or null");
      }
      if (const auto t = find_seconds(node, "iteration_time")) {
        b.iteration_time = *t;
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
  PlanRecord r = parse_plan(
      config::read_input_file(path, limits.max_input_bytes, "a readable plan file"), path);
  r.file = path;
  return r;
}

}  // namespace nest::io
