#include "nest/placer/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "nest/core/error.h"
#include "placer/stage_model.h"

namespace nest::placer {
namespace {

Error choice_error(const std::string& message, const std::string& key, const std::string& value,
                   const std::string& expected) {
  return Error::input(message, {.key = key, .value = value, .expected = expected});
}

std::string boundaries_text(const std::vector<std::size_t>& b) {
  std::string out = "[";
  for (std::size_t i = 0; i < b.size(); ++i) out += (i ? ", " : "") + std::to_string(b[i]);
  return out + "]";
}

void validate_degrees(const workload::Variant& v, const PlanChoice& choice) {
  const int t = v.tensor_parallel;
  const int c = v.context_parallel;
  const int e = v.expert_parallel;
  const int dpr = v.devices_per_replica;
  if (t < 1 || c < 1 || e < 1 || dpr < 1 || dpr % (t * c) != 0) {
    throw choice_error("inconsistent parallel degrees in the profile", "variant",
                       fmt::format("t {} c {} e {} devices_per_replica {}", t, c, e, dpr),
                       "t·c dividing devices_per_replica");
  }
  const bool in_replica = t * c * e == dpr;
  if (e > 1 && !in_replica) {
    if (t * c != dpr) {
      throw choice_error("expert groups must fill a replica or span whole replicas", "variant",
                         fmt::format("t {} c {} e {} devices_per_replica {}", t, c, e, dpr),
                         "devices_per_replica = t·c·e or t·c");
    }
    if (choice.data_parallel % e != 0) {
      throw choice_error("expert parallelism across replicas needs d to be a multiple of e",
                         "data_parallel", std::to_string(choice.data_parallel),
                         fmt::format("a multiple of {}", e));
    }
  }
}

}  // namespace

void validate_choice(const workload::LayerProfile& profile, const PlanChoice& choice,
                     const CostOptions& options) {
  if (options.devices <= 0) {
    throw choice_error("no devices to place on", "devices", std::to_string(options.devices),
                       "at least 1");
  }
  if (choice.variant >= profile.variants.size()) {
    throw choice_error("no such variant in the profile", "variant", std::to_string(choice.variant),
                       fmt::format("an index below {}", profile.variants.size()));
  }
  const auto& v = profile.variants[choice.variant];
  const std::size_t n = v.layers.size();
  const auto& b = choice.boundaries;
  bool ok = b.size() >= 2 && b.front() == 0 && b.back() == n;
  for (std::size_t i = 1; ok && i < b.size(); ++i) ok = b[i - 1] < b[i];
  if (!ok) {
    throw choice_error("bad stage partition", "partition", boundaries_text(b),
                       fmt::format("strictly increasing layer boundaries from 0 to {}", n));
  }
  if (choice.data_parallel < 1 || choice.data_parallel > v.microbatches) {
    throw choice_error("data-parallel degree out of range", "data_parallel",
                       std::to_string(choice.data_parallel),
                       fmt::format("1..{} (the microbatches per iteration)", v.microbatches));
  }
  const bool artifact = options.rules == workload::MemoryRules::kNestArtifact;
  if (choice.zero_stage < 0 || choice.zero_stage > 3 || (artifact && choice.zero_stage != 0)) {
    throw choice_error("ZeRO stage out of range", "zero_stage", std::to_string(choice.zero_stage),
                       artifact ? "0 under the nest-artifact rules" : "0..3");
  }
  if (choice.recompute != workload::Recompute::kNone && !profile.recompute_allowed) {
    throw choice_error("the profile does not allow activation recomputation", "recompute",
                       std::string(workload::to_string(choice.recompute)), "none");
  }
  if (choice.recompute == workload::Recompute::kSelective) {
    throw choice_error("selective recomputation is not modeled yet", "recompute", "selective",
                       "none or full");
  }
  if (choice.virtual_stages != 1) {
    throw choice_error("interleaved 1F1B is not modeled yet", "virtual_stages",
                       std::to_string(choice.virtual_stages), "1");
  }
  validate_degrees(v, choice);
  const std::int64_t used =
      static_cast<std::int64_t>(choice.stages()) * v.devices_per_replica * choice.data_parallel;
  if (used > options.devices) {
    throw choice_error("the plan needs more devices than there are", "devices",
                       std::to_string(used), fmt::format("at most {}", options.devices));
  }
}

Plan evaluate(const workload::LayerProfile& profile, const PlanChoice& choice, CommCost& comm,
              const CostOptions& options) {
  validate_choice(profile, choice, options);
  const auto& v = profile.variants[choice.variant];
  const int S = choice.stages();
  const int d = choice.data_parallel;

  Plan plan;
  plan.choice = choice;
  plan.degrees = detail::degrees_of(v);
  plan.rules = options.rules;
  plan.microbatches = v.microbatches;
  plan.microbatches_per_replica = (v.microbatches + d - 1) / d;
  plan.devices_used = static_cast<std::int64_t>(S) * v.devices_per_replica * d;
  plan.devices_available = options.devices;
  plan.capacity = profile.hbm;
  plan.optimizer_modeled = options.rules == workload::MemoryRules::kMegatron &&
                           options.memory_bandwidth.bytes_per_s() > 0;

  const DeviceMap map = plan.device_map();
  const detail::ChainSums sums(v);
  detail::PricedNetwork net(comm);
  const workload::MemoryOptions memory{.rules = options.rules,
                                       .zero_stage = choice.zero_stage,
                                       .data_parallel = d,
                                       .recompute = choice.recompute};
  for (int p = 0; p < S; ++p) {
    StageReport r;
    r.first_layer = choice.boundaries[static_cast<std::size_t>(p)];
    r.last_layer = choice.boundaries[static_cast<std::size_t>(p) + 1];
    r.in_flight = S - p;
    const detail::PositionPrices prices =
        net.placement_independent()
            ? detail::price_any_position(v, plan.degrees, d, choice.zero_stage, p == S - 1, net)
            : detail::price_position(v, plan.degrees, map, p, choice.zero_stage, net);
    r.time =
        detail::stage_time(sums, prices, r.first_layer, r.last_layer,
                           detail::recompute_applies(options.rules, choice.recompute, r.in_flight));
    r.memory = workload::stage_memory(v, r.first_layer, r.last_layer, r.in_flight, memory);
    r.data_parallel_sync =
        detail::sync_time(sums.parameter_bytes[r.last_layer] - sums.parameter_bytes[r.first_layer],
                          choice.zero_stage, map, p, net);
    r.optimizer =
        detail::optimizer_time(sums.parameters[r.last_layer] - sums.parameters[r.first_layer],
                               choice.zero_stage, d, options);
    plan.stages.push_back(r);
  }

  Time sync;
  Time optimizer;
  for (int p = 0; p < S; ++p) {
    const auto& r = plan.stages[static_cast<std::size_t>(p)];
    if (r.time.total() > plan.max_stage_time) {
      plan.max_stage_time = r.time.total();
      plan.bottleneck_stage = p;
    }
    sync = std::max(sync, r.data_parallel_sync);
    optimizer = std::max(optimizer, r.optimizer);
  }
  const auto& b = plan.stages[static_cast<std::size_t>(plan.bottleneck_stage)].time;
  const std::int64_t k = plan.microbatches_per_replica;
  // A slow network can make each transfer fit Time and their sum not: check it wide first.
  const long double wide =
      (static_cast<long double>(b.compute.ps()) + b.collectives.ps() + b.transfer.ps()) *
          static_cast<long double>(k) +
      static_cast<long double>(b.total().ps()) * (S - 1) + sync.ps() + optimizer.ps();
  if (!(wide < static_cast<long double>(kMaxDurationPs))) {
    throw_duration_out_of_range(static_cast<double>(wide));
  }
  plan.breakdown = Breakdown{.compute = b.compute * k,
                             .bubble = b.total() * static_cast<std::int64_t>(S - 1),
                             .collectives = b.collectives * k,
                             .transfers = b.transfer * k,
                             .data_parallel_sync = sync,
                             .optimizer = optimizer};
  plan.iteration_time = plan.breakdown.total();

  const double seconds = plan.iteration_time.to_seconds();
  if (seconds > 0) {
    // A replica step covers micro_batch sequences in each of its e expert groups.
    const double sequences = profile.global_batch > 0 ? static_cast<double>(profile.global_batch)
                                                      : static_cast<double>(v.microbatches) *
                                                            v.micro_batch * v.expert_parallel;
    plan.sequences_per_second = sequences / seconds;
    plan.tokens_per_second =
        plan.sequences_per_second * static_cast<double>(profile.sequence_length);
    double flops = profile.flops_per_iteration.count();
    if (flops <= 0) {
      for (const auto& layer : v.layers) flops += layer.flops.count();
      flops *= static_cast<double>(v.devices_per_replica) * static_cast<double>(v.microbatches);
    }
    const double peak = profile.peak_flop_rate.flops_per_s();
    if (flops > 0 && peak > 0) {
      plan.mfu = flops / (seconds * static_cast<double>(plan.devices_used) * peak);
    }
  }
  return plan;
}

}  // namespace nest::placer
