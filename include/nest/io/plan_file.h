#pragma once
/// \file
/// Plan files (YAML): everything a replay needs to rebuild the run — the inputs (profile or
/// model + accelerator, topology, network model, rules, device budget), the chosen variant's
/// degrees, the partition, d, ZeRO stage, recomputation, placement order and the device of every
/// (stage, replica, shard) — plus the predicted figures and the baselines', for people.
///
/// ```yaml
/// kind: plan
/// nest_version: "0.1.0"
/// inputs:
///   profile: workloads/profiles/gpt3-175b-h100.yaml   # or model: + accelerator:
///   topology: topologies/h100_rail_1024.yaml          # * absent for zero/flat networks
///   network: oracle                                   # zero | flat | oracle
///   flat_bandwidth: 50 GB/s                           # * network flat only
///   flat_latency: 5 us                                # * network flat only
///   rules: megatron                                   # megatron | nest-artifact
///   devices: 1024                                     # the budget the plan was made for
///   memory_bandwidth: 3.35 TB/s                       # * optimizer step; absent: not modeled
/// variant: {tensor_parallel: 4, expert_parallel: 1, context_parallel: 1,
///           sequence_parallel: true, micro_batch: 1, devices_per_replica: 4}
/// stages: 8
/// data_parallel: 32
/// zero_stage: 2
/// recompute: false
/// placement_order: tp-pp-dp
/// microbatches: 1536
/// devices_used: 1024
/// predicted:                   # per iteration; times in seconds with picosecond digits
///   iteration_time: 7.013123456789 s
///   compute: ...               # also bubble, collectives, transfers, data_parallel_sync,
///                              # optimizer, sequences_per_second, tokens_per_second, mfu
/// partition:                   # one entry per stage, first to last
///   - layers: [0, 12]          # first and last layer, inclusive
///     in_flight: 8
///     compute: ...             # per microbatch; also collectives, transfer
///     data_parallel_sync: ...  # per iteration; also optimizer
///     memory: {weights: 1234 B, gradients: ..., optimizer: ..., activations: ..., total: ...}
///     devices: [[0, 1, 2, 3], [32, 33, 34, 35]]   # per replica, shards in order
/// baselines:                   # name -> figures, or {iteration_time: null, note: why}
///   manual: {iteration_time: 8.1 s, stages: 16, data_parallel: 8, tensor_parallel: 8,
///            note: "..."}
/// ```
/// Reading is strict (unknown keys, wrong types, a device list that differs from the placement
/// order's are input errors naming file, line and key).

#include <optional>
#include <string>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/units.h"
#include "nest/placer/plan.h"
#include "nest/workload/memory.h"

namespace nest::io {

/// Where a plan's inputs came from and how the network was modeled.
struct PlanInputs {
  std::string profile;           ///< layer-profile file; empty when a model is given
  std::string model;             ///< model file (with `accelerator`); empty when a profile is given
  std::string accelerator;       ///< accelerator file
  std::string topology;          ///< topology file; empty for the zero and flat networks
  std::string network = "zero";  ///< "zero", "flat" or "oracle"
  Bandwidth flat_bandwidth;      ///< network "flat" only
  Time flat_latency;             ///< network "flat" only
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  std::int64_t devices = 0;
  Bandwidth memory_bandwidth;  ///< zero: optimizer step not modeled
};

/// A baseline's figures as a plan file records them.
struct BaselineSummary {
  std::string name;
  std::optional<Time> iteration_time;  ///< empty when it does not fit
  int stages = 0;
  int data_parallel = 0;
  int tensor_parallel = 0;
  std::string note;
};

/// What a plan file holds once read: enough to rebuild the plan with `evaluate` after loading
/// the inputs and finding the variant (`placer::find_variant`).
struct PlanRecord {
  PlanInputs inputs;
  placer::VariantDegrees degrees;
  placer::PlanChoice choice;  ///< `variant` is left 0: match `degrees` against the profile
  std::int64_t microbatches = 0;
  Time predicted_iteration_time;
  std::vector<BaselineSummary> baselines;
};

/// The plan file text of `plan` (deterministic: same plan, same bytes).
[[nodiscard]] std::string plan_to_yaml(const PlanInputs& inputs, const placer::Plan& plan,
                                       const std::vector<placer::BaselineResult>& baselines);

/// Writes `plan_to_yaml` to `path` atomically.
void write_plan_file(const std::string& path, const PlanInputs& inputs, const placer::Plan& plan,
                     const std::vector<placer::BaselineResult>& baselines);

/// Reads a plan file (by `config::read_input_file`: a regular file of at most
/// `limits.max_input_bytes`). Throws `Error` (input) naming file, line and key on any problem.
[[nodiscard]] PlanRecord read_plan_file(const std::string& path, const config::Limits& limits = {});
/// Same from text; `name` stands for the file in errors.
[[nodiscard]] PlanRecord parse_plan(std::string_view text, const std::string& name);

}  // namespace nest::io
