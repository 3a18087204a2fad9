#include "cli/job_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/placer/plan.h"

namespace nest::cli {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<int> parse_int_list(const std::string& text, const std::string& key) {
  std::vector<int> out;
  for (const std::string& item : split(text)) {
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

}  // namespace

void add_job_options(Options& o, JobArgs& a) {
  job::JobSpec& s = a.spec;
  o.add("model", &s.workload.model, "model file or name (workloads/models/)", "workload.model")
      .add("accelerator", &s.workload.accelerator, "accelerator file or name",
           "workload.accelerator")
      .add("profile", &s.workload.profile, "layer-profile file or name (workloads/profiles/)",
           "workload.profile")
      .add("topology", &s.topology, "topology file or name (topologies/)", "topology")
      .add("devices", &s.devices, "devices to place on (0: the topology's)", "devices")
      .add("rules", &a.rules, "memory rules: megatron or nest-artifact", "rules")
      .add("network", &a.network,
           "oracle (default with a topology), flat, or zero (default with --rules nest-artifact)",
           "network")
      .add("flat-bandwidth", &s.flat_bandwidth, "flat network: per-device rate, e.g. 50GB/s",
           "flat_bandwidth")
      .add("flat-latency", &s.flat_latency, "flat network: latency per step, e.g. 5us",
           "flat_latency")
      .add("memory-bandwidth", &s.memory_bandwidth,
           "device memory bandwidth for the optimizer step (default: the accelerator's)",
           "memory_bandwidth")
      .add("seq", &s.workload.build.sequence_length, "sequence length (0: the model's)",
           "sequence_length")
      .add("global-batch", &s.workload.build.global_batch,
           "sequences per iteration (0: the model's)", "global_batch")
      .add("precision", &a.precision, "compute precision (a key of the accelerator's peaks)",
           "precision")
      .add("flash-attention", &s.workload.build.flash_attention,
           "fused attention (no s x s activations kept)")
      .add("micro-batches", &a.micro_batches, "micro-batch sizes to try (model input)",
           "micro_batches")
      .add("max-tp", &s.workload.candidates.max_tensor_parallel,
           "largest tensor parallel degree (0: the scale-up domain)", "workload.candidates")
      .add("orders", &a.orders, "placement orders to try (innermost axis first)", "orders")
      .add("baselines", &a.baselines, "all, none, or a list of manual,topology-agnostic,anneal",
           "baselines")
      .add("fixed", &s.fixed_plan, "a plan file to evaluate as the `fixed` baseline")
      .add("seed", &s.seed, "routing (ECMP) seed of the oracle and the replay", "seed")
      .add("ideal", &s.ideal,
           "ignore the topology's collective model: line rates, the topology's latencies, ring "
           "collectives (the closed-form checks' network)")
      .add("algorithm", &a.algorithm,
           "one algorithm for every allreduce, all-gather and reduce-scatter (ring, tree, "
           "hierarchical, nvls, ...) instead of the tuner's choice per group",
           "algorithm")
      .add("anneal-seed", &s.anneal_seed, "seed of the anneal baseline", "anneal_seed")
      .add("anneal-steps", &s.anneal_steps, "steps of the anneal baseline", "anneal_steps")
      .add("verify", &s.verify,
           "replay the K best distinct plans (at least the best of each order) and choose by "
           "replayed time; 0: the estimate's best (default 4 with the oracle network)",
           "verify");
  add_limit_options(o, a.limits);
}

job::JobSpec job_spec(JobArgs& a) {
  job::JobSpec s = a.spec;
  try {
    s.rules = placer::parse_rules(a.rules);
  } catch (const Error& e) {
    throw Error::input(e.message(),
                       {.key = "--rules", .value = a.rules, .expected = e.context().expected});
  }
  if (!a.network.empty()) {
    try {
      s.network = job::parse_network_model(a.network);
    } catch (const Error& e) {
      throw Error::input(
          e.message(), {.key = "--network", .value = a.network, .expected = e.context().expected});
    }
  }
  s.workload.build.precision = a.precision;
  s.limits = limits_of(a.limits);
  if (!a.algorithm.empty()) {
    try {
      s.algorithm = coll::parse_algorithm(a.algorithm);
    } catch (const Error& e) {
      throw Error::input(
          e.message(),
          {.key = "--algorithm", .value = a.algorithm, .expected = e.context().expected});
    }
  }
  s.workload.candidates.micro_batches = parse_int_list(a.micro_batches, "--micro-batches");
  s.search.orders.clear();
  for (const std::string& item : split(a.orders)) {
    try {
      s.search.orders.push_back(placer::parse_placement_order(item));
    } catch (const Error& e) {
      throw Error::input(e.message(),
                         {.key = "--orders", .value = item, .expected = e.context().expected});
    }
  }
  if (a.baselines == "all") {
    s.baselines.assign(std::begin(job::kBaselineNames), std::end(job::kBaselineNames));
  } else if (a.baselines == "none") {
    s.baselines.clear();
  } else {
    s.baselines = split(a.baselines);
  }
  return s;
}

}  // namespace nest::cli
