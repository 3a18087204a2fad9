#include "nest/job/job.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <future>
#include <limits>
#include <mutex>
#include <optional>
#include <system_error>
#include <utility>

#include "job/early_replays.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/placer/baselines.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/plan_collectives.h"
#include "nest/topo/loader.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/profile_file.h"

namespace nest::job {
namespace {

using detail::EarlyReplays;
using detail::ThreadShare;

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// The gradient accumulation's bytes per parameter and microbatch, as the plan-file reader
// bounds them (workload::layer_graphs also refuses a layer whose parameters times them would
// pass 64 bits).
constexpr std::int64_t kMaxGradientAccumulationBytes = 1 << 20;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// `path` as seen from `folder`: relative when both are on one tree, else absolute.
std::string relative_to(const std::string& path, const fs::path& folder) {
  std::error_code ec;
  const fs::path target = fs::weakly_canonical(fs::absolute(path, ec), ec);
  const fs::path base = fs::weakly_canonical(fs::absolute(folder, ec), ec);
  if (ec) return path;
  const fs::path rel = target.lexically_relative(base);
  return rel.empty() ? target.string() : rel.generic_string();
}

}  // namespace

std::string_view to_string(NetworkModel model) noexcept {
  switch (model) {
    case NetworkModel::kOracle:
      return "oracle";
    case NetworkModel::kFlat:
      return "flat";
    case NetworkModel::kZero:
      return "zero";
  }
  return "";
}

NetworkModel parse_network_model(std::string_view text) {
  if (text == "oracle") return NetworkModel::kOracle;
  if (text == "flat") return NetworkModel::kFlat;
  if (text == "zero") return NetworkModel::kZero;
  throw Error::input(
      "unknown network model",
      {.key = "network", .value = std::string(text), .expected = "oracle, flat or zero"});
}

std::string file_hash(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::uint64_t h = 0xcbf29ce484222325ULL;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ULL;
    }
  }
  return fmt::format("{:016x}", h);
}

// The oracle's counters after `phase`, at debug level.
void log_oracle_stats(Logger* log, std::string_view phase, const coll::OracleStats& s) {
  nest::log(log, LogLevel::kDebug,
            "oracle after {}: {} queries, {} exact hits, {} structural hits, {} simulations ({} "
            "contention-free, {} of private rings, {} events), {} trivial, {} candidates ruled "
            "out by their bound ({} of the events not simulated; {} simulations stopped part "
            "way, {} of them by their links' progress), {} event-free bounds, {} programs "
            "lowered, {} structures read from another oracle's facts",
            phase, s.queries, s.exact_hits, s.structural_hits, s.simulations, s.contention_free,
            s.private_rings, s.events, s.trivial, s.bounded, s.avoided_events, s.stopped,
            s.progress_stops, s.lower_bounds, s.lowered, s.consulted);
}

// A baseline priced on an oracle of its own (topology-agnostic, anneal), and what that took.
struct OwnRun {
  placer::BaselineResult result;
  double seconds = 0;
  coll::OracleStats stats;
};

// Baselines that run on oracles of their own (`Job::Impl::own_oracle`), as a queue that several
// threads take from: each task is self-contained, so which thread runs it changes nothing.
struct OwnTasks {
  std::vector<std::string> names;
  std::vector<std::function<OwnRun(OwnTasks*)>> tasks;
  std::vector<std::optional<OwnRun>> runs;  // by task, filled as they end (empty if it threw)
  std::atomic<std::size_t> next{0};

  // Runs tasks until none is left to take.
  void take() {
    for (std::size_t i = next++; i < tasks.size(); i = next++) runs[i] = tasks[i](this);
  }

  // The oracles of the tasks running, each simulating its sets on `threads` threads: one while
  // the search's thread has work of its own, the job's once it only waits (`lend`).
  std::mutex lending;
  std::vector<coll::CollectiveOracle*> oracles;
  int threads = 1;
  void enter(coll::CollectiveOracle& oracle) {
    const std::lock_guard lock(lending);
    oracle.set_threads(threads);
    oracles.push_back(&oracle);
  }
  void leave(coll::CollectiveOracle& oracle) {
    const std::lock_guard lock(lending);
    std::erase(oracles, &oracle);
  }
  void lend(int n) {
    const std::lock_guard lock(lending);
    threads = n;
    for (coll::CollectiveOracle* oracle : oracles) oracle->set_threads(n);
  }
  // No task is taken from now on (those running finish).
  void stop() noexcept { next = tasks.size(); }
  // Task `name`'s run, taken out of the queue's results; nullopt when it has none (not queued,
  // already taken, or it threw).
  std::optional<OwnRun> collect(const std::string& name) {
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (names[i] != name || !runs[i]) continue;
      std::optional<OwnRun> run = std::move(runs[i]);
      runs[i].reset();
      return run;
    }
    return std::nullopt;
  }
};

struct Job::Impl {
  JobSpec spec;
  Catalog catalog;
  Logger* log = nullptr;
  std::shared_ptr<const topo::Topology> topology;
  std::string topology_name;
  std::shared_ptr<const workload::LayerProfile> profile;
  NetworkModel network = NetworkModel::kZero;
  int scale_up = 8;
  std::unique_ptr<placer::FlatCommCost> flat;  // the flat network, or the topology-agnostic one
  std::unique_ptr<placer::CommCost> comm;
  placer::OracleCommCost* oracle = nullptr;  // comm, when it is the oracle
  // What the job's oracle simulates, for the oracles of the topology-agnostic baseline
  // (`own_task`) and of the verification's other replays (`Job::verify`) to read; null without
  // the oracle.
  std::shared_ptr<coll::OracleFacts> facts;
  // Who holds the job's threads; shared with the baselines' thread (which outlives no member:
  // `background` is destroyed first and waits for it).
  std::shared_ptr<ThreadShare> thread_share = std::make_shared<ThreadShare>();
  placer::SearchOptions search;
  // The baselines started by `start_baselines` (`OwnTasks`), taken one at a time by a thread
  // of their own and, once the search is done, by `baselines()` too.
  std::shared_ptr<OwnTasks> own_tasks;
  std::future<void> background;
  // The verification's replays begun beside the search (`Job::search(verify_with)`), until
  // `Job::verify` takes them. Last: destroyed first (it stops and joins its thread, which
  // replays on the members above).
  std::unique_ptr<EarlyReplays> early;
  int taken_beside = 0;  // `Job::replays_taken_beside_search`

  // A job dropped before `baselines()` lets the thread finish the task it runs, not the queue.
  ~Impl() {
    if (own_tasks) own_tasks->stop();
  }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  Impl(JobSpec s, Prebuilt prebuilt, const Catalog& c, Logger* l)
      : spec(std::move(s)), catalog(c), log(l) {
    check_ranges();
    load_topology(std::move(prebuilt));
    resolve_network_and_budget();
    load_workload(std::move(prebuilt));
    build_network();
    search = spec.search;
    search.cost.rules = spec.rules;
    search.cost.devices = spec.devices;
    search.cost.memory_bandwidth = spec.memory_bandwidth.value_or(Bandwidth());
    if (spec.workload.model.empty()) select_profile_variants();
    check_fixed_dimensions();
    for (const std::string& name : spec.baselines) {
      if (std::find(std::begin(kBaselineNames), std::end(kBaselineNames), name) ==
          std::end(kBaselineNames)) {
        throw Error::input("unknown baseline",
                           {.key = "baselines",
                            .value = name,
                            .expected = "manual, topology-agnostic or anneal (or all, none)"});
      }
    }
    if (spec.anneal_steps < 0) {
      throw Error::input("must not be negative",
                         {.key = "anneal_steps", .value = std::to_string(spec.anneal_steps)});
    }
    if (spec.verify && (*spec.verify < 0 || *spec.verify > kMaxVerify)) {
      throw Error::input("candidates to verify out of range",
                         {.key = "verify",
                          .value = std::to_string(*spec.verify),
                          .expected = fmt::format("an integer in 0..{}", kMaxVerify)});
    }
    if (spec.verify && *spec.verify > 0 && !topology) {
      throw Error::input("verifying by replay needs a topology",
                         {.key = "verify",
                          .value = std::to_string(*spec.verify),
                          .expected = "0 without a topology"});
    }
    if (!spec.verify) {
      spec.verify = network == NetworkModel::kOracle && topology ? kDefaultVerify : 0;
    }
    search.keep_per_order = 0;
    search.replay_candidates = *spec.verify;
  }

  // The spec's numbers every front end bounds the same way, before the model is built with
  // them (the accumulation bytes times a layer's parameters must stay within 64 bits).
  void check_ranges() const {
    if (spec.threads < 1 || spec.threads > kMaxThreads) {
      throw Error::input("threads out of range",
                         {.key = "threads",
                          .value = std::to_string(spec.threads),
                          .expected = fmt::format("an integer in 1..{}", kMaxThreads)});
    }
    const std::int64_t bytes = spec.workload.build.gradient_accumulation_bytes;
    if (bytes < 0 || bytes > kMaxGradientAccumulationBytes) {
      throw Error::input("gradient accumulation bytes out of range",
                         {.key = "gradient_accumulation_bytes",
                          .value = std::to_string(bytes),
                          .expected = fmt::format("bytes per parameter and microbatch in 0..{}",
                                                  kMaxGradientAccumulationBytes)});
    }
    const int buckets = spec.search.cost.gradient_buckets;
    if (buckets < 1 || buckets > replay::kMaxGradientBuckets) {
      throw Error::input(
          "bucket count out of range",
          {.key = "gradient_buckets",
           .value = std::to_string(buckets),
           .expected = fmt::format("an integer in 1..{}", replay::kMaxGradientBuckets)});
    }
  }

  // A layer profile's variants of the fixed tensor-parallel and expert-parallel degrees and
  // sequence parallelism (a model's are built for those only).
  void select_profile_variants() {
    const placer::CandidateOptions& c = spec.workload.candidates;
    if (c.tensor_parallel.empty() && c.expert_parallel.empty() && !c.sequence_parallel) return;
    const auto allowed = [](const std::vector<int>& list, int value) {
      return list.empty() || std::find(list.begin(), list.end(), value) != list.end();
    };
    std::vector<std::size_t> selected;
    for (std::size_t i = 0; i < profile->variants.size(); ++i) {
      const workload::Variant& v = profile->variants[i];
      if (!allowed(c.tensor_parallel, v.tensor_parallel)) continue;
      if (!allowed(c.expert_parallel, v.expert_parallel)) continue;
      if (c.sequence_parallel && v.tensor_parallel > 1 &&
          *c.sequence_parallel != v.sequence_parallel) {
        continue;
      }
      if (search.variants.empty() ||
          std::find(search.variants.begin(), search.variants.end(), i) != search.variants.end()) {
        selected.push_back(i);
      }
    }
    if (selected.empty()) {
      std::string have;
      for (const auto& v : profile->variants) {
        have += fmt::format("{}t={}{}{}", have.empty() ? "" : ", ", v.tensor_parallel,
                            v.expert_parallel > 1 ? fmt::format(" e={}", v.expert_parallel) : "",
                            v.sequence_parallel ? " sp" : "");
      }
      throw Error::input(
          "the layer profile has no variant of the fixed degrees",
          {.key = c.tensor_parallel.empty() ? "expert_parallel" : "tensor_parallel",
           .value = std::to_string(c.tensor_parallel.empty() ? c.expert_parallel.front()
                                                             : c.tensor_parallel.front()),
           .expected = "one of the profile's variants: " + have});
    }
    search.variants = selected;
  }

  // Interleaved 1F1B and the uniform split with the depth fixed: chunks of equal blocks (and,
  // interleaved, microbatches per replica a multiple of the depth), as the search builds them.
  void check_fixed_schedule() const {
    const placer::SearchOptions& o = search;
    if (o.stages.size() != 1) return;
    const int S = o.stages.front();
    const workload::Variant& v = profile->variants.front();
    std::size_t blocks = 0;  // the longest run of alike layers: the transformer blocks
    for (std::size_t i = 0; i < v.layers.size();) {
      std::size_t j = i + 1;
      while (j < v.layers.size() && v.layers[j].name == v.layers[i].name) ++j;
      blocks = std::max(blocks, j - i);
      i = j;
    }
    const auto divides = [&](int chunks) {
      return !placer::interleaved_partition(v, S, chunks / S).empty();
    };
    if (o.virtual_stages.size() == 1 && o.virtual_stages.front() >= 2) {
      const int vs = o.virtual_stages.front();
      if (S < 2) {
        throw Error::input("interleaved 1F1B needs at least 2 stages",
                           {.key = "search.virtual_stages",
                            .value = std::to_string(vs),
                            .expected = "1 with a single stage"});
      }
      if (!divides(S * vs)) {
        std::string fit;
        for (int w = 2; static_cast<std::size_t>(S) * w <= blocks; ++w) {
          if (divides(S * w)) fit += (fit.empty() ? "" : ", ") + std::to_string(w);
        }
        throw Error::input(
            fmt::format("interleaved 1F1B needs equal blocks per chunk: {} stages x {} virtual "
                        "stages = {} chunks do not divide the {} transformer blocks",
                        S, vs, S * vs, blocks),
            {.key = "search.virtual_stages",
             .value = std::to_string(vs),
             .expected = fit.empty() ? std::string("1 (no v >= 2 divides them)") : "1 or " + fit});
      }
      if (o.data_parallel.size() == 1 && profile->variants.size() == 1) {
        const std::int64_t m = v.microbatches;
        const int d = o.data_parallel.front();
        if (m % d != 0 || (m / d) % S != 0) {
          throw Error::input(
              fmt::format("interleaved 1F1B needs the microbatches of each replica to be a "
                          "multiple of the {} stages: {} microbatches over {} replicas",
                          S, m, d),
              {.key = "search.virtual_stages",
               .value = std::to_string(vs),
               .expected =
                   "1, or a global batch of a multiple of micro-batch x replicas x stages"});
        }
      }
    } else if (o.uniform_partition && !divides(S)) {
      throw Error::input(
          fmt::format("the uniform split needs the stages to divide the {} transformer blocks",
                      blocks),
          {.key = "search.uniform_partition",
           .value = std::to_string(S) + " stages",
           .expected = "a number of stages dividing " + std::to_string(blocks) +
                       ", or the balanced split"});
    }
  }

  // A configuration the fixed dimensions rule out before any search: a pipeline deeper than
  // the layers, or more devices than the budget.
  void check_fixed_dimensions() const {
    const placer::SearchOptions& o = search;
    const auto& variants = profile->variants;
    if (variants.empty()) return;
    const std::size_t layers = variants.front().layers.size();
    for (const int s : o.stages) {
      if (s >= 1 && static_cast<std::size_t>(s) <= layers) continue;
      throw Error::input(
          fmt::format("a pipeline of {} stages needs at least {} layers, the model has {}", s, s,
                      layers),
          {.key = "search.stages",
           .value = std::to_string(s),
           .expected = fmt::format("1..{} stages", layers)});
    }
    for (const int d : o.data_parallel) {
      if (d >= 1) continue;
      throw Error::input(
          "data-parallel degree out of range",
          {.key = "search.data_parallel", .value = std::to_string(d), .expected = "at least 1"});
    }
    for (const int v : o.virtual_stages) {
      if (v >= 1) continue;
      throw Error::input(
          "virtual stages out of range",
          {.key = "search.virtual_stages", .value = std::to_string(v), .expected = "at least 1"});
    }
    check_fixed_schedule();
    if (o.stages.empty() && o.data_parallel.empty()) return;
    // The smallest plan the fixed dimensions allow.
    std::int64_t per_replica = std::numeric_limits<std::int64_t>::max();
    for (const auto& v : variants)
      per_replica = std::min<std::int64_t>(per_replica, v.devices_per_replica);
    const std::int64_t stages =
        o.stages.empty() ? 1 : *std::min_element(o.stages.begin(), o.stages.end());
    const std::int64_t replicas =
        o.data_parallel.empty() ? 1
                                : *std::min_element(o.data_parallel.begin(), o.data_parallel.end());
    const std::int64_t need = per_replica * stages * replicas;
    if (need <= spec.devices) return;
    const std::string what = fmt::format(
        "{} devices per stage replica x {} stage{} x {} replica{} = {} devices, more than the {} "
        "of the job",
        per_replica, stages, stages == 1 ? "" : "s", replicas, replicas == 1 ? "" : "s", need,
        spec.devices);
    if (!o.data_parallel.empty()) {
      throw Error::input(what, {.key = "search.data_parallel",
                                .value = std::to_string(replicas),
                                .expected = fmt::format("at most {} replicas",
                                                        spec.devices / (per_replica * stages))});
    }
    throw Error::input(what,
                       {.key = "search.stages",
                        .value = std::to_string(stages),
                        .expected = fmt::format("at most {} stages", spec.devices / per_replica)});
  }

  void load_topology(Prebuilt&& prebuilt) {
    if (prebuilt.topology) {
      topology = std::move(prebuilt.topology);
      topology_name = prebuilt.topology_name.empty() ? topology->name() : prebuilt.topology_name;
    } else if (!spec.topology.empty()) {
      spec.topology = catalog.find(DataKind::kTopology, spec.topology, "topology");
      const auto start = Clock::now();
      topology =
          std::make_shared<const topo::Topology>(topo::load_topology(spec.topology, spec.limits));
      topology_name = spec.topology;
      nest::log(log, LogLevel::kInfo, "topology {}: {} devices, loaded in {:.3f} s", spec.topology,
                topology->num_devices(), seconds_since(start));
    }
    if (topology && !topology->domain_sizes().empty()) scale_up = topology->domain_sizes().front();
  }

  void resolve_network_and_budget() {
    const bool artifact = spec.rules == workload::MemoryRules::kNestArtifact;
    if (!spec.network) {
      spec.network = artifact || !topology ? NetworkModel::kZero : NetworkModel::kOracle;
    }
    network = *spec.network;
    if (network == NetworkModel::kOracle && !topology) {
      throw Error::input("the oracle network needs a topology",
                         {.key = "topology", .expected = "a topology file or name"});
    }
    if (spec.devices == 0) {
      if (!topology) {
        throw Error::input("a device count is needed without a topology",
                           {.key = "devices", .expected = "a positive integer"});
      }
      spec.devices = static_cast<std::int64_t>(topology->num_devices());
    }
    if (spec.devices < 1 ||
        (topology && spec.devices > static_cast<std::int64_t>(topology->num_devices()))) {
      throw Error::input("device count out of range",
                         {.key = "devices",
                          .value = std::to_string(spec.devices),
                          .expected = topology ? fmt::format("1..{} (the topology's devices)",
                                                             topology->num_devices())
                                               : std::string("at least 1")});
    }
  }

  void load_workload(Prebuilt&& prebuilt) {
    WorkloadSpec& w = spec.workload;
    const bool has_profile = !w.profile.empty();
    const bool has_model = !w.model.empty();
    if (prebuilt.profile) {
      profile = std::move(prebuilt.profile);
      if (!spec.memory_bandwidth) spec.memory_bandwidth = prebuilt.memory_bandwidth;
      return;
    }
    if (has_profile == has_model) {
      throw Error::input("give either a layer profile, or a model with an accelerator",
                         {.key = "workload.profile",
                          .expected = "a profile file or name, or model + accelerator"});
    }
    const auto start = Clock::now();
    if (has_profile) {
      w.profile = catalog.find(DataKind::kProfile, w.profile, "workload.profile");
      profile = std::make_shared<const workload::LayerProfile>(
          workload::load_layer_profile(w.profile, spec.limits));
    } else {
      if (w.accelerator.empty()) {
        throw Error::input(
            "a model needs an accelerator",
            {.key = "workload.accelerator", .expected = "an accelerator file or name"});
      }
      w.model = catalog.find(DataKind::kModel, w.model, "workload.model");
      w.accelerator = catalog.find(DataKind::kAccelerator, w.accelerator, "workload.accelerator");
      const workload::Model model = workload::load_model(w.model, spec.limits);
      const workload::Accelerator device = workload::load_accelerator(w.accelerator, spec.limits);
      if (w.candidates.max_tensor_parallel == 0) w.candidates.max_tensor_parallel = scale_up;
      const auto configs = placer::candidate_configs(model, w.build, w.candidates);
      if (configs.empty()) {
        throw Error::input("no parallel configuration of the model fits the options",
                           {.key = "workload.candidates",
                            .expected = "a larger tensor-parallel bound or other micro-batches"});
      }
      profile = std::make_shared<const workload::LayerProfile>(
          workload::build_profile(model, device, configs, w.build));
      if (!spec.memory_bandwidth) {
        spec.memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency;
      }
    }
    nest::log(log, LogLevel::kInfo, "workload {} on {}: {} variants, built in {:.3f} s",
              profile->model, profile->accelerator, profile->variants.size(), seconds_since(start));
  }

  void build_network() {
    thread_share->threads = spec.threads;
    if (spec.flat_bandwidth) {
      if (spec.flat_bandwidth->bytes_per_s() <= 0) {
        throw Error::input("must be positive", {.key = "flat_bandwidth"});
      }
      flat = std::make_unique<placer::FlatCommCost>(
          *spec.flat_bandwidth, spec.flat_latency.value_or(Time::zero()), scale_up);
    } else if (topology) {
      const placer::FlatCommCost f = placer::flat_network_for(*topology, scale_up);
      flat = std::make_unique<placer::FlatCommCost>(f.bandwidth(), f.latency(), scale_up);
    }
    switch (network) {
      case NetworkModel::kOracle: {
        // The search's oracle simulates a query's link-disjoint sets on the job's threads that
        // nothing else holds (`ThreadShare`).
        placer::OracleOptions options = oracle_options();
        options.threads = spec.threads;
        auto o = std::make_unique<placer::OracleCommCost>(*topology, options);
        oracle = o.get();
        facts = std::make_shared<coll::OracleFacts>();
        oracle->collective_oracle().publish_to(facts);
        thread_share->oracle = &oracle->collective_oracle();
        comm = std::move(o);
        nest::log(log, LogLevel::kDebug,
                  "oracle: one collective oracle on {} (routing seed {}, {})", topology_name,
                  spec.seed,
                  oracle->calibrated() ? "calibrated by " + topology->collective_model()->name
                                       : std::string("ideal network"));
        break;
      }
      case NetworkModel::kFlat:
        if (!flat) {
          throw Error::input("the flat network needs a bandwidth or a topology",
                             {.key = "flat_bandwidth", .expected = "a rate such as 50 GB/s"});
        }
        spec.flat_bandwidth = flat->bandwidth();
        spec.flat_latency = flat->latency();
        comm = std::make_unique<placer::FlatCommCost>(flat->bandwidth(), flat->latency(), scale_up);
        break;
      case NetworkModel::kZero:
        comm = std::make_unique<placer::ZeroCommCost>(scale_up);
        break;
    }
  }

  placer::OracleOptions oracle_options() const {
    return {.allreduce = spec.algorithm,
            .all_gather = spec.algorithm,
            .reduce_scatter = spec.algorithm,
            .ideal = spec.ideal,
            .seed = spec.seed};
  }

  // Whether the topology-agnostic baseline means something here: a search on the flat network
  // of the topology, priced on the oracle.
  bool agnostic_applies() const { return network == NetworkModel::kOracle && flat != nullptr; }

  // Whether baseline `name` runs on an oracle of its own: the topology-agnostic one where it
  // applies, and the anneal on the oracle (its walk reads the oracle's bounds, which answer
  // from what the oracle already holds: so it meets the same memo, run beside the search or
  // not).
  bool own_oracle(const std::string& name) const {
    if (name == "topology-agnostic") return agnostic_applies();
    return name == "anneal" && network == NetworkModel::kOracle && topology != nullptr;
  }

  // Baseline `name` (`own_oracle`) as a task that shares nothing mutable with the job: its own
  // oracle (the same options, so the same exact prices as the job's) and, for the
  // topology-agnostic one, its own flat network; the topology and the profile are immutable
  // and shared. So it can run beside the search, and it leaves the job's oracle as the other
  // baselines find it. The topology-agnostic baseline's oracle also reads what the job's oracle
  // has simulated by then (`coll::CollectiveOracle::consult`: the same exact prices, less
  // work; its plan is priced in full, so only its counters depend on how far the search got),
  // and records what it simulates for the job's oracle to read while it runs beside the search
  // (`Job::start_baselines`; each waits for a structure the other is simulating rather than
  // simulate it twice). The anneal's does neither: its walk reads its oracle's bounds, which
  // would then depend on the search's progress.
  // The task of baseline `name` on an oracle of its own: queued (`OwnTasks`, which sets the
  // oracle's threads), or in line (nullptr: the job's threads).
  std::function<OwnRun(OwnTasks*)> own_task(const std::string& name) const {
    return
        [name, topology = topology, profile = profile, options = oracle_options(),
         bandwidth = flat ? flat->bandwidth() : Bandwidth{},
         latency = flat ? flat->latency() : Time{}, scale_up = scale_up, search = search,
         facts = name == "topology-agnostic" ? facts : nullptr,
         anneal = placer::AnnealOptions{.seed = spec.anneal_seed, .iterations = spec.anneal_steps},
         threads = spec.threads](OwnTasks* queue) {
          const auto start = Clock::now();
          placer::OracleCommCost own(*topology, options);
          if (facts) {
            own.collective_oracle().consult(facts);
            own.collective_oracle().publish_to(facts);
          }
          struct Enter {
            OwnTasks* queue;
            coll::CollectiveOracle& oracle;
            ~Enter() {
              if (queue != nullptr) queue->leave(oracle);
            }
          } entered{queue, own.collective_oracle()};
          if (queue != nullptr) {
            queue->enter(own.collective_oracle());
          } else {
            own.collective_oracle().set_threads(threads);
          }
          OwnRun run;
          if (name == "anneal") {
            run.result = placer::anneal_baseline(*profile, own, search, anneal);
          } else {
            placer::FlatCommCost own_flat(bandwidth, latency, scale_up);
            run.result = placer::topology_agnostic_baseline(*profile, own, own_flat, search);
          }
          run.seconds = seconds_since(start);
          run.stats = own.stats();
          return run;
        };
  }

  // The job's collective oracle (to tune a replay on; one thread at a time), if it prices on one.
  coll::CollectiveOracle* collective_oracle() const {
    return oracle != nullptr ? &oracle->collective_oracle() : nullptr;
  }

  // The replay of `plan` (checked against the topology and memory), metadata not filled. Reads
  // only the job's immutable parts and does not log, so threads may replay at once; but for
  // `tuner`, an oracle for the buckets' algorithms (`replay::replay_plan`) that only the calling
  // thread may use.
  replay::RunRecord replay(const placer::Plan& plan, const SimulateOptions& options,
                           coll::CollectiveOracle* tuner = nullptr,
                           const std::atomic<bool>* stop = nullptr) const {
    if (!topology) {
      throw Error::input("a replay needs a topology", {.key = "topology",
                                                       .expected = "a plan made with a topology, "
                                                                   "or one here"});
    }
    if (topology->num_devices() < static_cast<std::size_t>(plan.devices_used)) {
      throw Error::input(fmt::format("the plan needs {} devices, the topology has {}",
                                     plan.devices_used, topology->num_devices()),
                         {.key = "topology"});
    }
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      if (plan.stages[s].fits(plan.capacity)) continue;
      throw Error::input(
          fmt::format("stage {} needs {} per device, more than the {} of memory", s,
                      format_bytes(plan.stages[s].memory.total()), format_bytes(plan.capacity)),
          {.key = fmt::format("partition[{}]", s)});
    }
    return replay::replay_plan(plan, *profile, *topology, replay_options(options), tuner, stop);
  }

  // How the verification replays its candidates: only their times are needed, so no busiest
  // links' series (a second pass that leaves the replay as it is), no metadata.
  static SimulateOptions candidates_replay(const SimulateOptions& options) {
    SimulateOptions light{.replay = options.replay};
    light.replay.utilization_links = 0;
    return light;
  }

  // `replay` on an oracle of its own that reads what the job's oracle has simulated
  // (`coll::CollectiveOracle::consult`: the same choices, less work), so that any thread may
  // run it, also while the search prices on the job's oracle (the verification's replays).
  replay::RunRecord replay_apart(const placer::Plan& plan, const SimulateOptions& options,
                                 const std::atomic<bool>* stop = nullptr) const {
    std::optional<coll::CollectiveOracle> own;
    if (oracle != nullptr) {
      own.emplace(*topology, coll::OracleSettings{.seed = spec.seed, .ideal = spec.ideal});
      own->consult(facts);
    }
    return replay(plan, options, own ? &*own : nullptr, stop);
  }

  // The replay's options as the job runs them: its seed and network, and the reduction and the
  // boundary transfers as the plan was priced (beside the compute or after it).
  replay::PlanReplayOptions replay_options(const SimulateOptions& options) const {
    replay::PlanReplayOptions replay = options.replay;
    replay.seed = spec.seed;
    replay.ideal = spec.ideal;
    replay.overlap_gradient_sync = search.cost.overlap_gradient_sync;
    replay.overlap_boundary_transfers = search.cost.overlap_boundary_transfers;
    if (spec.algorithm) replay.data_parallel_algorithm = spec.algorithm;
    return replay;
  }

  void log_oracle(std::string_view phase) const {
    if (oracle != nullptr) log_oracle_stats(log, phase, oracle->stats());
  }

  // The input files of the job, as resolved.
  std::vector<std::pair<std::string, std::string>> input_files() const {
    std::vector<std::pair<std::string, std::string>> out;
    if (!spec.topology.empty()) out.emplace_back("topology", spec.topology);
    const WorkloadSpec& w = spec.workload;
    if (!w.profile.empty()) out.emplace_back("profile", w.profile);
    if (!w.model.empty()) out.emplace_back("model", w.model);
    if (!w.accelerator.empty()) out.emplace_back("accelerator", w.accelerator);
    return out;
  }
};

Job::Job(JobSpec spec, const Catalog& catalog, Logger* log)
    : Job(std::move(spec), Prebuilt{}, catalog, log) {}

Job::Job(JobSpec spec, Prebuilt prebuilt, const Catalog& catalog, Logger* log)
    : impl_(std::make_unique<Impl>(std::move(spec), std::move(prebuilt), catalog, log)) {}

Job::~Job() = default;
Job::Job(Job&&) noexcept = default;
Job& Job::operator=(Job&&) noexcept = default;

const JobSpec& Job::spec() const noexcept { return impl_->spec; }
const topo::Topology* Job::topology() const noexcept { return impl_->topology.get(); }
const std::string& Job::topology_name() const noexcept { return impl_->topology_name; }
const workload::LayerProfile& Job::profile() const noexcept { return *impl_->profile; }
placer::CommCost& Job::network() noexcept { return *impl_->comm; }
const placer::CommCost& Job::network() const noexcept { return *impl_->comm; }
NetworkModel Job::network_model() const noexcept { return impl_->network; }
const placer::SearchOptions& Job::search_options() const noexcept { return impl_->search; }

int Job::replays_taken_beside_search() const noexcept { return impl_->taken_beside; }

coll::OracleStats Job::oracle_stats() const noexcept {
  return impl_->oracle != nullptr ? impl_->oracle->stats() : coll::OracleStats{};
}

placer::SearchResult Job::search() { return search(std::function<void(const placer::Plan&)>()); }

placer::SearchResult Job::search(const std::function<void(const placer::Plan&)>& kept) {
  const auto start = Clock::now();
  // Each pass as it ends: a search of many minutes (131,072 GPUs) says how it goes.
  const auto pass = [&](const placer::PassReport& r) {
    nest::log(impl_->log, LogLevel::kInfo,
              "search: pass {} ({}{}) {} at {:.3f} s: {} candidates, {} network queries so far",
              r.pass, r.cap ? fmt::format("capped at {}", format_time(*r.cap)) : "uncapped",
              r.guessed    ? ", near the least bound the last pass's sync checks met"
              : r.confirms ? ", to confirm what the last pass found"
                           : "",
              r.ends         ? "ends the search"
              : r.to_confirm ? fmt::format("found its plans ({} waited for their joint syncs so "
                                           "far), which the next pass confirms,",
                                           r.stats.requeued)
                             : std::string("leaves the search to a higher cap"),
              seconds_since(start), r.stats.candidates, r.stats.network_queries);
  };
  placer::SearchResult result =
      placer::search(*impl_->profile, *impl_->comm, impl_->search, {.kept = kept, .pass = pass});
  nest::log(impl_->log, LogLevel::kInfo,
            "search: {} tables, {} candidates ({} ruled out by event-free bounds, {} by their "
            "syncs, {} of them before every sync was priced; {} waited for their joint syncs), "
            "{} network queries, {} passes in {:.3f} s",
            result.stats.tables, result.stats.candidates, result.stats.pass_bounded,
            result.stats.sync_bounded, result.stats.syncs_spared, result.stats.requeued,
            result.stats.network_queries, result.stats.passes, seconds_since(start));
  impl_->log_oracle("the search");
  if (result.best && impl_->oracle != nullptr) {
    // What the oracle chose for each of the plan's groups, for the plan file.
    result.best->collectives =
        placer::plan_collectives(*impl_->profile, *result.best, *impl_->oracle, impl_->search.cost);
  }
  return result;
}

namespace {

// The flows a replay of `plan` launches when every one is simulated: each microbatch's transfer
// between consecutive chunks both ways, per shard, and each stage's bucket reductions over the
// d replicas as rings, per shard (2(d - 1) d flows each). Orders the verification's replays on
// its threads, largest first; no result depends on it.
double replay_flows(const placer::Plan& plan, int buckets) {
  const double stages = plan.choice.stages();
  const double chunks = stages * std::max(1, plan.choice.virtual_stages);
  const double d = plan.choice.data_parallel;
  const double shards = plan.degrees.devices_per_replica;
  return static_cast<double>(plan.microbatches) * (chunks - 1) * 2 * shards +
         stages * shards * std::max(1, buckets) * 2 * (d - 1) * d;
}

}  // namespace

placer::Plan Job::place() { return placement().plan; }

Placement Job::placement(const SimulateOptions& options) {
  return verify(search(options), options);
}

placer::SearchResult Job::search(const SimulateOptions& verify_with) {
  Impl& m = *impl_;
  m.early.reset();
  const int k = m.spec.verify.value_or(0);
  if (k == 0 || m.spec.threads < 2 || !m.topology) return search();
  const SimulateOptions light = m.candidates_replay(verify_with);
  m.early = std::make_unique<EarlyReplays>(
      *m.thread_share, static_cast<std::size_t>(k), light.replay, verify_with.keep_replay,
      [&m, light](const placer::Plan& plan, const std::atomic<bool>& stop) {
        return m.replay_apart(plan, light, &stop);
      },
      verify_with.replay.utilization_links,
      [&m, options = m.replay_options(verify_with)](
          replay::RunRecord& run, const placer::Plan& plan, const std::atomic<bool>& stop) {
        replay::add_busiest_series(run, plan, *m.profile, *m.topology, options, &stop);
      });
  EarlyReplays& early = *m.early;
  try {
    placer::SearchResult result = search([&early](const placer::Plan& p) { early.kept(p); });
    if (!result.best) m.early.reset();  // nothing to verify
    return result;
  } catch (...) {
    m.early.reset();  // stops its replay and gives the thread back
    throw;
  }
}

Placement Job::verify(placer::SearchResult result, const SimulateOptions& options) {
  // The replays begun beside the search, if they are this verification's.
  std::unique_ptr<EarlyReplays> early_owned = std::move(impl_->early);
  impl_->taken_beside = 0;
  const SimulateOptions light = impl_->candidates_replay(options);
  if (early_owned && !early_owned->replays(light.replay, options.keep_replay)) early_owned.reset();
  EarlyReplays* const early = early_owned.get();
  if (!result.best) throw Error::input(result.infeasible_reason);
  const int k = impl_->spec.verify.value_or(0);
  if (k == 0 || result.candidates.empty()) return {.plan = std::move(*result.best)};
  const auto start = Clock::now();
  // The best of each order first, then the rest by estimate, up to K in all. A plan over
  // memory (priced with ignore_memory) cannot be replayed, so it is not a candidate.
  std::vector<placer::Plan>& all = result.candidates;
  const std::vector<bool> take = placer::replay_selection(all, static_cast<std::size_t>(k));
  const auto taken = static_cast<std::size_t>(std::count(take.begin(), take.end(), true));
  if (taken == 0) return {.plan = std::move(*result.best)};
  placer::Verification v;
  v.requested = k;
  // The candidates replayed on up to `threads` threads, each taking the next one, the largest
  // replays first (`replay_flows`, so that the longest does not start last): a replay reads only
  // the plan and the job's immutable parts, so every time is the one thread would get, and the
  // run kept is the first in list order of the least time, as one thread keeps it. After an
  // error, the candidates before it in list order still run, so that the error thrown is the
  // first in list order, as one thread in list order would throw it. The log's lines follow, in
  // list order. Each replay chooses its buckets' algorithms on an oracle of its own that reads
  // what the job's oracle has published (`Impl::replay_apart`: the same choices), so the job's
  // oracle counters are the search's on any number of threads. The candidates that `early`
  // replayed or is replaying beside the search are taken from it instead (waiting for the one
  // running), and the others run on the threads it leaves.
  std::vector<std::size_t> order;
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (take[i]) order.push_back(i);
  }
  std::vector<char> ahead(order.size(), 0);  // replayed (or being replayed) by `early`
  if (early != nullptr) {
    std::vector<const placer::Plan*> finals;
    for (const std::size_t i : order) finals.push_back(&all[i]);
    early->settle(finals);
    for (std::size_t j = 0; j < order.size(); ++j) ahead[j] = early->owns(all[order[j]]) ? 1 : 0;
  }
  std::vector<std::size_t> dispatch;
  for (std::size_t j = 0; j < order.size(); ++j) {
    if (ahead[j] == 0) dispatch.push_back(j);
  }
  const int buckets = options.replay.gradient_buckets;
  std::stable_sort(dispatch.begin(), dispatch.end(), [&](std::size_t a, std::size_t b) {
    return replay_flows(all[order[a]], buckets) > replay_flows(all[order[b]], buckets);
  });
  struct Replayed {
    Time time;
    double seconds = 0;
    std::exception_ptr error;
  };
  std::vector<Replayed> replayed(order.size());
  std::optional<replay::RunRecord> chosen_run;
  std::size_t chosen_at = order.size();
  int chosen_series = 0;  // the busiest links' series `chosen_run` holds (`EarlyReplays`)
  std::mutex keeping;     // chosen_run, chosen_at, chosen_series
  // Keeps `run` (candidate j's replay) when it is the first in list order of the least time.
  const auto offer = [&](std::size_t j, replay::RunRecord&& run, int series = 0) {
    const std::lock_guard lock(keeping);
    if (chosen_at == order.size() || replayed[j].time < replayed[chosen_at].time ||
        (replayed[j].time == replayed[chosen_at].time && j < chosen_at)) {
      chosen_at = j;
      chosen_run = std::move(run);
      chosen_series = series;
    }
  };
  std::atomic<std::size_t> next{0};
  std::atomic<std::size_t> failed_at{order.size()};  // the least list index that failed
  const auto replay_one = [&](std::size_t j) {
    Replayed& r = replayed[j];
    try {
      const auto began = Clock::now();
      replay::RunRecord run = impl_->replay_apart(all[order[j]], light);
      r.seconds = seconds_since(began);
      r.time = run.summary.iteration_time;
      if (options.keep_replay) offer(j, std::move(run));
    } catch (...) {
      r.error = std::current_exception();
      std::size_t seen = failed_at;
      while (j < seen && !failed_at.compare_exchange_weak(seen, j)) {
      }
    }
  };
  const auto work = [&] {
    for (std::size_t n = next++; n < dispatch.size(); n = next++) {
      if (dispatch[n] <= failed_at) replay_one(dispatch[n]);
    }
  };
  {
    // A thread still replaying for `early` finishes that replay and then takes from the queue at
    // the lowest priority, beside the `threads` (the largest replays start at once on those, as
    // without it: `replay_flows` is not the replays' time, and a misordered largest replay left
    // to a thread free only later would end last; Llama-3.1-405B on 16,384 GPUs, every default:
    // 85.7 s of verification against 71.9 s when the lent thread counted as one of two).
    const int lent = early != nullptr && !dispatch.empty() && early->lend(work) ? 1 : 0;
    // The lent `work` reads this frame: whatever throws below, it ends before the frame does.
    struct WaitLent {
      EarlyReplays* early;
      ~WaitLent() {
        if (early != nullptr) early->wait_lent();
      }
    } wait_lent{lent != 0 ? early : nullptr};
    const auto threads = static_cast<std::size_t>(impl_->spec.threads);
    const std::size_t helpers_wanted =
        dispatch.empty() ? 0 : std::min(dispatch.size(), threads) - 1;
    // The replays' helpers hold their threads (so does `early`'s, while it replays).
    const ThreadShare::Held held(*impl_->thread_share, static_cast<int>(helpers_wanted));
    std::vector<std::future<void>> helpers;
    for (std::size_t t = 0; t < helpers_wanted; ++t) {
      helpers.push_back(std::async(std::launch::async, work));
    }
    work();
    for (auto& h : helpers) h.get();
  }
  // This thread would now wait for the replays still running beside: meanwhile, the series of
  // the least replay so far (`nest run` writes them if it is chosen).
  if (early != nullptr) early->series_meanwhile();
  for (std::size_t j = 0; j < order.size(); ++j) {
    if (ahead[j] == 0) continue;
    std::optional<EarlyReplays::Outcome> out = early->take(all[order[j]]);
    if (!out) {  // not expected: `owns` said it ran or was running
      replay_one(j);
      continue;
    }
    ++impl_->taken_beside;
    Replayed& r = replayed[j];
    r.time = out->time;
    r.seconds = out->seconds;
    r.error = out->error;
    if (out->run) offer(j, std::move(*out->run), out->series);
  }
  for (std::size_t j = 0; j < order.size(); ++j) {
    const Replayed& r = replayed[j];
    if (r.error) std::rethrow_exception(r.error);
    nest::log(impl_->log, LogLevel::kInfo, "verify: candidate {} replayed in {:.3f} s{}", j + 1,
              r.seconds, ahead[j] != 0 ? " (begun beside the search)" : "");
    v.candidates.push_back({.plan = std::move(all[order[j]]),
                            .replayed = r.time,
                            .estimate_rank = static_cast<int>(v.candidates.size()) + 1});
  }
  std::vector<std::size_t> by_replay(v.candidates.size());
  for (std::size_t i = 0; i < by_replay.size(); ++i) by_replay[i] = i;
  std::stable_sort(by_replay.begin(), by_replay.end(), [&](std::size_t a, std::size_t b) {
    return v.candidates[a].replayed < v.candidates[b].replayed;
  });
  for (std::size_t r = 0; r < by_replay.size(); ++r) {
    v.candidates[by_replay[r]].replay_rank = static_cast<int>(r) + 1;
  }
  v.chosen = by_replay.front();
  if (early != nullptr) {
    const auto [begun, wasted] = early->counts();
    nest::log(impl_->log, LogLevel::kInfo,
              "verify: {} replays begun beside the search, {} of them of plans that then left the "
              "candidates (stopped or dropped)",
              begun, wasted);
  }
  nest::log(impl_->log, LogLevel::kInfo,
            "verify: {} candidates replayed in {:.3f} s; chosen: estimate rank {}", taken,
            seconds_since(start), v.candidates[v.chosen].estimate_rank);
  placer::Plan chosen = v.candidates[v.chosen].plan;
  if (chosen.collectives.empty() && impl_->oracle != nullptr) {
    chosen.collectives =
        placer::plan_collectives(*impl_->profile, chosen, *impl_->oracle, impl_->search.cost);
  }
  return {.plan = std::move(chosen),
          .verification = std::move(v),
          .replay = std::move(chosen_run),
          .replayed_with = light.replay,
          .replay_series = chosen_series};
}

void Job::start_baselines() {
  Impl& m = *impl_;
  if (m.spec.threads < 2 || m.own_tasks) return;
  auto own = std::make_shared<OwnTasks>();
  // The anneal first: it usually takes longer (its walk, then its plan priced exactly), and the
  // search's thread takes what is left once it is done.
  for (const char* name : {"anneal", "topology-agnostic"}) {
    const bool listed =
        std::find(m.spec.baselines.begin(), m.spec.baselines.end(), name) != m.spec.baselines.end();
    if (!listed || !m.own_oracle(name)) continue;
    own->names.emplace_back(name);
    own->tasks.push_back(m.own_task(name));
  }
  if (own->tasks.empty()) return;
  // The search reads what the topology-agnostic baseline simulates beside it (`own_task`): both
  // price the same large collectives (Llama-3.1-405B on 16,384 rail GPUs: its ZeRO-3 plan's
  // all-gathers over 2,048 ranks, 0.4-1 s each), and whichever gets there first saves the
  // other the run. The same exact answers, so the same plan; only counters then depend on
  // timing, as the baseline's do: the job's oracle's, and the search's counts of what its
  // bounds ruled out (sharper bounds rule out more).
  const bool agnostic =
      std::find(own->names.begin(), own->names.end(), "topology-agnostic") != own->names.end();
  if (agnostic && m.oracle != nullptr) m.oracle->collective_oracle().consult(m.facts);
  own->runs.resize(own->tasks.size());
  // The queue holds a thread while it runs: the job's oracle runs its sets on what is left until
  // the queue is empty (or a task throws).
  m.thread_share->hold(1);
  try {
    m.background = std::async(std::launch::async, [own, share = m.thread_share] {
      struct Release {
        ThreadShare& share;
        ~Release() { share.hold(-1); }
      } release{*share};
      own->take();
    });
  } catch (...) {
    m.thread_share->hold(-1);
    throw;
  }
  m.own_tasks = std::move(own);
}

std::vector<placer::BaselineResult> Job::baselines() {
  Impl& m = *impl_;
  // The queue started by `start_baselines`, taken from the job so that an error leaves none
  // behind; on an error the other thread stops after the task it runs.
  const std::shared_ptr<OwnTasks> own = std::move(m.own_tasks);
  std::future<void> background = std::move(m.background);
  struct Stop {
    OwnTasks* own;
    ~Stop() {
      if (own != nullptr) own->stop();
    }
  } stop{own.get()};
  std::vector<placer::BaselineResult> out;
  for (const std::string& name : m.spec.baselines) {
    const auto start = Clock::now();
    if (m.own_oracle(name)) {
      if (background.valid()) {
        own->take();
        // Nothing left to take: this thread only waits, so the task still running has both.
        own->lend(m.spec.threads);
        background.get();
      }
      // From the queue, else (not queued, or listed twice) in line.
      std::optional<OwnRun> queued = own ? own->collect(name) : std::nullopt;
      const bool beside = queued.has_value();
      OwnRun run = beside ? std::move(*queued) : m.own_task(name)(nullptr);
      out.push_back(std::move(run.result));
      if (beside) {
        nest::log(m.log, LogLevel::kInfo,
                  "baseline {}: {:.3f} s, queued beside the search ({:.3f} s waited)", name,
                  run.seconds, seconds_since(start));
      } else {
        nest::log(m.log, LogLevel::kInfo, "baseline {}: {:.3f} s", name, seconds_since(start));
      }
      log_oracle_stats(m.log, fmt::format("the {} baseline (its own)", name), run.stats);
      continue;
    }
    if (name == "manual") {
      out.push_back(placer::manual_baseline(*m.profile, *m.comm, m.search));
    } else if (name == "anneal") {
      out.push_back(
          placer::anneal_baseline(*m.profile, *m.comm, m.search,
                                  {.seed = m.spec.anneal_seed, .iterations = m.spec.anneal_steps}));
    } else {
      out.push_back({.name = name,
                     .note = fmt::format("not applicable: the {} network is already "
                                         "topology-agnostic",
                                         to_string(m.network))});
    }
    nest::log(m.log, LogLevel::kInfo, "baseline {}: {:.3f} s", name, seconds_since(start));
  }
  if (!m.spec.fixed_plan.empty()) {
    const io::PlanRecord given = io::read_plan_file(m.spec.fixed_plan, m.spec.limits);
    placer::PlanChoice choice = given.choice;
    choice.variant = placer::find_variant(*m.profile, given.degrees);
    out.push_back(placer::fixed_baseline(*m.profile, choice, *m.comm, m.search.cost));
  }
  m.log_oracle("the baselines");
  return out;
}

placer::Plan Job::evaluate(const placer::PlanChoice& choice) {
  return placer::evaluate(*impl_->profile, choice, *impl_->comm, impl_->search.cost);
}

placer::Plan Job::evaluate(const io::PlanRecord& record) {
  placer::PlanChoice choice = record.choice;
  try {
    choice.variant = placer::find_variant(*impl_->profile, record.degrees);
  } catch (const Error& e) {
    throw e.in_file(record.file);
  }
  return evaluate(choice);
}

namespace {

// The run's metadata: tool version, command line, the plan's YAML, the inputs' hashes.
void fill_metadata(replay::RunRecord& run, const SimulateOptions& options, std::string plan_yaml,
                   const std::vector<std::pair<std::string, std::string>>& inputs) {
  run.meta.tool_version = NEST_VERSION;
  run.meta.command_line = options.command_line;
  run.meta.plan_yaml = std::move(plan_yaml);
  for (const auto& [kind, path] : inputs) run.meta.inputs.emplace_back(path, file_hash(path));
}

}  // namespace

replay::RunRecord Job::simulate(const placer::Plan& plan, const SimulateOptions& options) {
  const auto start = Clock::now();
  // One thread here: the buckets' algorithms are chosen on the job's oracle, whose memo already
  // holds what pricing the plan simulated (the same answers as a fresh oracle's).
  replay::RunRecord run = impl_->replay(plan, options, impl_->collective_oracle());
  nest::log(impl_->log, LogLevel::kInfo,
            "replay: {} timeline rows, {} links, {} of {} reductions timed alone, in {:.3f} s",
            run.timeline.size(), run.links.size(), run.alone_reductions,
            run.alone_reductions + run.simulated_reductions, seconds_since(start));
  fill_metadata(
      run, options,
      options.plan_yaml.empty() ? plan_yaml(plan, {}, fs::path("plan.yaml")) : options.plan_yaml,
      impl_->input_files());
  return run;
}

replay::RunRecord Job::simulate(Placement& placed, const SimulateOptions& options) {
  // The kept replay has no busiest links' series (the verification does not ask for them), and
  // its figures do not depend on them: it stands for a replay with them once they are added.
  replay::PlanReplayOptions without_series = options.replay;
  without_series.utilization_links = 0;
  if (!placed.replay || !(placed.replayed_with == without_series)) {
    return simulate(placed.plan, options);
  }
  nest::log(impl_->log, LogLevel::kInfo, "replay: the verification's replay of the chosen plan");
  if (options.replay.utilization_links > 0 &&
      placed.replay_series == options.replay.utilization_links) {
    nest::log(impl_->log, LogLevel::kInfo,
              "replay: the {} busiest links' series, added beside the search",
              placed.replay->link_series.size());
  } else if (options.replay.utilization_links > 0) {
    const auto start = Clock::now();
    replay::add_busiest_series(*placed.replay, placed.plan, *impl_->profile, *impl_->topology,
                               impl_->replay_options(options));
    nest::log(impl_->log, LogLevel::kInfo, "replay: the {} busiest links' series in {:.3f} s",
              placed.replay->link_series.size(), seconds_since(start));
  }
  replay::RunRecord run = std::move(*placed.replay);
  placed.replay.reset();
  fill_metadata(run, options,
                options.plan_yaml.empty() ? plan_yaml(placed.plan, {}, fs::path("plan.yaml"))
                                          : options.plan_yaml,
                impl_->input_files());
  return run;
}

io::PlanInputs Job::plan_inputs(const fs::path& plan_path) const {
  const Impl& m = *impl_;
  const fs::path folder = plan_path.parent_path().empty() ? fs::path(".") : plan_path.parent_path();
  io::PlanInputs in;
  const WorkloadSpec& w = m.spec.workload;
  if (!w.profile.empty()) in.profile = relative_to(w.profile, folder);
  if (!w.model.empty()) in.model = relative_to(w.model, folder);
  if (!w.accelerator.empty()) in.accelerator = relative_to(w.accelerator, folder);
  if (!m.spec.topology.empty()) in.topology = relative_to(m.spec.topology, folder);
  for (const auto& [kind, path] : m.input_files()) in.hashes.emplace_back(kind, file_hash(path));
  in.network = std::string(to_string(m.network));
  if (m.network == NetworkModel::kFlat) {
    in.flat_bandwidth = m.flat->bandwidth();
    in.flat_latency = m.flat->latency();
  }
  in.rules = m.spec.rules;
  in.devices = m.spec.devices;
  in.memory_bandwidth = m.spec.memory_bandwidth.value_or(Bandwidth());
  if (!w.model.empty()) {
    // The effective values, so that the record does not depend on the model file's defaults.
    in.build = w.build;
    in.build.sequence_length = m.profile->sequence_length;
    in.build.global_batch = m.profile->global_batch;
  }
  in.seed = m.spec.seed;
  in.anneal_seed = m.spec.anneal_seed;
  in.ideal = m.spec.ideal;
  if (m.spec.algorithm) in.algorithm = std::string(coll::algorithm_name(*m.spec.algorithm));
  in.search = m.spec.search;
  in.search.variants.clear();  // indices into this job's profile: not an input
  in.search.cost = m.search.cost;
  if (!w.model.empty()) in.candidates = w.candidates;
  return in;
}

std::string Job::plan_yaml(const placer::Plan& plan,
                           const std::vector<placer::BaselineResult>& baselines,
                           const fs::path& plan_path,
                           const placer::Verification* verification) const {
  return io::plan_to_yaml(plan_inputs(plan_path), plan, baselines, verification);
}

PlannedJob load_plan(const fs::path& path, const PlanOverrides& overrides, const Catalog& catalog,
                     Logger* log) {
  io::PlanRecord record = io::read_plan_file(path.string(), overrides.limits);
  const io::PlanInputs& in = record.inputs;
  const fs::path folder = path.parent_path().empty() ? fs::path(".") : path.parent_path();
  // Inputs resolve against the plan's folder only: the same plan never picks up a different
  // file because of where it is run from.
  auto beside = [&](const std::string& p, const char* key) {
    const fs::path full = fs::path(p).is_absolute() ? fs::path(p) : folder / p;
    std::error_code ec;
    if (!fs::is_regular_file(full, ec)) {
      throw Error::input("input file of the plan not found",
                         {.file = path.string(),
                          .key = key,
                          .value = p,
                          .expected = "a file at that path relative to the plan's folder"});
    }
    return full.lexically_normal().string();
  };
  JobSpec spec;
  if (!in.profile.empty()) spec.workload.profile = beside(in.profile, "inputs.profile");
  if (!in.model.empty()) spec.workload.model = beside(in.model, "inputs.model");
  if (!in.accelerator.empty()) {
    spec.workload.accelerator = beside(in.accelerator, "inputs.accelerator");
  }
  spec.workload.build = in.build;
  spec.workload.candidates = in.candidates;
  spec.search = in.search;
  if (!overrides.topology.empty()) {
    spec.topology = catalog.find(DataKind::kTopology, overrides.topology, "topology");
  } else if (!in.topology.empty()) {
    spec.topology = beside(in.topology, "inputs.topology");
  }
  Prebuilt prebuilt;
  if (!spec.topology.empty()) {
    prebuilt.topology = std::make_shared<const topo::Topology>(
        topo::load_topology(spec.topology, overrides.limits));
    prebuilt.topology_name = spec.topology;
    if (prebuilt.topology->num_devices() < static_cast<std::size_t>(in.devices)) {
      throw Error::input(fmt::format("the plan needs {} devices, the topology has {}", in.devices,
                                     prebuilt.topology->num_devices()),
                         {.file = spec.topology, .key = "devices"});
    }
  }
  spec.devices = in.devices;
  spec.rules = in.rules;
  spec.network = parse_network_model(in.network);
  if (*spec.network == NetworkModel::kFlat) {
    spec.flat_bandwidth = in.flat_bandwidth;
    spec.flat_latency = in.flat_latency;
  }
  if (in.memory_bandwidth.bytes_per_s() > 0) spec.memory_bandwidth = in.memory_bandwidth;
  spec.seed = overrides.seed.value_or(in.seed);
  spec.anneal_seed = in.anneal_seed;
  spec.ideal = in.ideal;
  if (!in.algorithm.empty()) {
    try {
      spec.algorithm = coll::parse_algorithm(in.algorithm);
    } catch (const Error& e) {
      throw Error::input(e.message(), {.file = path.string(),
                                       .key = "inputs.algorithm",
                                       .value = in.algorithm,
                                       .expected = e.context().expected});
    }
  }
  spec.baselines.clear();
  spec.limits = overrides.limits;
  for (const auto& [kind, hash] : in.hashes) {
    for (const auto& [key, file] :
         {std::pair<const char*, const std::string&>{"topology", spec.topology},
          {"profile", spec.workload.profile},
          {"model", spec.workload.model},
          {"accelerator", spec.workload.accelerator}}) {
      if (kind != key || file.empty() || (kind == "topology" && !overrides.topology.empty())) {
        continue;
      }
      if (file_hash(file) != hash) {
        nest::log(log, LogLevel::kWarn, "{}: the {} {} changed since the plan was made",
                  path.string(), kind, file);
      }
    }
  }
  // A model's profile is built for the plan's variant only.
  if (!spec.workload.model.empty()) {
    if (spec.workload.accelerator.empty()) {
      throw Error::input("a model needs an accelerator",
                         {.file = path.string(), .key = "inputs.accelerator"});
    }
    const workload::Model model = workload::load_model(spec.workload.model, overrides.limits);
    const workload::Accelerator device =
        workload::load_accelerator(spec.workload.accelerator, overrides.limits);
    const placer::VariantDegrees& v = record.degrees;
    const workload::ParallelConfig config{.tensor = v.tensor_parallel,
                                          .context = v.context_parallel,
                                          .expert = v.expert_parallel,
                                          .sequence = v.sequence_parallel,
                                          .micro_batch = v.micro_batch};
    prebuilt.profile = std::make_shared<const workload::LayerProfile>(
        workload::build_profile(model, device, {config}, spec.workload.build));
    if (!spec.memory_bandwidth) {
      prebuilt.memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency;
    }
  }
  Job job(std::move(spec), std::move(prebuilt), catalog, log);
  placer::Plan plan = job.evaluate(record);
  return PlannedJob{.record = std::move(record), .job = std::move(job), .plan = std::move(plan)};
}

}  // namespace nest::job
