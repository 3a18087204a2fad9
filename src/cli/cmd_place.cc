// `nest place`: the NEST search for one workload on one network, with the baselines beside it.

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/coll/closed_form.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/io/plan_file.h"
#include "nest/placer/baselines.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/topo/loader.h"
#include "nest/topo/metrics.h"
#include "nest/topo/router.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/catalog.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;
using placer::BaselineResult;
using placer::Plan;

constexpr const char* kUsage =
    "nest place --model M --accelerator A | --profile FILE  --topology T [--devices N] "
    "[--rules megatron|nest-artifact] [--network oracle|flat|zero] [--baselines all|none|LIST] "
    "[--fixed PLAN] [-o plan.yaml] [--json]";

std::vector<int> parse_int_list(const std::string& text, const std::string& key) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 1 << 20) {
      throw Error::input(
          "bad list",
          {.key = key, .value = text, .expected = "positive integers separated by commas"});
    }
    out.push_back(static_cast<int>(v));
  }
  if (out.empty()) throw Error::input("empty list", {.key = key, .expected = "e.g. 1,2,4"});
  return out;
}

std::string percent(double x) { return fmt::format("{:.1f}%", 100 * x); }

std::string human_rate(double v) {
  if (v >= 1e9) return fmt::format("{:.4g}G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.4g}M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.4g}k", v / 1e3);
  return fmt::format("{:.4g}", v);
}

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
      p.choice.data_parallel, p.choice.zero_stage, p.choice.recompute ? "on" : "off",
      placer::to_string(p.choice.order));
}

void print_text(const Plan& p, const workload::LayerProfile& profile,
                const std::vector<BaselineResult>& baselines, const std::string& header) {
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
  std::string throughput = fmt::format("{} sequences/s", human_rate(p.sequences_per_second));
  if (p.tokens_per_second > 0) {
    throughput += fmt::format(", {} tokens/s", human_rate(p.tokens_per_second));
  }
  if (p.mfu) throughput += ", MFU " + percent(*p.mfu);
  std::cout << "throughput: " << throughput << "\n";
  std::cout << fmt::format("stages (memory per device against {}):\n", format_bytes(p.capacity));
  std::cout << fmt::format("  {:>3}  {:>9}  {:>9}  {:>10}  {:>10}  {:>6}  {}\n", "#", "layers",
                           "in flight", "time/mb", "memory", "", "devices (replica 0)");
  const auto map = p.device_map();
  const auto& layers = profile.variants[p.choice.variant].layers;
  (void)layers;
  for (std::size_t s = 0; s < p.stages.size(); ++s) {
    const auto& st = p.stages[s];
    std::cout << fmt::format("  {:>3}  {:>9}  {:>9}  {:>10}  {:>10}  {:>6}  {}\n", s,
                             fmt::format("{}-{}", st.first_layer, st.last_layer - 1), st.in_flight,
                             format_time(st.time.total()), format_bytes(st.memory.total()),
                             percent(st.memory.total().as_double() / p.capacity.as_double()),
                             stage_devices(map, static_cast<int>(s)));
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

nlohmann::json to_json(const Plan& p, const std::vector<BaselineResult>& baselines) {
  nlohmann::json j;
  j["iteration_time_s"] = p.iteration_time.to_seconds();
  j["stages"] = p.choice.stages();
  j["data_parallel"] = p.choice.data_parallel;
  j["tensor_parallel"] = p.degrees.tensor_parallel;
  j["expert_parallel"] = p.degrees.expert_parallel;
  j["context_parallel"] = p.degrees.context_parallel;
  j["sequence_parallel"] = p.degrees.sequence_parallel;
  j["micro_batch"] = p.degrees.micro_batch;
  j["zero_stage"] = p.choice.zero_stage;
  j["recompute"] = p.choice.recompute;
  j["placement_order"] = std::string(placer::to_string(p.choice.order));
  j["devices_used"] = p.devices_used;
  j["devices_available"] = p.devices_available;
  const auto& b = p.breakdown;
  j["breakdown_s"] = {{"compute", b.compute.to_seconds()},
                      {"bubble", b.bubble.to_seconds()},
                      {"collectives", b.collectives.to_seconds()},
                      {"transfers", b.transfers.to_seconds()},
                      {"data_parallel_sync", b.data_parallel_sync.to_seconds()},
                      {"optimizer", b.optimizer.to_seconds()}};
  j["sequences_per_second"] = p.sequences_per_second;
  j["tokens_per_second"] = p.tokens_per_second;
  j["mfu"] = p.mfu ? nlohmann::json(*p.mfu) : nlohmann::json(nullptr);
  j["capacity_bytes"] = p.capacity.count();
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : p.stages) {
    stages.push_back({{"first_layer", s.first_layer},
                      {"last_layer", s.last_layer - 1},
                      {"in_flight", s.in_flight},
                      {"time_per_microbatch_s", s.time.total().to_seconds()},
                      {"memory_bytes", s.memory.total().count()}});
  }
  j["partition"] = stages;
  nlohmann::json bl = nlohmann::json::object();
  for (const auto& r : baselines) {
    bl[r.name] =
        r.plan ? nlohmann::json(r.plan->iteration_time.to_seconds()) : nlohmann::json(nullptr);
  }
  j["baselines"] = bl;
  return j;
}

std::vector<std::string> baseline_names(const std::string& text) {
  const std::vector<std::string> known = {"manual", "topology-agnostic", "anneal"};
  if (text == "all") return known;
  if (text == "none") return {};
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (std::find(known.begin(), known.end(), item) == known.end()) {
      throw Error::input("unknown baseline", {.key = "--baselines",
                                              .value = item,
                                              .expected = "all, none, or a list of manual, "
                                                          "topology-agnostic, anneal"});
    }
    out.push_back(item);
  }
  return out;
}

}  // namespace

int run_place(std::span<char* const> args) {
  po::options_description o("options");
  o.add_options()("model", po::value<std::string>(), "model file or name (workloads/models/)")(
      "accelerator", po::value<std::string>(), "accelerator file or name")(
      "profile", po::value<std::string>(), "layer-profile file or name (workloads/profiles/)")(
      "topology", po::value<std::string>(), "topology file or name (topologies/)")(
      "devices", po::value<std::int64_t>(), "devices to place on (default: the topology's)")(
      "rules", po::value<std::string>()->default_value("megatron"),
      "memory rules: megatron or nest-artifact")(
      "network", po::value<std::string>(),
      "oracle (default with a topology), flat, or zero (default with --rules nest-artifact)")(
      "flat-bandwidth", po::value<std::string>(), "flat network: per-device rate, e.g. 50GB/s")(
      "flat-latency", po::value<std::string>(), "flat network: latency per step, e.g. 5us")(
      "memory-bandwidth", po::value<std::string>(),
      "device memory bandwidth for the optimizer step (default: the accelerator's)")(
      "micro-batches", po::value<std::string>()->default_value("1,2,4"),
      "micro-batch sizes to try (model input)")(
      "max-tp", po::value<int>(), "largest tensor parallel degree (default: scale-up domain)")(
      "orders", po::value<std::string>()->default_value("tp-pp-dp,tp-dp-pp"),
      "placement orders to try (innermost axis first)")(
      "baselines", po::value<std::string>()->default_value("all"),
      "all, none, or a list of manual,topology-agnostic,anneal")(
      "fixed", po::value<std::string>(), "a plan file to evaluate as the `fixed` baseline")(
      "seed", po::value<std::uint64_t>()->default_value(1), "seed of the anneal baseline")(
      "anneal-steps", po::value<int>()->default_value(2000), "steps of the anneal baseline")(
      "output,o", po::value<std::string>(), "write the plan file here")(
      "json", "print one JSON object instead of the text report");
  po::variables_map vm;
  if (!parse_options(args, kUsage, o, {}, vm)) return 0;

  const bool has_profile = vm.count("profile") != 0;
  const bool has_model = vm.count("model") != 0;
  if (has_profile == has_model) {
    throw Error::input("give either --profile, or --model with --accelerator",
                       {.key = "--profile", .expected = "usage: " + std::string(kUsage)});
  }
  if (has_model && vm.count("accelerator") == 0) {
    throw Error::input("--model needs --accelerator", {.key = "--accelerator"});
  }
  io::PlanInputs inputs;
  try {
    inputs.rules = placer::parse_rules(vm["rules"].as<std::string>());
  } catch (const Error& e) {
    throw Error::input(e.message(), {.key = "--rules",
                                     .value = vm["rules"].as<std::string>(),
                                     .expected = e.context().expected});
  }
  const bool artifact = inputs.rules == workload::MemoryRules::kNestArtifact;

  std::optional<topo::Topology> topology;
  if (vm.count("topology")) {
    inputs.topology = find_topology(vm["topology"].as<std::string>());
    topology.emplace(topo::load_topology(inputs.topology));
  }
  inputs.network = vm.count("network")
                       ? vm["network"].as<std::string>()
                       : (artifact || !topology ? std::string("zero") : std::string("oracle"));
  if (inputs.network != "zero" && inputs.network != "flat" && inputs.network != "oracle") {
    throw Error::input(
        "unknown network model",
        {.key = "--network", .value = inputs.network, .expected = "oracle, flat or zero"});
  }
  if (inputs.network == "oracle" && !topology) {
    throw Error::input("the oracle network needs a topology", {.key = "--topology"});
  }
  if (vm.count("devices")) {
    inputs.devices = vm["devices"].as<std::int64_t>();
  } else if (topology) {
    inputs.devices = static_cast<std::int64_t>(topology->num_devices());
  } else {
    throw Error::input("a device count is needed without a topology", {.key = "--devices"});
  }
  if (inputs.devices < 1 ||
      (topology && inputs.devices > static_cast<std::int64_t>(topology->num_devices()))) {
    throw Error::input("device count out of range",
                       {.key = "--devices",
                        .value = std::to_string(inputs.devices),
                        .expected = topology ? fmt::format("1..{} (the topology's devices)",
                                                           topology->num_devices())
                                             : std::string("at least 1")});
  }
  const int scale_up = topology ? topology->domain_sizes().front() : 8;

  // The workload.
  const auto roots = search_roots();
  workload::LayerProfile profile;
  workload::Accelerator accelerator;
  if (has_profile) {
    inputs.profile = workload::find_workload_file(workload::WorkloadKind::kProfile,
                                                  vm["profile"].as<std::string>(), roots);
    profile = workload::load_layer_profile(inputs.profile);
  } else {
    inputs.model = workload::find_workload_file(workload::WorkloadKind::kModel,
                                                vm["model"].as<std::string>(), roots);
    inputs.accelerator = workload::find_workload_file(workload::WorkloadKind::kAccelerator,
                                                      vm["accelerator"].as<std::string>(), roots);
    const workload::Model model = workload::load_model(inputs.model);
    accelerator = workload::load_accelerator(inputs.accelerator);
    placer::CandidateOptions candidates;
    candidates.micro_batches =
        parse_int_list(vm["micro-batches"].as<std::string>(), "--micro-batches");
    candidates.max_tensor_parallel = vm.count("max-tp") ? vm["max-tp"].as<int>() : scale_up;
    const workload::BuildOptions build;
    const auto configs = placer::candidate_configs(model, build, candidates);
    if (configs.empty()) {
      throw Error::input("no parallel configuration of the model fits the options",
                         {.key = "--max-tp"});
    }
    profile = workload::build_profile(model, accelerator, configs, build);
    inputs.memory_bandwidth = accelerator.hbm_bandwidth * accelerator.memory_efficiency;
  }
  if (vm.count("memory-bandwidth")) {
    inputs.memory_bandwidth = parse_bandwidth(vm["memory-bandwidth"].as<std::string>());
  }

  // The network.
  std::unique_ptr<placer::FlatCommCost> flat;
  if (vm.count("flat-bandwidth") || !topology) {
    if (vm.count("flat-bandwidth")) {
      flat = std::make_unique<placer::FlatCommCost>(
          parse_bandwidth(vm["flat-bandwidth"].as<std::string>()),
          vm.count("flat-latency") ? parse_time(vm["flat-latency"].as<std::string>())
                                   : Time::zero(),
          scale_up);
    }
  } else {
    const placer::FlatCommCost f = placer::flat_network_for(*topology, scale_up);
    flat = std::make_unique<placer::FlatCommCost>(f.bandwidth(), f.latency(), scale_up);
  }
  std::unique_ptr<placer::CommCost> comm;
  if (inputs.network == "oracle") {
    comm = std::make_unique<placer::OracleCommCost>(*topology);
  } else if (inputs.network == "flat") {
    if (!flat) {
      throw Error::input("the flat network needs --flat-bandwidth or a topology",
                         {.key = "--flat-bandwidth"});
    }
    inputs.flat_bandwidth = flat->bandwidth();
    inputs.flat_latency = flat->latency();
    comm = std::make_unique<placer::FlatCommCost>(flat->bandwidth(), flat->latency(), scale_up);
  } else {
    comm = std::make_unique<placer::ZeroCommCost>(scale_up);
  }

  placer::SearchOptions options;
  options.cost = {.rules = inputs.rules,
                  .devices = inputs.devices,
                  .memory_bandwidth = inputs.memory_bandwidth};
  options.orders.clear();
  std::stringstream order_list(vm["orders"].as<std::string>());
  for (std::string item; std::getline(order_list, item, ',');) {
    try {
      options.orders.push_back(placer::parse_placement_order(item));
    } catch (const Error& e) {
      throw Error::input(e.message(),
                         {.key = "--orders", .value = item, .expected = e.context().expected});
    }
  }
  const placer::SearchResult found = placer::search(profile, *comm, options);
  if (!found.best) throw Error::input(found.infeasible_reason);
  const Plan& plan = *found.best;

  std::vector<BaselineResult> baselines;
  for (const auto& name : baseline_names(vm["baselines"].as<std::string>())) {
    if (name == "manual") baselines.push_back(placer::manual_baseline(profile, *comm, options));
    if (name == "anneal") {
      baselines.push_back(placer::anneal_baseline(
          profile, *comm, options,
          {.seed = vm["seed"].as<std::uint64_t>(), .iterations = vm["anneal-steps"].as<int>()}));
    }
    if (name == "topology-agnostic") {
      if (inputs.network != "oracle" || !flat) {
        baselines.push_back({.name = name,
                             .note = "not applicable: the network model is already "
                                     "topology-agnostic"});
      } else {
        baselines.push_back(placer::topology_agnostic_baseline(profile, *comm, *flat, options));
      }
    }
  }
  if (vm.count("fixed")) {
    const io::PlanRecord given = io::read_plan_file(vm["fixed"].as<std::string>());
    placer::PlanChoice choice = given.choice;
    choice.variant = placer::find_variant(profile, given.degrees);
    baselines.push_back(placer::fixed_baseline(profile, choice, *comm, options.cost));
  }

  if (vm.count("output")) {
    io::write_plan_file(vm["output"].as<std::string>(), inputs, plan, baselines);
  }
  if (vm.count("json")) {
    std::cout << to_json(plan, baselines).dump(2) << "\n";
    return 0;
  }
  std::string what = has_profile ? fs::path(inputs.profile).filename().string()
                                 : fmt::format("{} on {}", profile.model, profile.accelerator);
  const std::string header =
      fmt::format("nest place: {}, {} devices, rules {}, network: {}", what, inputs.devices,
                  placer::to_string(inputs.rules), comm->describe());
  print_text(plan, profile, baselines, header);
  if (vm.count("output")) std::cout << "plan written to " << vm["output"].as<std::string>() << "\n";
  return 0;
}

}  // namespace nest::cli
