#include "cli/job_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/placer/plan.h"
#include "nest/workload/layer_profile.h"

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

// `value` of an on/off option.
bool on_off(const std::string& value, const std::string& key) {
  if (value == "on") return true;
  if (value == "off") return false;
  throw Error::input("not on or off", {.key = key, .value = value, .expected = "on or off"});
}

// A fixed degree, checked against its range.
std::vector<int> fixed_degree(const std::optional<int>& value, const std::string& key, int min = 1,
                              int max = 1 << 20) {
  if (!value) return {};
  if (*value < min || *value > max) {
    throw Error::input("out of range", {.key = key,
                                        .value = std::to_string(*value),
                                        .expected = fmt::format("an integer in {}..{}", min, max)});
  }
  return {*value};
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
      .add("micro-batches", &a.micro_batches,
           "micro-batch sizes to try (model input; default 1,2,4)", "micro_batches")
      .add("max-tp", &s.workload.candidates.max_tensor_parallel,
           "largest tensor parallel degree (0: the scale-up domain)", "workload.candidates")
      .add("orders", &a.orders,
           "placement orders to try (innermost axis first; default tp-pp-dp,tp-dp-pp)", "orders")
      .add("tp", &a.tensor_parallel, "fix the tensor-parallel degree (model input)",
           "tensor_parallel")
      .add("pp", &a.pipeline, "fix the pipeline depth (stages)", "search.stages")
      .add("dp", &a.data_parallel, "fix the data-parallel degree (replicas)",
           "search.data_parallel")
      .add("cp", &a.context_parallel, "fix the context-parallel degree (model input; default 1)",
           "context_parallel")
      .add("ep", &a.expert_parallel, "fix the expert-parallel degree (MoE model input)",
           "expert_parallel")
      .add("vp", &a.virtual_stages,
           "fix the virtual stages per device (interleaved 1F1B; 1 = plain 1F1B)",
           "search.virtual_stages")
      .add("mb", &a.micro_batch, "fix the micro-batch size (model input)", "micro_batch")
      .add("zero", &a.zero_stage, "fix the ZeRO stage (0..3)", "zero_stages")
      .add("recompute", &a.recompute, "fix the activation recomputation: none, selective or full",
           "recompute_modes")
      .add("sp", &a.sequence_parallel,
           "sequence parallelism on or off (model input; default on whenever t > 1)",
           "sequence_parallel")
      .add("order", &a.order, "fix the placement order (tp-pp-dp, tp-dp-pp, ...)", "orders")
      .add("partition", &a.partition,
           "balanced (the layer split of the least stage time) or uniform (Megatron-LM's: equal "
           "blocks per stage, embedding and head on the ends)",
           "search.uniform_partition")
      .add("ignore-memory", &s.search.ignore_memory,
           "price plans whatever their memory (the report says which stage does not fit)")
      .add("tp-overlap", &a.tp_overlap,
           "asynchronous tensor-parallel communication in the backward: on (Megatron-LM since "
           "2021-09) or off",
           "tp_comm_overlap")
      .add("grad-accumulation-bytes", &s.workload.build.gradient_accumulation_bytes,
           "memory traffic per parameter and microbatch of the gradient accumulation (0: fused, "
           "6: PyTorch DDP, 10: Megatron-LM's local DDP of 2021)",
           "gradient_accumulation_bytes")
      .add("grad-buckets", &s.search.cost.gradient_buckets,
           "buckets of the data-parallel gradient reduction (default 4)", "gradient_buckets")
      .add("grad-overlap", &a.gradient_overlap,
           "data-parallel reduction beside the last backward pass: on, or off (after the "
           "backward, Megatron-LM's local DDP of 2021)",
           "overlap_gradient_sync")
      .add("p2p-overlap", &a.p2p_overlap,
           "stage-boundary sends beside the compute: on, or off (each stage waits for its sends, "
           "as Megatron-LM's p2p before Megatron-Core's overlap_p2p_comm)",
           "overlap_boundary_transfers")
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
           "verify")
      .add("threads", &s.threads,
           "threads for independent work: the verification's replays, the topology-agnostic "
           "and anneal baselines beside the search, and the search's simulations of "
           "link-disjoint sets (default 2; 1 runs everything in line; same results)",
           "threads");
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
  if (a.micro_batch && !a.micro_batches.empty()) {
    throw Error::input("give --mb or --micro-batches, not both", {.key = "--mb"});
  }
  s.workload.candidates.micro_batches =
      a.micro_batch
          ? fixed_degree(a.micro_batch, "--mb")
          : parse_int_list(a.micro_batches.empty() ? "1,2,4" : a.micro_batches, "--micro-batches");
  if (!a.order.empty() && !a.orders.empty()) {
    throw Error::input("give --order or --orders, not both", {.key = "--order"});
  }
  const std::string order_key = a.order.empty() ? "--orders" : "--order";
  const std::string orders = !a.order.empty()   ? a.order
                             : a.orders.empty() ? "tp-pp-dp,tp-dp-pp"
                                                : a.orders;
  if (!a.order.empty() && a.order.find(',') != std::string::npos) {
    throw Error::input("one placement order", {.key = "--order",
                                               .value = a.order,
                                               .expected = "one order such as tp-dp-pp (a list "
                                                           "goes to --orders)"});
  }
  s.search.orders.clear();
  for (const std::string& item : split(orders)) {
    try {
      s.search.orders.push_back(placer::parse_placement_order(item));
    } catch (const Error& e) {
      throw Error::input(e.message(),
                         {.key = order_key, .value = item, .expected = e.context().expected});
    }
  }
  placer::CandidateOptions& c = s.workload.candidates;
  c.tensor_parallel = fixed_degree(a.tensor_parallel, "--tp");
  c.expert_parallel = fixed_degree(a.expert_parallel, "--ep");
  if (a.context_parallel) c.context_parallel = fixed_degree(a.context_parallel, "--cp");
  if (!a.sequence_parallel.empty()) c.sequence_parallel = on_off(a.sequence_parallel, "--sp");
  placer::SearchOptions& search = s.search;
  search.stages = fixed_degree(a.pipeline, "--pp");
  search.data_parallel = fixed_degree(a.data_parallel, "--dp");
  search.virtual_stages = fixed_degree(a.virtual_stages, "--vp");
  if (a.zero_stage) search.zero_stages = fixed_degree(a.zero_stage, "--zero", 0, 3);
  if (!a.recompute.empty()) {
    try {
      search.recompute_modes = {workload::parse_recompute(a.recompute)};
    } catch (const Error& e) {
      throw Error::input(
          e.message(),
          {.key = "--recompute", .value = a.recompute, .expected = "none, selective or full"});
    }
  }
  if (a.partition != "balanced" && a.partition != "uniform") {
    throw Error::input(
        "unknown partition",
        {.key = "--partition", .value = a.partition, .expected = "balanced or uniform"});
  }
  search.uniform_partition = a.partition == "uniform";
  s.workload.build.tp_comm_overlap = on_off(a.tp_overlap, "--tp-overlap");
  search.cost.overlap_gradient_sync = on_off(a.gradient_overlap, "--grad-overlap");
  search.cost.overlap_boundary_transfers = on_off(a.p2p_overlap, "--p2p-overlap");
  if (a.baselines == "all") {
    s.baselines.assign(std::begin(job::kBaselineNames), std::end(job::kBaselineNames));
  } else if (a.baselines == "none") {
    s.baselines.clear();
  } else {
    s.baselines = split(a.baselines);
  }
  return s;
}

job::Placement place(job::Job& job, const job::SimulateOptions& options) {
  placer::SearchResult result = job.search(options);  // candidates replayed beside it
  if (result.best) return job.verify(std::move(result), options);
  std::string reason = result.infeasible_reason;
  const std::string library = "(ignore_memory prices it anyway)";
  if (const auto at = reason.find(library); at != std::string::npos) {
    reason.replace(at, library.size(), "(--ignore-memory prices it anyway)");
  }
  throw Error::input(reason);
}

}  // namespace nest::cli
