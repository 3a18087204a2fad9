#include "nest/placer/cost_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

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

// Interleaved 1F1B (v > 1) as Megatron-LM runs it: microbatches go through the chunks in groups
// of S, so every replica runs a multiple of S of them.
void validate_interleaving(const workload::Variant& v, const PlanChoice& choice, bool artifact) {
  if (choice.virtual_stages == 1) return;
  if (artifact) {
    throw choice_error("the nest-artifact rules know only 1F1B", "virtual_stages",
                       std::to_string(choice.virtual_stages), "1 under the nest-artifact rules");
  }
  const int S = choice.stages();
  if (S < 2) {
    throw choice_error("interleaving needs a pipeline", "virtual_stages",
                       std::to_string(choice.virtual_stages), "1 with a single stage");
  }
  const std::int64_t d = choice.data_parallel;
  if (v.microbatches % d != 0 || (v.microbatches / d) % S != 0) {
    throw choice_error(
        "interleaved 1F1B runs microbatches in groups of the pipeline's stages", "data_parallel",
        std::to_string(d),
        fmt::format("d dividing the {} microbatches into a multiple of {} per replica",
                    v.microbatches, S));
  }
}

}  // namespace

void validate_choice(const workload::LayerProfile& profile, const PlanChoice& choice,
                     const CostOptions& options) {
  if (options.devices <= 0) {
    throw choice_error("no devices to place on", "devices", std::to_string(options.devices),
                       "at least 1");
  }
  if (options.gradient_buckets < 1) {
    throw choice_error("no gradient bucket", "gradient_buckets",
                       std::to_string(options.gradient_buckets), "at least 1");
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
  if (choice.virtual_stages < 1 ||
      (b.size() - 1) % static_cast<std::size_t>(choice.virtual_stages) != 0) {
    throw choice_error("the chunks do not divide into the virtual stages", "virtual_stages",
                       std::to_string(choice.virtual_stages),
                       fmt::format("a divisor of the {} chunks of the partition", b.size() - 1));
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
    if (artifact) {
      throw choice_error("the nest-artifact rules know no selective recomputation", "recompute",
                         "selective", "none or full under the nest-artifact rules");
    }
    if (!profile.selective_recompute_allowed) {
      throw choice_error("the profile gives no selective-recomputation figures", "recompute",
                         "selective", "none or full (or a profile with selective_recompute)");
    }
  }
  validate_interleaving(v, choice, artifact);
  validate_degrees(v, choice);
  const std::int64_t used =
      static_cast<std::int64_t>(choice.stages()) * v.devices_per_replica * choice.data_parallel;
  if (used > options.devices) {
    throw choice_error("the plan needs more devices than there are", "devices",
                       std::to_string(used), fmt::format("at most {}", options.devices));
  }
}

PassTimes pass_times(const workload::Variant& variant, const ChunkReport& chunk,
                     workload::Recompute applied) {
  double forward_weight = 0;
  double backward_weight = 0;
  Time forward;
  for (std::size_t i = chunk.first_layer; i < chunk.last_layer; ++i) {
    const workload::Layer& layer = variant.layers[i];
    forward += layer.forward;
    for (const auto& c : layer.collectives) {
      const double size = c.size.as_double();
      forward_weight += 0.5 * c.count * size;
      backward_weight +=
          (0.5 * c.count + (applied == workload::Recompute::kFull ? c.recompute_count : 0)) * size;
    }
  }
  const double whole = forward_weight + backward_weight;
  const Time collectives = chunk.time.collectives;
  const Time forward_collectives =
      whole > 0 ? Time::picoseconds(static_cast<std::int64_t>(
                      static_cast<double>(collectives.ps()) * forward_weight / whole + 0.5))
                : Time::zero();
  return PassTimes{.forward = forward + forward_collectives,
                   .backward = chunk.time.compute - forward + collectives - forward_collectives};
}

Plan evaluate(const workload::LayerProfile& profile, const PlanChoice& choice, CommCost& comm,
              const CostOptions& options) {
  return detail::evaluate_keeping(profile, choice, comm, options, nullptr);
}

Plan detail::evaluate_keeping(const workload::LayerProfile& profile, const PlanChoice& choice,
                              CommCost& comm, const CostOptions& options, KeptPrices* kept) {
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
  const int vs = choice.virtual_stages;
  const std::int64_t k = plan.microbatches_per_replica;
  Time slowest_chunk;
  std::vector<workload::Recompute> stage_mode;
  const auto price = [&](int p) {
    return net.placement_independent()
               ? detail::price_any_position(v, plan.degrees, d, choice.zero_stage, p == S - 1, net)
               : detail::price_position(v, plan.degrees, map, p, choice.zero_stage, net);
  };
  std::vector<detail::PositionPrices>* positions = kept != nullptr ? &kept->positions : nullptr;
  if (positions != nullptr && positions->empty()) {
    for (int p = 0; p < S; ++p) positions->push_back(price(p));
  }
  if (positions != nullptr && positions->size() != static_cast<std::size_t>(S)) {
    throw Error::internal("evaluate_keeping: kept positions of another pipeline depth");
  }
  detail::PositionPrices priced;
  for (int p = 0; p < S; ++p) {
    StageReport r;
    const detail::PositionPrices& prices =
        positions != nullptr ? (*positions)[static_cast<std::size_t>(p)] : (priced = price(p));
    const auto chunk_first = [&](int j) {
      return choice.boundaries[static_cast<std::size_t>(p + j * S)];
    };
    const auto chunk_last = [&](int j) {
      return choice.boundaries[static_cast<std::size_t>(p + j * S) + 1];
    };
    r.first_layer = chunk_first(0);
    r.last_layer = chunk_last(vs - 1);
    r.in_flight = vs == 1 ? S - p : detail::interleaved_in_flight(S, p, vs, k);
    const workload::Recompute mode =
        detail::recompute_applies(options.rules, choice.recompute, r.in_flight);
    std::int64_t parameters = 0;
    for (int j = 0; j < vs; ++j) {
      ChunkReport c{.first_layer = chunk_first(j), .last_layer = chunk_last(j)};
      c.time = detail::stage_time(sums, prices, c.first_layer, c.last_layer, mode);
      if (vs > 1) {
        // The next chunk may be on stage 0 (from the last stage): priced on its own devices.
        const int model_chunk = p + j * S;
        c.time.transfer = model_chunk + 1 == S * vs
                              ? Time::zero()
                              : detail::boundary_transfer(v, c.last_layer, map, p,
                                                          (model_chunk + 1) % S, plan.degrees, net);
      }
      slowest_chunk = std::max(slowest_chunk, c.time.total());
      r.time.compute += c.time.compute;
      r.time.collectives += c.time.collectives;
      r.time.transfer += c.time.transfer;
      parameters += sums.parameters[c.last_layer] - sums.parameters[c.first_layer];
      r.chunks.push_back(c);
    }
    r.memory = vs == 1 ? workload::stage_memory(v, r.first_layer, r.last_layer, r.in_flight, memory)
                       : detail::interleaved_memory(v, r.chunks, S, p, k, memory);
    r.optimizer = detail::optimizer_time(parameters, choice.zero_stage, d, options);
    stage_mode.push_back(mode);
    plan.stages.push_back(r);
  }

  for (int p = 0; p < S; ++p) {
    const auto& r = plan.stages[static_cast<std::size_t>(p)];
    if (r.time.total() > plan.max_stage_time) {
      plan.max_stage_time = r.time.total();
      plan.bottleneck_stage = p;
    }
  }
  const auto& b = plan.stages[static_cast<std::size_t>(plan.bottleneck_stage)].time;
  // A slow network can make each transfer fit Time and their sum not: check it wide first.
  const long double wide =
      (static_cast<long double>(b.compute.ps()) + b.collectives.ps() + b.transfer.ps()) *
          static_cast<long double>(k) +
      static_cast<long double>(slowest_chunk.ps()) * (S - 1);
  if (!(wide < static_cast<long double>(kMaxDurationPs))) {
    throw_duration_out_of_range(static_cast<double>(wide));
  }
  // The pipeline's parts: the busiest stage K times, the bubble S − 1 chunk times and the
  // stage-boundary transfers that the schedule does not hide.
  const StageTime* busiest = &b;
  Time bubble_chunk = slowest_chunk;
  Time exposed_transfers = b.transfer * k;
  if (options.overlap_boundary_transfers) {
    busiest = &plan.stages.front().time;
    bubble_chunk = Time::zero();
    bool sends = false;
    for (const StageReport& r : plan.stages) {
      if (r.time.compute + r.time.collectives > busiest->compute + busiest->collectives) {
        busiest = &r.time;
      }
      for (const ChunkReport& c : r.chunks) {
        bubble_chunk = std::max(bubble_chunk, c.time.compute + c.time.collectives);
        sends = sends || c.time.transfer > Time::zero();
      }
    }
    const Time base = (busiest->compute + busiest->collectives) * k +
                      bubble_chunk * static_cast<std::int64_t>(S - 1);
    exposed_transfers = Time::zero();
    if (kept != nullptr && kept->exposed_transfers) {
      exposed_transfers = *kept->exposed_transfers;
    } else if (sends) {
      exposed_transfers = detail::exposed_transfers(v, plan.stages, stage_mode, S, k, base);
    }
    if (kept != nullptr) kept->exposed_transfers = exposed_transfers;
  }
  const Time pipeline = (busiest->compute + busiest->collectives) * k +
                        bubble_chunk * static_cast<std::int64_t>(S - 1) + exposed_transfers;

  // The cooldown: stage p's last backward (its first chunk's, of the last microbatch) ends once
  // the stages before it ran theirs and sent their gradients back.
  const int buckets = options.gradient_buckets;
  struct Cooldown {
    Time end;            // when the stage's last backward ends
    Time last_backward;  // its duration
    Time reduce;         // one bucket's reduction
    Time first_ready;    // when its first bucket is ready
    Time done;           // when its last bucket is reduced
  };
  std::vector<Cooldown> cool(static_cast<std::size_t>(S));
  auto ready = [&](const Cooldown& c, int i) {
    return options.overlap_gradient_sync
               ? c.end - c.last_backward +
                     Time::picoseconds(c.last_backward.ps() * (i + 1) / buckets)
               : c.end;
  };
  // The reductions after the pipeline must fit Time: checked before they are summed.
  auto check = [&](const Cooldown& c, const StageReport& r) {
    const long double reduces = static_cast<long double>(c.reduce.ps()) * buckets +
                                static_cast<long double>(pipeline.ps()) + r.optimizer.ps();
    if (!(reduces < static_cast<long double>(kMaxDurationPs))) {
      throw_duration_out_of_range(static_cast<double>(reduces));
    }
  };
  // Buckets reduced one after another, each once ready on every replica.
  auto schedule = [&](Cooldown& c) {
    c.done = Time::zero();
    c.first_ready = ready(c, 0);
    if (c.reduce.ps() <= 0) return;
    for (int i = 0; i < buckets; ++i) c.done = std::max(c.done, ready(c, i)) + c.reduce;
  };
  {
    Time lag;
    for (int p = 0; p < S; ++p) {
      StageReport& r = plan.stages[static_cast<std::size_t>(p)];
      Cooldown& c = cool[static_cast<std::size_t>(p)];
      const ChunkReport& first = r.chunks.front();
      c.last_backward = pass_times(v, first, stage_mode[static_cast<std::size_t>(p)]).backward;
      c.end = pipeline - lag;
      // Every bucket priced at the largest one's size (the replay's differ by at most a byte):
      // one network query per stage.
      const std::int64_t bucket = detail::bucket_bytes(sums, r, buckets);
      c.reduce = d > 1 && bucket > 0 ? detail::sync_time(bucket, choice.zero_stage, map, p, net)
                                     : Time::zero();
      check(c, r);
      schedule(c);
      lag += c.last_backward + Time::picoseconds(first.time.transfer.ps() / 2);
    }
  }
  if (options.joint_data_parallel_sync && d > 1 && S > 1 && !net.placement_independent() &&
      !net.zero()) {
    // Stage p's reduction shares the network with the stages next to it whose reductions run
    // at the same time (priced alone above): its buckets take the run's joint factor longer.
    auto overlaps = [&](const Cooldown& x, const Cooldown& y) {
      return y.reduce.ps() > 0 && x.first_ready < y.done && y.first_ready < x.done;
    };
    std::vector<Time> joint(static_cast<std::size_t>(S));
    for (int p = 0; p < S; ++p) {
      const Cooldown& c = cool[static_cast<std::size_t>(p)];
      joint[static_cast<std::size_t>(p)] = c.reduce;
      if (c.reduce.ps() <= 0) continue;
      int first = p;
      int last = p;
      while (first > 0 && overlaps(c, cool[static_cast<std::size_t>(first - 1)])) --first;
      while (last + 1 < S && overlaps(c, cool[static_cast<std::size_t>(last + 1)])) ++last;
      if (first == last) continue;
      const double factor = detail::joint_sync_factor(choice.zero_stage, map, first, last, net);
      if (factor > 1) {
        const long double scaled = static_cast<long double>(c.reduce.ps()) * factor;
        if (!(scaled * buckets < static_cast<long double>(kMaxDurationPs))) {
          throw_duration_out_of_range(static_cast<double>(scaled * buckets));
        }
        joint[static_cast<std::size_t>(p)] =
            Time::picoseconds(static_cast<std::int64_t>(std::llround(scaled)));
      }
    }
    for (int p = 0; p < S; ++p) {
      Cooldown& c = cool[static_cast<std::size_t>(p)];
      if (joint[static_cast<std::size_t>(p)] == c.reduce) continue;
      c.reduce = joint[static_cast<std::size_t>(p)];
      check(c, plan.stages[static_cast<std::size_t>(p)]);
      schedule(c);
    }
  }
  Time end_time;
  Time tail_optimizer;
  for (int p = 0; p < S; ++p) {
    StageReport& r = plan.stages[static_cast<std::size_t>(p)];
    const Cooldown& c = cool[static_cast<std::size_t>(p)];
    if (c.reduce.ps() > 0) r.data_parallel_sync = c.reduce * buckets;
    const Time finish = std::max(c.end, c.done) + r.optimizer;
    if (finish > end_time || p == 0) {
      end_time = finish;
      tail_optimizer = r.optimizer;
    }
  }
  // What the pipeline does not cover: the optimizer step of the stage that ends last, and the
  // sync exposed before it.
  const Time tail = end_time - pipeline;
  const Time optimizer = std::min(tail, tail_optimizer);
  plan.breakdown = Breakdown{.compute = busiest->compute * k,
                             .bubble = bubble_chunk * static_cast<std::int64_t>(S - 1),
                             .collectives = busiest->collectives * k,
                             .transfers = exposed_transfers,
                             .data_parallel_sync = tail - optimizer,
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

PipelineOp pipeline_op(std::int64_t stages, std::int64_t stage, std::int64_t v,
                       std::int64_t microbatches, std::int64_t i) noexcept {
  const std::int64_t s = stages;
  const std::int64_t total = microbatches * v;
  const std::int64_t warmup =
      v == 1 ? std::min(s - stage - 1, total) : std::min((s - stage - 1) * 2 + (v - 1) * s, total);
  bool forward = true;
  std::int64_t k = i;
  if (i >= warmup) {
    const std::int64_t r = i - warmup;
    if (r < 2 * (total - warmup)) {
      forward = r % 2 == 0;
      k = forward ? warmup + r / 2 : r / 2;
    } else {
      forward = false;
      k = r - (total - warmup);
    }
  }
  const std::int64_t local = (k / s) % v;
  const std::int64_t microbatch = v == 1 ? k : (k / (s * v)) * s + k % s;
  return PipelineOp{forward, (forward ? local : v - 1 - local) * s + stage, microbatch};
}

}  // namespace nest::placer
