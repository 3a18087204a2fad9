#pragma once
/// \file
/// Plan files (YAML): everything a replay needs to rebuild the run — the inputs (profile or
/// model + accelerator and how it was built, topology, network model, rules, device budget, the
/// seeds), the chosen variant's degrees, the partition, d, ZeRO stage, recomputation mode (none,
/// selective, full), virtual stages, placement order and the device of every (stage, replica,
/// shard) — plus the predicted figures and the baselines', for people. Written with yaml-cpp's
/// emitter; figures use the key names of the commands' `--json` output (seconds as `_s`, exact to
/// the picosecond; bytes as `_bytes`).
///
/// ```yaml
/// kind: plan
/// nest_version: 0.2.0
/// inputs:
///   model: ../workloads/models/gpt3-175b.yaml    # or profile:; paths relative to this file
///   accelerator: ../workloads/accelerators/h100-sxm.yaml
///   topology: ../topologies/h100_rail_1024.yaml  # * absent for zero/flat networks
///   hashes: {topology: 1f2e..., model: ..., accelerator: ...}  # * FNV-1a 64 of each file
///   network: oracle                              # zero | flat | oracle
///   flat_bandwidth: 50 GB/s                      # * network flat only
///   flat_latency: 5 us                           # * network flat only
///   rules: megatron                              # megatron | nest-artifact
///   devices: 1024                                # the budget the plan was made for
///   memory_bandwidth: 2680000000000 B/s          # * optimizer step; absent: not modeled
///   build: {precision: bf16, flash_attention: false, sequence_length: 2048,
///           global_batch: 1536, tp_comm_overlap: true,
///           gradient_accumulation_bytes: 0}      # * model only
///   seed: 0                                      # * routing seed (default 0)
///   anneal_seed: 1                               # * the anneal baseline's (default 1)
///   ideal: false                                 # * collective model ignored (default false)
///   algorithm: ring                              # * one fixed algorithm (default: per group)
///   search: {stages: [8], data_parallel: [32],   # * what the search ranged over: the
///            virtual_stages: [], zero_stages: [0, 1, 2, 3],  # dimensions `nest place` fixed
///            recompute: [none, selective, full], # (--pp, --dp, ...) are lists of one, an
///            orders: [tp-pp-dp, tp-dp-pp],       # empty list is the search's default range
///            uniform_partition: false, ignore_memory: false,
///            gradient_buckets: 4, overlap_gradient_sync: true,
///            overlap_boundary_transfers: true}
///   candidates: {tensor_parallel: [4], expert_parallel: [], context_parallel: [1],
///                micro_batches: [1, 2, 4], max_tensor_parallel: 8,
///                sequence_parallel: true}       # * model only; sequence_parallel absent: t > 1
/// variant: {tensor_parallel: 4, expert_parallel: 1, context_parallel: 1,
///           sequence_parallel: true, micro_batch: 1, devices_per_replica: 4}
/// stages: 8
/// data_parallel: 32
/// zero_stage: 2
/// recompute: none             # none | selective | full (older plans: false | true)
/// virtual_stages: 1            # * model chunks per device, interleaved 1F1B (default 1)
/// placement_order: tp-pp-dp
/// microbatches: 1536
/// devices_used: 1024
/// predicted:                   # per iteration
///   iteration_time_s: 7.013123456789
///   compute_s: ...             # also bubble_s, collectives_s, transfers_s,
///                              # data_parallel_sync_s, optimizer_s, sequences_per_second,
///                              # tokens_per_second, mfu
/// partition:                   # one entry per stage, first to last
///   - layers: [0, 12]          # first and last layer, inclusive
///     in_flight: 8
///     compute_s: ...           # per microbatch; also collectives_s, transfer_s
///     data_parallel_sync_s: ...  # per iteration; also optimizer_s
///     memory: {weights_bytes: 1234, gradients_bytes: ..., optimizer_bytes: ...,
///              activations_bytes: ..., total_bytes: ...}
///     devices: [[0, 1, 2, 3], [32, 33, 34, 35]]   # per replica, shards in order
/// baselines:                   # name -> figures, or {iteration_time_s: null, note: why}
///   manual: {iteration_time_s: 8.1, stages: 16, data_parallel: 8, tensor_parallel: 8,
///            note: "..."}
/// ```
/// Reading is strict (unknown keys, wrong types, a device list that differs from the placement
/// order's are input errors naming file, line and key). Plans of 0.1 (figures as unit strings
/// without the `_s`/`_bytes` suffixes, no hashes, build options or seeds) read as before, with
/// the defaults for what they lack.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/units.h"
#include "nest/placer/plan.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/workload/memory.h"
#include "nest/workload/model_profile.h"

namespace nest::io {

/// Where a plan's inputs came from and how the job was set up: everything needed to rebuild the
/// run. Paths are as the file records them (relative to the plan file's folder when written by
/// `job::Job`).
struct PlanInputs {
  std::string profile;      ///< layer-profile file; empty when a model is given
  std::string model;        ///< model file (with `accelerator`); empty when a profile is given
  std::string accelerator;  ///< accelerator file
  std::string topology;     ///< topology file; empty for the zero and flat networks
  /// Content hashes (FNV-1a 64, hex) of the input files when the plan was made, by input
  /// ("topology", "model", ...); empty in plans older than 0.2.
  std::vector<std::pair<std::string, std::string>> hashes;
  std::string network = "zero";  ///< "zero", "flat" or "oracle"
  Bandwidth flat_bandwidth;      ///< network "flat" only
  Time flat_latency;             ///< network "flat" only
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  std::int64_t devices = 0;
  Bandwidth memory_bandwidth;  ///< zero: optimizer step not modeled
  /// How a model's profile was built (precision, flash attention, sequence length, global
  /// batch); the defaults for profiles and older plans.
  workload::BuildOptions build;
  std::uint64_t seed = 0;         ///< routing (ECMP) seed of the oracle and the replay
  std::uint64_t anneal_seed = 1;  ///< the anneal baseline's seed
  bool ideal = false;             ///< the topology's collective model ignored
  std::string algorithm;          ///< one fixed collective algorithm; empty: chosen per group
  /// What the search ranged over (the dimensions `nest place --tp --pp ...` fixed are lists of
  /// one), Megatron's uniform split, ignore_memory, and the data-parallel reduction
  /// (`cost.gradient_buckets`, `cost.overlap_gradient_sync`) and the stage-boundary sends
  /// (`cost.overlap_boundary_transfers`); the rest of `cost` is above.
  /// The defaults for older plans.
  placer::SearchOptions search;
  /// The intra-layer configurations the search ranged over (model inputs only).
  placer::CandidateOptions candidates{.max_tensor_parallel = 0};
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
  std::string file;  ///< the plan file read (empty when parsed from text)
  PlanInputs inputs;
  placer::VariantDegrees degrees;
  placer::PlanChoice choice;  ///< `variant` is left 0: match `degrees` against the profile
  std::int64_t microbatches = 0;
  Time predicted_iteration_time;
  std::vector<BaselineSummary> baselines;
};

/// The plan file text of `plan` (deterministic: same plan, same bytes).
/// With `verification` (a placement verified by replay), a `verification` section: K, the chosen
/// plan's rank by estimate and by replay, the estimate-only choice's regret, and per candidate
/// its ranks, estimate, replay and configuration (ignored when the file is read back).
[[nodiscard]] std::string plan_to_yaml(const PlanInputs& inputs, const placer::Plan& plan,
                                       const std::vector<placer::BaselineResult>& baselines,
                                       const placer::Verification* verification = nullptr);

/// The same document as JSON (the `--json` output of `nest place`: same keys, same nesting;
/// seconds as the nearest double).
[[nodiscard]] std::string plan_to_json(const PlanInputs& inputs, const placer::Plan& plan,
                                       const std::vector<placer::BaselineResult>& baselines,
                                       const placer::Verification* verification = nullptr);

/// Writes `plan_to_yaml` to `path` atomically.
void write_plan_file(const std::string& path, const PlanInputs& inputs, const placer::Plan& plan,
                     const std::vector<placer::BaselineResult>& baselines,
                     const placer::Verification* verification = nullptr);

/// Reads a plan file (by `config::read_input_file`: a regular file of at most
/// `limits.max_input_bytes`). Throws `Error` (input) naming file, line and key on any problem.
[[nodiscard]] PlanRecord read_plan_file(const std::string& path, const config::Limits& limits = {});
/// Same from text; `name` stands for the file in errors.
[[nodiscard]] PlanRecord parse_plan(std::string_view text, const std::string& name);

}  // namespace nest::io
