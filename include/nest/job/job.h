#pragma once
/// \file
/// The whole job as one library call: a `JobSpec` says what to place where (the workload and
/// how to build it, the topology, the device budget, the memory rules, the network model, one
/// routing seed, the search's options, the baselines and their seed), and a `Job` loads and
/// checks all of it once, owns the topology, the profile and one warm network model (the
/// collective oracle), and answers `search()` / `place()`, `baselines()`, `evaluate(choice)` and
/// `simulate(plan)`. The CLI's `place`, `simulate` and `run`, the sweep evaluator, the examples
/// and the Python module are all spec → Job → report:
///
/// ```cpp
/// nest::job::JobSpec spec;
/// spec.workload.model = "gpt3-175b";
/// spec.workload.accelerator = "h100";
/// spec.topology = "h100_rail_1024";
/// nest::job::Job job(spec);
/// const nest::placer::Plan plan = job.place();
/// const nest::replay::RunRecord run = job.simulate(plan);
/// ```
///
/// Errors in the spec are `Error` (input) naming the spec's field ("topology", "devices",
/// "workload.model", ...) or the input file, line and key. A Job is not thread-safe (its oracle
/// memoizes); use one per thread.

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/coll/oracle.h"
#include "nest/config/limits.h"
#include "nest/core/catalog.h"
#include "nest/core/log.h"
#include "nest/core/units.h"
#include "nest/io/plan_file.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/replay/plan_replay.h"
#include "nest/replay/run_record.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/memory.h"
#include "nest/workload/model_profile.h"

namespace nest::job {

/// How the placer prices the network.
enum class NetworkModel : unsigned char {
  kOracle,  ///< the collective oracle: flow-level simulation on the topology
  kFlat,    ///< a topology-agnostic alpha-beta network
  kZero,    ///< no network cost (the nest-artifact rules)
};
/// "oracle", "flat", "zero".
[[nodiscard]] std::string_view to_string(NetworkModel model) noexcept;
/// Inverse of `to_string`; throws `Error` (input, key "network").
[[nodiscard]] NetworkModel parse_network_model(std::string_view text);

/// Candidates `nest place` replays by default (`JobSpec::verify`): the best plan of each of the
/// two placement orders and the next two by estimate; a replay of GPT-3 on 1,024 H100s takes
/// about 2.5 s (results/placer_bench.md).
inline constexpr int kDefaultVerify = 4;
/// Most candidates a placement may replay.
inline constexpr int kMaxVerify = 64;
/// The most threads a job runs on (`JobSpec::threads`).
inline constexpr int kMaxThreads = 64;

/// The baselines a job can compute beside its plan.
inline constexpr std::string_view kBaselineNames[] = {"manual", "topology-agnostic", "anneal"};

/// The workload: a layer-profile file, or a model on an accelerator (files or catalog names).
struct WorkloadSpec {
  std::string profile;      ///< layer profile; or
  std::string model;        ///< model architecture, with
  std::string accelerator;  ///< the accelerator it runs on
  /// What does not vary between variants: precision, flash attention, sequence length, global
  /// batch (model + accelerator only).
  workload::BuildOptions build;
  /// The intra-layer configurations the search may use (model + accelerator only).
  /// `max_tensor_parallel` 0 means the topology's scale-up domain (8 without a topology).
  placer::CandidateOptions candidates{.max_tensor_parallel = 0};
};

/// Everything a job is.
struct JobSpec {
  WorkloadSpec workload;
  /// Topology file or catalog name; empty for none (then only the zero and flat networks).
  std::string topology;
  /// Device budget; 0 means all the topology's devices.
  std::int64_t devices = 0;
  workload::MemoryRules rules = workload::MemoryRules::kMegatron;
  /// Default: the oracle with a topology under the megatron rules, else zero.
  std::optional<NetworkModel> network;
  /// Flat network (and the topology-agnostic baseline): per-device rate and per-step latency;
  /// by default the topology's bisection share and its longest route's latency.
  std::optional<Bandwidth> flat_bandwidth;
  std::optional<Time> flat_latency;
  /// Memory bandwidth of the optimizer step; default the accelerator's achievable HBM rate
  /// (none for layer profiles: the step is then not modeled).
  std::optional<Bandwidth> memory_bandwidth;
  /// The routing (ECMP) seed of every simulation of the job: the oracle's and the replay's.
  std::uint64_t seed = 0;
  /// Ignore the topology's collective model (line rates, the topology's latencies, coll's
  /// default algorithms): the uncalibrated network of the closed-form checks.
  bool ideal = false;
  /// One algorithm for every allreduce, all-gather and reduce-scatter of the job (the plan's
  /// groups in the search and the replay's data-parallel buckets) instead of the tuner's choice
  /// per group.
  std::optional<coll::Algorithm> algorithm;
  /// The search's options: a dimension fixed is a list of one (`nest place --pp 8` is
  /// `stages = {8}`; the tensor, expert and context-parallel degrees, sequence parallelism and
  /// micro-batches are `workload.candidates`). The rules, devices and memory bandwidth of
  /// `search.cost` are filled in by the Job; its gradient buckets and overlap are the spec's.
  /// `joint_data_parallel_sync` is the spec's too (false prices each stage's sync alone, as
  /// before issue 15). A fixed depth deeper than the layers, fixed degrees needing more than
  /// `devices`, or virtual stages (or a uniform split) that do not divide the blocks are `Error`
  /// (input) naming "search.stages", "search.data_parallel", "search.virtual_stages" or
  /// "search.uniform_partition". With a layer profile, fixed tensor or expert-parallel degrees
  /// (and sequence parallelism) select its variants.
  placer::SearchOptions search;
  /// Baselines to compute beside the plan (names of `kBaselineNames`).
  std::vector<std::string> baselines = {"manual", "topology-agnostic", "anneal"};
  std::uint64_t anneal_seed = 1;  ///< the anneal baseline's own seed
  /// The anneal's steps: its budget (each step priced on event-free bounds,
  /// nest/placer/baselines.h).
  int anneal_steps = 2000;
  /// A plan file to evaluate as the `fixed` baseline ("how good is my configuration"); empty
  /// for none.
  std::string fixed_plan;
  /// How large an input file may be and how much memory a topology may take.
  config::Limits limits;
  /// Replay this many of the search's best distinct plans (at least the best of each placement
  /// order) on the link-level simulator and choose the one of the least replayed time; 0: the
  /// estimate's best. Unset: `kDefaultVerify` under the oracle network with a topology, else 0.
  /// In 0..`kMaxVerify`; a positive value needs a topology.
  std::optional<int> verify;
  /// Threads the job may run independent work on: the verification replays on this many, and
  /// with more than 1 the topology-agnostic and anneal baselines run beside the search
  /// (`Job::start_baselines`; one thread more while they have not finished; 1 runs them in
  /// line), and the oracles simulate a query's link-disjoint sets on those nothing else holds.
  /// Results never depend on it. In
  /// 1..`kMaxThreads`. Sweeps, which evaluate points on threads of their own, give each job 1.
  int threads = 2;
};

/// A placement: the chosen plan and, when verified, the candidates replayed for it.
struct Placement {
  placer::Plan plan;
  std::optional<placer::Verification> verification;
  /// With `SimulateOptions::keep_replay`: the verification's replay of `plan` (metadata not
  /// filled), made with `replayed_with`; `Job::simulate(Placement&, ...)` reuses it.
  std::optional<replay::RunRecord> replay;
  replay::PlanReplayOptions replayed_with;  ///< the options of `replay`, as given to the job
  /// `replay` already holds the series of its `replay_series` busiest links (added beside the
  /// search, `Job::search(verify_with)`; 0: none), which `simulate` then need not add.
  int replay_series = 0;
};

/// Parts a caller already has, so that a Job need not load them again (a sweep builds each
/// point's topology from generator parameters and loads each workload once for all points).
struct Prebuilt {
  std::shared_ptr<const topo::Topology> topology;         ///< replaces `JobSpec::topology`
  std::string topology_name;                              ///< how records name it
  std::shared_ptr<const workload::LayerProfile> profile;  ///< replaces the workload's files
  std::optional<Bandwidth> memory_bandwidth;              ///< the accelerator's, for `profile`
};

/// How to replay a plan.
struct SimulateOptions {
  replay::PlanReplayOptions replay;  ///< schedule, virtual stages, buckets (the seed is the job's)
  std::string command_line;          ///< recorded in the run's metadata
  std::string plan_yaml;             ///< recorded in the run's metadata (empty: made here)
  /// `Job::placement` / `Job::verify`: keep the chosen plan's replay in `Placement::replay`
  /// (one run record more in memory), so that `Job::simulate(Placement&, ...)` need not replay
  /// it again.
  bool keep_replay = false;
};

/// A loaded, checked job. See the file comment.
class Job {
 public:
  /// Loads the spec's inputs through `catalog` (names or paths) and checks them. `log` (may be
  /// null, must outlive the job) receives phases and timings (info) and every oracle
  /// simulation (debug). Throws `Error` (input) for a bad spec or input file.
  explicit Job(JobSpec spec, const Catalog& catalog = Catalog::standard(), Logger* log = nullptr);
  /// Same, with parts already built (see `Prebuilt`).
  Job(JobSpec spec, Prebuilt prebuilt, const Catalog& catalog = Catalog::standard(),
      Logger* log = nullptr);
  ~Job();
  Job(Job&&) noexcept;
  Job& operator=(Job&&) noexcept;

  /// The spec with its defaults filled in and its input names resolved to files.
  [[nodiscard]] const JobSpec& spec() const noexcept;
  /// The topology, or null when the job has none.
  [[nodiscard]] const topo::Topology* topology() const noexcept;
  /// The topology's name in reports and records (its file, or `Prebuilt::topology_name`).
  [[nodiscard]] const std::string& topology_name() const noexcept;
  [[nodiscard]] const workload::LayerProfile& profile() const noexcept;
  /// The network model the plans are priced with (one instance per job: the oracle stays warm).
  [[nodiscard]] placer::CommCost& network() noexcept;
  [[nodiscard]] const placer::CommCost& network() const noexcept;
  /// The network model's resolved kind.
  [[nodiscard]] NetworkModel network_model() const noexcept;
  /// The search options with the cost options of this job.
  [[nodiscard]] const placer::SearchOptions& search_options() const noexcept;
  /// Candidates of the last `verify` whose replays it took from those begun beside the search
  /// (`search(verify_with)`; 0 without). For tests and reports.
  [[nodiscard]] int replays_taken_beside_search() const noexcept;
  /// Oracle counters (zero for the flat and zero networks).
  [[nodiscard]] coll::OracleStats oracle_stats() const noexcept;

  /// The NEST search. `best` is empty when nothing fits (`infeasible_reason` says why); on the
  /// collective oracle it carries the collectives of its groups (`placer::plan_collectives`).
  [[nodiscard]] placer::SearchResult search();
  /// `search()`, with the verification's replays begun beside it as `verify(result,
  /// verify_with)` would run them, on a thread of their own while no other task of the job holds
  /// the second one (with `verify` K > 0 and `threads` >= 2; `job::detail::EarlyReplays` in
  /// src/job/early_replays.h): the plans the search keeps are replayed as it keeps them, best
  /// estimate first, and a replay whose plan drops out of the candidates stops. The next
  /// `verify` with the same replay options (and keeping) takes them; another drops them. The
  /// result, candidates' times, choice and kept run are those of `verify(search(),
  /// verify_with)`, sooner when the search keeps its candidates before it ends. `placement`
  /// calls it.
  [[nodiscard]] placer::SearchResult search(const SimulateOptions& verify_with);
  /// The search's plan; throws `Error` (input) with the reason when nothing fits. With
  /// `JobSpec::verify` K > 0, the plan of the least replayed time of the K candidates (see
  /// `placement`).
  [[nodiscard]] placer::Plan place();
  /// The placement with its verification: with K = `spec().verify` > 0, the search keeps the
  /// best plan of each placement order and then the best of the rest up to K in all
  /// (`SearchOptions::replay_candidates`); they are replayed (`simulate`, default options), and
  /// the fastest replayed is chosen (ties: the smaller estimate). With K = 0 the search's best,
  /// no verification.
  /// Throws as `place`.
  /// `options.replay` is how the candidates are replayed (the seed is the job's), without the
  /// busiest links' series (`utilization_links`: they need a second pass and do not change the
  /// replayed times); `options.keep_replay` keeps the chosen plan's.
  [[nodiscard]] Placement placement(const SimulateOptions& options = {});
  /// Verifies `result` (a search of this job: `replay_candidates` K, or `keep_per_order` >= K)
  /// as `placement` does.
  [[nodiscard]] Placement verify(placer::SearchResult result, const SimulateOptions& options = {});
  /// The spec's baselines (and `fixed` when `fixed_plan` is set), in the spec's order. On the
  /// oracle network the topology-agnostic one and the anneal are each priced on an oracle of
  /// their own (same options, same exact prices), so that each meets the same memo whether it
  /// ran beside the search or not, and the others meet the job's oracle as they would without
  /// them; when `start_baselines` started them, they are collected here.
  [[nodiscard]] std::vector<placer::BaselineResult> baselines();
  /// Queues the baselines that need nothing of the search (topology-agnostic and anneal, those
  /// the spec lists that run on an oracle of their own, see `baselines()`; the anneal first)
  /// for a second thread, which takes them one at a time beside the search and the
  /// verification; `baselines()` takes what is left on the caller's thread and collects them.
  /// Results are those of `baselines()` without it (a name listed twice runs again in line).
  /// Each task owns its oracle and reads only the immutable topology and profile (shared), so
  /// the job may be moved meanwhile (the queue's thread also sets how many threads the job's
  /// oracle may use, through a share the job holds by pointer); destroying the job first waits for
  /// the task running, and the others are dropped. Calling it again before `baselines()` does
  /// nothing; after, it queues them again.
  void start_baselines();
  /// `choice` priced by this job's cost model (validated first; see `placer::evaluate`).
  [[nodiscard]] placer::Plan evaluate(const placer::PlanChoice& choice);
  /// A plan file's choice priced by this job (the variant found by the record's degrees).
  [[nodiscard]] placer::Plan evaluate(const io::PlanRecord& record);

  /// Replays `plan` for one iteration on the topology (the job's seed routes its flows) and
  /// fills the run's metadata: tool version, command line, the inputs with their content
  /// hashes, the plan's YAML. Throws `Error` (input) when the job has no topology or a stage
  /// of the plan exceeds memory.
  [[nodiscard]] replay::RunRecord simulate(const placer::Plan& plan,
                                           const SimulateOptions& options = {});
  /// The same run as `simulate(placed.plan, options)`, byte for byte: the verification's own
  /// replay of the plan when `placed.replay` holds one made with `options.replay` but for
  /// `utilization_links` (`Placement::replayed_with`; it is moved out, its busiest links'
  /// series added by a second replay recording them when `utilization_links` asks for them,
  /// `replay::add_busiest_series`, and its metadata filled), else a new replay.
  [[nodiscard]] replay::RunRecord simulate(Placement& placed, const SimulateOptions& options);

  /// What a plan file written at `plan_path` records of this job: input paths relative to the
  /// plan's folder, build options, seeds, rules, network.
  [[nodiscard]] io::PlanInputs plan_inputs(const std::filesystem::path& plan_path) const;
  /// The plan file text of `plan` for a file at `plan_path`.
  [[nodiscard]] std::string plan_yaml(const placer::Plan& plan,
                                      const std::vector<placer::BaselineResult>& baselines,
                                      const std::filesystem::path& plan_path,
                                      const placer::Verification* verification = nullptr) const;

 private:
  struct Impl;
  // `search()`, telling `kept` of every plan the search keeps as a candidate.
  placer::SearchResult search(const std::function<void(const placer::Plan&)>& kept);
  std::unique_ptr<Impl> impl_;
};

/// A plan file and the job it was made by.
struct PlannedJob {
  io::PlanRecord record;
  Job job;
  placer::Plan plan;  ///< the record's choice priced by `job`
};

/// Changes to a plan's recorded job when it is loaded.
struct PlanOverrides {
  std::string topology;               ///< replay on another topology (file or name)
  std::optional<std::uint64_t> seed;  ///< another routing seed
  config::Limits limits;              ///< for the plan and every file it names
};

/// Reads the plan file at `path` and rebuilds its job from the record: input paths resolve
/// against the plan's folder only (never the working directory); an older plan without the
/// newer keys gets their defaults. Throws `Error` (input) naming the plan file and key.
[[nodiscard]] PlannedJob load_plan(const std::filesystem::path& path,
                                   const PlanOverrides& overrides = {},
                                   const Catalog& catalog = Catalog::standard(),
                                   Logger* log = nullptr);

/// FNV-1a 64 of a file's bytes, 16 hex digits (identifies inputs in records).
[[nodiscard]] std::string file_hash(const std::filesystem::path& path);

}  // namespace nest::job
