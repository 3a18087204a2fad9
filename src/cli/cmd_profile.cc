// `nest profile`: shows a workload's per-layer profile, built from a model and an accelerator
// under one parallel configuration, or read from a layer-profile file; or checks and summarizes
// a folder of Chakra execution traces (--chakra).

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/chakra/chakra.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "nest/workload/profile_file.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;
using workload::CollectiveOp;
using workload::Layer;
using workload::LayerCollective;
using workload::LayerProfile;
using workload::ParallelAxis;
using workload::Variant;

constexpr const char* kUsage =
    "nest profile --model M --accelerator A [--tp N] [--sp] [--ep N] [--cp N] "
    "[--micro-batch N] [--global-batch N] [--seq N] [--precision P] [--flash-attention] "
    "[--operators] [--json]\n       nest profile --profile FILE [--tp N] [--ep N] [--cp N] "
    "[--sp] [--json]\n       nest profile --chakra DIR [--json]";

// One entry per (op, axis, size): entries that differ only in the compute they overlap merge.
std::string collectives_text(const std::vector<LayerCollective>& cs) {
  std::vector<LayerCollective> merged;
  for (const LayerCollective& c : cs) {
    auto it = std::find_if(merged.begin(), merged.end(), [&](const LayerCollective& m) {
      return m.op == c.op && m.axis == c.axis && m.size == c.size;
    });
    if (it == merged.end()) {
      merged.push_back(c);
    } else {
      it->count += c.count;
    }
  }
  std::string out;
  for (const LayerCollective& c : merged) {
    out += fmt::format("{}{}({}) {} x{}", out.empty() ? "" : ", ", workload::to_string(c.op),
                       workload::to_string(c.axis), format_bytes(c.size), c.count);
  }
  return out.empty() ? "-" : out;
}

bool same_numbers(const Layer& a, const Layer& b) {
  return a.name == b.name && a.forward == b.forward && a.backward == b.backward &&
         a.recompute == b.recompute && a.selective_recompute == b.selective_recompute &&
         a.selective_activation_bytes == b.selective_activation_bytes &&
         a.parameters == b.parameters && a.activation_bytes == b.activation_bytes &&
         a.input_bytes == b.input_bytes && a.flops == b.flops &&
         collectives_text(a.collectives) == collectives_text(b.collectives);
}

std::string variant_title(const Variant& v) {
  return fmt::format(
      "t={} sp={} c={} e={} micro-batch {}: {} devices per replica, {} "
      "microbatches per iteration",
      v.tensor_parallel, v.sequence_parallel ? "on" : "off", v.context_parallel, v.expert_parallel,
      v.micro_batch, v.devices_per_replica, v.microbatches);
}

std::string ms(Time t) { return fmt::format("{:.3f}", t.to_milliseconds()); }

void print_variant(const Variant& v) {
  std::cout << "\nvariant " << variant_title(v) << "\n";
  const auto row = [](const std::string& layers, const std::string& name, const std::string& params,
                      const std::string& flops, const std::string& fwd, const std::string& bwd,
                      const std::string& rec, const std::string& sel, const std::string& act,
                      const std::string& kept, const std::string& in, const std::string& colls) {
    std::cout << fmt::format(
        "{:<8} {:<22} {:>10} {:>9} {:>10} {:>10} {:>10} {:>10} {:>11} {:>11} {:>11}  {}\n", layers,
        name, params, flops, fwd, bwd, rec, sel, act, kept, in, colls);
  };
  row("layers", "name", "params/dev", "GFLOP", "fwd ms", "bwd ms", "recomp ms", "select ms",
      "activations", "selective", "input", "collectives per microbatch");
  std::int64_t params = 0;
  double flops = 0;
  Time fwd;
  Time bwd;
  Time rec;
  Time sel;
  Bytes act;
  Bytes kept;
  for (std::size_t i = 0; i < v.layers.size();) {
    std::size_t j = i + 1;
    while (j < v.layers.size() && same_numbers(v.layers[i], v.layers[j])) ++j;
    const Layer& l = v.layers[i];
    const std::string range = j - i == 1 ? std::to_string(i) : fmt::format("{}-{}", i, j - 1);
    row(range, l.name + (j - i > 1 ? fmt::format(" x{}", j - i) : ""),
        format_count(static_cast<double>(l.parameters)),
        fmt::format("{:.1f}", l.flops.count() / 1e9), ms(l.forward), ms(l.backward),
        ms(l.recompute), ms(l.selective_recompute), format_bytes(l.activation_bytes),
        format_bytes(l.selective_activation_bytes), format_bytes(l.input_bytes),
        collectives_text(l.collectives));
    const auto n = static_cast<std::int64_t>(j - i);
    params += l.parameters * n;
    flops += l.flops.count() * static_cast<double>(n);
    fwd += l.forward * n;
    bwd += l.backward * n;
    rec += l.recompute * n;
    sel += l.selective_recompute * n;
    act += l.activation_bytes * n;
    kept += l.selective_activation_bytes * n;
    i = j;
  }
  row("total", fmt::format("{} layers", v.layers.size()), format_count(static_cast<double>(params)),
      fmt::format("{:.1f}", flops / 1e9), ms(fwd), ms(bwd), ms(rec), ms(sel), format_bytes(act),
      format_bytes(kept), "", "");
}

nlohmann::ordered_json layer_json(std::size_t index, const Layer& l) {
  nlohmann::ordered_json j;
  j["index"] = index;
  j["name"] = l.name;
  j["parameters"] = l.parameters;
  j["expert_parameters"] = l.expert_parameters;
  j["parameter_bytes"] = l.parameter_bytes.count();
  j["activation_bytes"] = l.activation_bytes.count();
  j["selective_activation_bytes"] = l.selective_activation_bytes.count();
  j["input_bytes"] = l.input_bytes.count();
  j["output_bytes"] = l.output_bytes.count();
  j["forward_s"] = l.forward.to_seconds();
  j["backward_s"] = l.backward.to_seconds();
  j["recompute_s"] = l.recompute.to_seconds();
  j["selective_recompute_s"] = l.selective_recompute.to_seconds();
  j["flops"] = l.flops.count();
  j["collectives"] = nlohmann::ordered_json::array();
  for (const LayerCollective& c : l.collectives) {
    j["collectives"].push_back({{"op", workload::to_string(c.op)},
                                {"axis", workload::to_string(c.axis)},
                                {"size_bytes", c.size.count()},
                                {"count", c.count},
                                {"recompute_count", c.recompute_count},
                                {"overlap_s", c.overlap.to_seconds()}});
  }
  return j;
}

nlohmann::ordered_json variant_json(const Variant& v) {
  nlohmann::ordered_json j;
  j["tensor_parallel"] = v.tensor_parallel;
  j["sequence_parallel"] = v.sequence_parallel;
  j["context_parallel"] = v.context_parallel;
  j["expert_parallel"] = v.expert_parallel;
  j["micro_batch"] = v.micro_batch;
  j["devices_per_replica"] = v.devices_per_replica;
  j["microbatches"] = v.microbatches;
  j["layers"] = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < v.layers.size(); ++i)
    j["layers"].push_back(layer_json(i, v.layers[i]));
  return j;
}

void print_json(const LayerProfile& p, std::int64_t active_parameters) {
  nlohmann::ordered_json j;
  j["model"] = p.model;
  j["accelerator"] = p.accelerator;
  // Whole-model parameters; a profile file that does not say has null.
  j["parameters"] = p.total_parameters > 0 ? nlohmann::ordered_json(p.total_parameters)
                                           : nlohmann::ordered_json(nullptr);
  if (active_parameters > 0) j["active_parameters"] = active_parameters;
  j["sequence_length"] = p.sequence_length;
  j["global_batch"] = p.global_batch;
  if (p.global_batch > 0 && p.flops_per_iteration.count() > 0) {
    j["flops_per_iteration"] = p.flops_per_iteration.count();
  }
  j["hbm_bytes"] = p.hbm.count();
  j["peak_flops_per_s"] = p.peak_flop_rate.flops_per_s();
  const nlohmann::ordered_json first = variant_json(p.variants.front());
  for (const auto& [key, value] : first.items()) j[key] = value;
  j["variants"] = nlohmann::ordered_json::array();
  for (const Variant& v : p.variants) j["variants"].push_back(variant_json(v));
  std::cout << j.dump(2) << "\n";
}

void print_operators(const workload::Model& model, const workload::Accelerator& device,
                     const workload::ParallelConfig& config,
                     const workload::BuildOptions& options) {
  for (const workload::LayerGraph& g : workload::layer_graphs(model, device, config, options)) {
    std::cout << fmt::format("\noperators of {} (per microbatch, one device)\n", g.name);
    std::cout << fmt::format("{:<26} {:>6} {:>10} {:>11} {:>11} {:>10} {:>10}\n", "operator",
                             "kind", "GFLOP", "traffic", "saved", "fwd us", "bwd us");
    for (const workload::Operator& op : g.operators) {
      std::cout << fmt::format("{:<26} {:>6} {:>10.2f} {:>11} {:>11} {:>10.1f} {:>10.1f}\n",
                               op.name,
                               op.kind == workload::OperatorKind::kMatmul ? "matmul" : "memory",
                               op.forward_flops.count() / 1e9, format_bytes(op.forward_bytes),
                               format_bytes(op.saved_bytes), op.forward.to_seconds() * 1e6,
                               op.backward.to_seconds() * 1e6);
    }
  }
}

// Keeps the variants of a profile file that match the degrees the user gave.
std::vector<Variant> select_variants(const std::vector<Variant>& all, const Options& o,
                                     const workload::ParallelConfig& c) {
  std::vector<Variant> out;
  for (const Variant& v : all) {
    if (o.given("tp") && v.tensor_parallel != c.tensor) continue;
    if (o.given("ep") && v.expert_parallel != c.expert) continue;
    if (o.given("cp") && v.context_parallel != c.context) continue;
    if (c.sequence && !v.sequence_parallel) continue;
    out.push_back(v);
  }
  if (out.empty()) {
    std::string have;
    for (const Variant& v : all) {
      have +=
          fmt::format("{}t={} e={} c={} sp={}", have.empty() ? "" : "; ", v.tensor_parallel,
                      v.expert_parallel, v.context_parallel, v.sequence_parallel ? "on" : "off");
    }
    throw Error::input("no variant of the profile matches the parallel degrees given",
                       {.key = "--tp", .expected = "one of: " + have});
  }
  return out;
}

int run_unchecked(const Options& o, const config::Limits& limits, const std::string& profile_name,
                  std::string model_name, std::string accelerator_name,
                  const workload::ParallelConfig& config, const workload::BuildOptions& build,
                  bool operators, bool json) {
  const Catalog data = catalog();
  if (!profile_name.empty()) {
    if (!model_name.empty() || !accelerator_name.empty()) {
      throw Error::input(
          "--profile excludes --model and --accelerator",
          {.key = "--profile", .expected = "--model M --accelerator A, or --profile FILE"});
    }
    const std::string path = data.find(DataKind::kProfile, profile_name, "--profile");
    LayerProfile p = workload::load_layer_profile(path);
    p.variants = select_variants(p.variants, o, config);
    if (json) {
      print_json(p, 0);
      return 0;
    }
    std::cout << fmt::format(
        "profile      {}\nmodel        {}{}\naccelerator  {}: {} HBM\n", path, p.model,
        p.total_parameters > 0 ? fmt::format(": {} parameters", p.total_parameters) : std::string(),
        p.accelerator, format_bytes(p.hbm));
    for (const Variant& v : p.variants) print_variant(v);
    return 0;
  }
  if (model_name.empty() || accelerator_name.empty()) {
    throw Error::input(
        model_name.empty() ? "missing --model (or --profile)" : "missing --accelerator",
        {.key = model_name.empty() ? "--model" : "--accelerator",
         .expected = "--model M --accelerator A, or --profile FILE"});
  }
  {
    const workload::Model model =
        workload::load_model(data.find(DataKind::kModel, model_name, "--model"));
    const workload::Accelerator device = workload::load_accelerator(
        data.find(DataKind::kAccelerator, accelerator_name, "--accelerator"), limits);
    if (build.sequence_length < 0 || build.global_batch < 0) {
      throw Error::input("must not be negative",
                         {.key = build.sequence_length < 0 ? "--seq" : "--global-batch",
                          .expected = "a positive integer (or 0 for the model's)"});
    }
    const LayerProfile p = workload::build_profile(model, device, {config}, build);
    const workload::ParameterCount count = workload::count_parameters(model);
    if (json) {
      print_json(p, model.is_moe() ? count.active : 0);
      return 0;
    }
    std::cout << fmt::format(
        "model        {}: {} parameters ({}){}\n", model.name, count.total,
        format_count(static_cast<double>(count.total)),
        model.is_moe() ? fmt::format(", {} active per token", count.active) : std::string());
    std::cout << fmt::format("accelerator  {}: {} {}, {} HBM at {}\n", device.name,
                             format_flop_rate(p.peak_flop_rate), build.precision,
                             format_bytes(device.hbm), format_bandwidth(device.hbm_bandwidth));
    if (p.global_batch > 0) {
      std::cout << fmt::format("model FLOPs  {:.4g} per iteration (global batch {}, sequence {})\n",
                               p.flops_per_iteration.count(), p.global_batch, p.sequence_length);
    }
    print_variant(p.variants.front());
    if (operators) print_operators(model, device, config, build);
  }
  return 0;
}

}  // namespace

// A Chakra ET folder: read and checked (chakra::read_folder), then counted.
int print_chakra(const std::string& dir, bool json) {
  const chakra::Trace trace = chakra::read_folder(dir);
  const chakra::Summary s = chakra::summarize(trace);
  if (json) {
    nlohmann::ordered_json nodes = nlohmann::ordered_json::object();
    for (const auto& [type, n] : s.nodes) nodes[chakra::to_string(type)] = n;
    nlohmann::ordered_json bytes = nlohmann::ordered_json::object();
    for (const auto& [type, b] : s.collective_bytes) bytes[chakra::to_string(type)] = b.count();
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (const auto& st : s.stages) {
      stages.push_back({{"stage", st.stage},
                        {"first_layer", st.first_layer},
                        {"last_layer", st.last_layer},
                        {"ranks", st.ranks},
                        {"forward_s", st.forward.to_seconds()},
                        {"backward_s", st.backward.to_seconds()}});
    }
    const nlohmann::ordered_json j = {{"folder", dir},
                                      {"ranks", s.ranks},
                                      {"empty_ranks", s.empty_ranks},
                                      {"nodes", nodes},
                                      {"dependencies", s.dependencies},
                                      {"groups", s.groups},
                                      {"compute_max_s", s.max_compute.to_seconds()},
                                      {"compute_min_s", s.min_compute.to_seconds()},
                                      {"end_s", s.end.to_seconds()},
                                      {"send_bytes", s.send_bytes.count()},
                                      {"collective_bytes", bytes},
                                      {"stages", stages}};
    std::cout << j.dump() << "\n";
    return 0;
  }
  std::size_t total = 0;
  for (const auto& [type, n] : s.nodes) total += n;
  std::cout << fmt::format("chakra       {}: {} ranks ({} without nodes), {} process groups\n", dir,
                           s.ranks, s.empty_ranks, s.groups);
  std::cout << fmt::format("nodes        {} with {} dependencies:", total, s.dependencies);
  for (const auto& [type, n] : s.nodes)
    std::cout << fmt::format(" {} {}", n, chakra::to_string(type));
  std::cout << "\n";
  std::cout << fmt::format("compute      {} to {} per rank; the last node ends at {}\n",
                           format_time(s.min_compute), format_time(s.max_compute),
                           format_time(s.end));
  std::cout << fmt::format("traffic      {} sent point to point", format_bytes(s.send_bytes));
  for (const auto& [type, b] : s.collective_bytes) {
    std::cout << fmt::format(", {} in {}", format_bytes(b), chakra::to_string(type));
  }
  std::cout << "\n";
  if (s.stages.empty()) return 0;
  std::cout << fmt::format("\n{:<6} {:<10} {:>6} {:>12} {:>12}\n", "stage", "layers", "ranks",
                           "forward", "backward");
  for (const auto& st : s.stages) {
    std::cout << fmt::format("{:<6} {:<10} {:>6} {:>12} {:>12}\n", st.stage,
                             fmt::format("{}-{}", st.first_layer, st.last_layer - 1), st.ranks,
                             format_time(st.forward), format_time(st.backward));
  }
  return 0;
}

int run_profile(std::span<char* const> args, const Context&) {
  std::string chakra_dir;
  std::string profile;
  std::string model;
  std::string accelerator;
  workload::ParallelConfig config;
  workload::BuildOptions build;
  bool operators = false;
  bool json = false;
  Options o(kUsage);
  o.add("model", &model, "model name (workloads/models/) or YAML file", "model")
      .add("accelerator", &accelerator, "accelerator name (workloads/accelerators/) or YAML file",
           "accelerator")
      .add("profile", &profile, "layer-profile YAML file or name (instead of --model)", "profile")
      .add("tp", &config.tensor, "tensor-parallel degree", "tensor_parallel")
      .add("sp", &config.sequence, "sequence parallelism", "sequence_parallel")
      .add("ep", &config.expert, "expert-parallel degree", "expert_parallel")
      .add("cp", &config.context, "context-parallel degree", "context_parallel")
      .add("micro-batch", &config.micro_batch, "sequences per microbatch", "micro_batch")
      .add("global-batch", &build.global_batch, "sequences per iteration (0: the model's)",
           "global_batch")
      .add("seq", &build.sequence_length, "sequence length (0: the model's)", "sequence_length")
      .add("precision", &build.precision, "compute precision", "precision")
      .add("flash-attention", &build.flash_attention, "fused attention (no s x s activations)")
      .add("operators", &operators, "also print each layer kind's operators")
      .add("chakra", &chakra_dir,
           "check and summarize a folder of Chakra ET files (per rank; per stage for NEST's)")
      .add("json", &json, "print one JSON object instead of tables");
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  return o.run([&] {
    if (!chakra_dir.empty()) {
      if (!profile.empty() || !model.empty() || !accelerator.empty()) {
        throw Error::input("--chakra excludes --profile, --model and --accelerator",
                           {.key = "--chakra", .expected = "--chakra DIR alone (with --json)"});
      }
      return print_chakra(chakra_dir, json);
    }
    return run_unchecked(o, limits_of(limit_args), profile, model, accelerator, config, build,
                         operators, json);
  });
}

}  // namespace nest::cli
