// `nest simulate` (replay a plan file) and `nest run` (place, then simulate, in one process).

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/job_options.h"
#include "cli/options.h"
#include "nest/chakra/chakra.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/output_paths.h"
#include "nest/core/progress.h"
#include "nest/core/staged_folder.h"
#include "nest/core/unit_parse.h"
#include "nest/io/plan_file.h"
#include "nest/io/run_writers.h"
#include "nest/job/job.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kSimulateUsage =
    "nest simulate --plan plan.yaml -o run.h5 [--trace run.json] [--trace-gzip] [--all-devices] "
    "[--csv run.csv] [--chakra DIR] [--topology FILE] [--schedule 1f1b|gpipe|interleaved] "
    "[--virtual-stages V] "
    "[--buckets N] [--flow-by-flow] [--seed N] [--json]";

constexpr const char* kRunUsage =
    "nest run [place options] [--output-dir DIR] [--force] [--schedule 1f1b|gpipe|interleaved] "
    "[--virtual-stages V] [--buckets N] [--flow-by-flow] [--trace-gzip] [--all-devices] "
    "[--chakra DIR] [--json] "
    "(writes DIR/plan.yaml, DIR/run.h5, DIR/trace.json (.json.gz), DIR/summary.csv)";

replay::Schedule parse_schedule(const std::string& text) {
  if (text == "1f1b") return replay::Schedule::kOneFOneB;
  if (text == "gpipe") return replay::Schedule::kGPipe;
  if (text == "interleaved") return replay::Schedule::kInterleaved;
  throw Error::input(
      "unknown schedule",
      {.key = "--schedule", .value = text, .expected = "1f1b, gpipe or interleaved"});
}

// The replay options as bound to the command line.
struct ReplayArgs {
  std::string schedule = "1f1b";
  int virtual_stages = 2;
  std::optional<int> buckets;  // empty: the job's (--grad-buckets, or the plan's)
  bool flow_by_flow = false;
};

void add_replay_options(Options& o, ReplayArgs& r) {
  o.add("schedule", &r.schedule,
        "pipeline schedule: 1f1b, gpipe or interleaved (1F1B with virtual stages)")
      .add("virtual-stages", &r.virtual_stages,
           "model chunks per device under --schedule interleaved")
      .add("buckets", &r.buckets,
           "data-parallel gradient buckets (reduced as the last backward pass produces them; "
           "default: the plan's, 4 unless --grad-buckets)")
      .add("flow-by-flow", &r.flow_by_flow,
           "simulate every shard's flows and every gradient reduction flow by flow (no shard "
           "planes merged, no reduction timed alone): the reference those shortcuts must equal, "
           "slower");
}

replay::PlanReplayOptions replay_options(const ReplayArgs& r) {
  if (r.buckets && *r.buckets < 1) {
    throw Error::input(
        "bucket count out of range",
        {.key = "--buckets", .value = std::to_string(*r.buckets), .expected = "an integer >= 1"});
  }
  return {.schedule = parse_schedule(r.schedule),
          .virtual_stages = r.virtual_stages,
          .gradient_buckets = r.buckets.value_or(4),
          .merge_shards = !r.flow_by_flow,
          .alone_reductions = !r.flow_by_flow};
}

// The job's gradient reduction (buckets unless --buckets, and whether it runs beside the last
// backward) in the replay, so that it reduces as the plan was priced.
void follow_job(replay::PlanReplayOptions& replay, const ReplayArgs& r, const job::Job& job) {
  const placer::CostOptions& cost = job.search_options().cost;
  if (!r.buckets) replay.gradient_buckets = cost.gradient_buckets;
  replay.overlap_gradient_sync = cost.overlap_gradient_sync;
  replay.overlap_boundary_transfers = cost.overlap_boundary_transfers;
}

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json summary_json(const replay::Summary& s) {
  return {{"iteration_time_s", s.iteration_time.to_seconds()},
          {"estimate_s", s.estimate.to_seconds()},
          {"replay_error",
           s.estimate.ps() > 0
               ? (s.iteration_time.to_seconds() - s.estimate.to_seconds()) / s.estimate.to_seconds()
               : 0.0},
          {"sequences_per_second", s.sequences_per_s},
          {"tokens_per_second", s.tokens_per_s},
          {"mfu", s.model_flops_utilization > 0 ? Json(s.model_flops_utilization) : Json()},
          {"bubble_fraction", s.bubble_fraction},
          {"exposed_communication_s", s.exposed_communication.to_seconds()},
          {"peak_memory_bytes", s.peak_memory.count()}};
}

void print_summary(const replay::Summary& s, const std::vector<std::string>& written) {
  const double est = s.estimate.to_seconds();
  std::cout << fmt::format("iteration (replayed)   {}\n", format_time(s.iteration_time));
  std::cout << fmt::format("estimate (placer)      {}  ({:+.2f}% replayed vs estimate)\n",
                           format_time(s.estimate),
                           est > 0 ? 100 * (s.iteration_time.to_seconds() - est) / est : 0.0);
  std::cout << fmt::format("throughput             {} sequences/s, {} tokens/s\n",
                           format_count(s.sequences_per_s), format_count(s.tokens_per_s));
  if (s.model_flops_utilization > 0) {
    std::cout << fmt::format("MFU                    {}\n",
                             format_percent(s.model_flops_utilization));
  }
  std::cout << fmt::format("bubble                 {} of compute-stream time\n",
                           format_percent(s.bubble_fraction));
  std::cout << fmt::format("exposed communication  {}\n", format_time(s.exposed_communication));
  std::cout << fmt::format("peak memory            {} (largest device)\n",
                           format_bytes(s.peak_memory));
  for (const auto& w : written) std::cout << "wrote " << w << "\n";
}

// Where a replay's files go.
struct Outputs {
  std::string hdf5;
  std::string trace;  // empty: none
  std::string csv;    // empty: none
  io::TraceOptions trace_options;
  std::string chakra;  // a folder of Chakra ET files; empty: none
};

// Whether `path` is `folder` or lies inside it (spelled either way).
bool inside(const fs::path& path, const fs::path& folder) {
  const fs::path p = fs::weakly_canonical(fs::absolute(path));
  const fs::path f = fs::weakly_canonical(fs::absolute(folder));
  auto [a, b] = std::mismatch(f.begin(), f.end(), p.begin(), p.end());
  return a == f.end();
}

// The Chakra ET folder of `run`, written into its staging folder (nest/core/staged_folder.h):
// the folder must be missing or empty, and appears whole at `commit`.
std::unique_ptr<StagedFolder> stage_chakra(const replay::RunRecord& run, const std::string& dir) {
  if (dir.empty()) return nullptr;
  const chakra::Trace trace = chakra::from_run(run);
  auto set = std::make_unique<StagedFolder>(dir, chakra::file_names(trace),
                                            StagedFolder::Options{.key = "--chakra"});
  try {
    chakra::write_files(trace, set->staging());
  } catch (const Error& e) {
    throw set->final_error(e);
  }
  return set;
}

void add_trace_options(Options& o, io::TraceOptions& t) {
  o.add("trace-gzip", &t.gzip, "gzip the trace (Perfetto opens .json.gz as it is)")
      .add("all-devices", &t.all_devices,
           "every device's rows in run.h5 and one trace process per device (default: one "
           "timeline per class of identical devices in run.h5, one trace process per stage "
           "replica, its shards folded)");
}

// Writes the run's files; every one is complete on disk before any is put in place, so a failure
// (a full disk) leaves all of the previous ones. Returns the names written.
// The trace is written and finished on a thread of its own while the HDF5 file is (they read
// the same record and write their own files; only this thread calls HDF5).
std::vector<std::string> write_outputs(const replay::RunRecord& run, const Outputs& out) {
  std::vector<OutputFile> files;
  files.reserve(3);
  files.emplace_back(out.hdf5);
  std::future<void> trace;
  if (!out.trace.empty()) {
    OutputFile& file = files.emplace_back(out.trace);
    trace = std::async(std::launch::async, [&run, &file, &options = out.trace_options] {
      io::write_trace_json(run, file, options);
      file.finish();
    });
  }
  // Whatever throws here, the trace's thread ends before the files it writes go.
  struct Join {
    std::future<void>& trace;
    ~Join() {
      if (trace.valid()) trace.wait();
    }
  } join{trace};
  io::write_hdf5(run, files.front(), {.all_devices = out.trace_options.all_devices});
  files.front().finish();
  if (trace.valid()) trace.get();
  if (!out.csv.empty()) {
    files.emplace_back(out.csv);
    io::write_summary_csv(run.summary, files.back());
  }
  std::unique_ptr<StagedFolder> chakra = stage_chakra(run, out.chakra);
  for (auto& f : files) f.finish();
  std::vector<std::string> written;
  for (auto& f : files) {
    f.commit();
    written.push_back(f.target().string());
  }
  if (chakra) {
    chakra->commit();
    written.push_back(out.chakra);
  }
  return written;
}

// The files a plan's job reads, for `check_outputs`, by the plan key (or option) naming each.
std::vector<NamedPath> plan_inputs(const job::JobSpec& spec, bool topology_given) {
  std::vector<NamedPath> in;
  if (!spec.topology.empty()) {
    in.push_back({topology_given ? "--topology" : "inputs.topology", spec.topology});
  }
  if (!spec.workload.profile.empty()) in.push_back({"inputs.profile", spec.workload.profile});
  if (!spec.workload.model.empty()) in.push_back({"inputs.model", spec.workload.model});
  if (!spec.workload.accelerator.empty()) {
    in.push_back({"inputs.accelerator", spec.workload.accelerator});
  }
  return in;
}

// The one-line warning of a replay whose schedule holds more than the plan's memory check
// assumed (1F1B); the run still succeeds.
void warn_memory(Logger* log, const replay::Summary& s, Bytes capacity) {
  if (s.peak_memory <= capacity) return;
  nest::log(log, LogLevel::kWarn,
            "the replay's peak memory {} exceeds the {} of device memory (the schedule holds more "
            "than the plan's 1F1B check assumed)",
            format_bytes(s.peak_memory), format_bytes(capacity));
}

}  // namespace

int run_simulate(std::span<char* const> args, const Context& context) {
  std::string plan_file;
  Outputs out;
  std::string topology;
  std::optional<std::uint64_t> seed;
  ReplayArgs r;
  bool json = false;
  Options o(kSimulateUsage);
  o.add("plan", &plan_file, "plan file (from nest place -o)")
      .add("output,o", &out.hdf5, "HDF5 file to write")
      .add("trace", &out.trace, "also write a Perfetto/Chrome trace JSON")
      .add("csv", &out.csv, "also write a one-line CSV summary")
      .add("chakra", &out.chakra,
           "also write the iteration as Chakra ET files, one per rank, into this new folder")
      .add("topology", &topology, "replay on this topology (file or name) instead of the plan's",
           "topology")
      .add("seed", &seed, "routing (ECMP) seed (default: the plan's)", "seed")
      .add("json", &json, "print the summary as JSON");
  add_replay_options(o, r);
  add_trace_options(o, out.trace_options);
  LimitArgs limit_args;
  add_limit_options(o, limit_args);
  if (!o.parse(args)) return 0;
  return o.run([&] {
    if (plan_file.empty()) throw Error::input("missing --plan", {.key = "--plan"});
    if (out.hdf5.empty()) throw Error::input("missing --output", {.key = "--output"});
    replay::PlanReplayOptions replay = replay_options(r);
    if (!out.trace.empty()) replay.utilization_links = io::kTraceBusiestLinks;
    job::PlannedJob planned = job::load_plan(
        plan_file, {.topology = topology, .seed = seed, .limits = limits_of(limit_args)}, catalog(),
        context.log);
    follow_job(replay, r, planned.job);
    // An output that would replace an input (or another output) is refused before any work.
    std::vector<NamedPath> inputs = plan_inputs(planned.job.spec(), !topology.empty());
    inputs.push_back({"--plan", plan_file});
    check_outputs(std::vector<NamedPath>{{"--output", out.hdf5},
                                         {"--trace", out.trace},
                                         {"--csv", out.csv},
                                         {"--chakra", out.chakra}},
                  inputs);
    const replay::RunRecord run = [&] {
      try {
        return planned.job.simulate(
            planned.plan,
            {.replay = replay, .command_line = command_line(args), .plan_yaml = slurp(plan_file)});
      } catch (const Error& e) {
        // A stage over memory is the plan's fault: name the plan file.
        if (e.context().key.rfind("partition", 0) == 0) throw e.in_file(plan_file);
        throw;
      }
    }();
    const std::vector<std::string> written = write_outputs(run, out);
    warn_memory(context.log, run.summary, planned.plan.capacity);
    if (json) {
      std::cout << Json{{"summary", summary_json(run.summary)}, {"written", written}}.dump(2)
                << "\n";
      return 0;
    }
    print_summary(run.summary, written);
    return 0;
  });
}

int run_run(std::span<char* const> args, const Context& context) {
  JobArgs a;
  ReplayArgs r;
  std::string output_dir = "run";
  bool force = false;
  bool json = false;
  Options o(kRunUsage);
  io::TraceOptions trace;
  std::string chakra_dir;
  add_job_options(o, a);
  add_replay_options(o, r);
  add_trace_options(o, trace);
  o.add("output-dir", &output_dir, "folder for plan.yaml, run.h5, trace.json and summary.csv")
      .add("force", &force, "replace the run files of an output folder that holds some")
      .add("chakra", &chakra_dir,
           "also write the iteration as Chakra ET files, one per rank, into this new folder")
      .add("json", &json, "print the plan and the replay's summary as JSON");
  if (!o.parse(args)) return 0;
  return o.run([&] {
    replay::PlanReplayOptions replay = replay_options(r);
    replay.utilization_links = io::kTraceBusiestLinks;
    const std::string trace_name = trace.gzip ? "trace.json.gz" : "trace.json";
    if (!chakra_dir.empty() && inside(chakra_dir, output_dir)) {
      // The run's folder holds only files (a sub-folder would block --force later).
      throw Error::input(
          "the Chakra folder is inside the output folder",
          {.key = "--chakra", .value = chakra_dir, .expected = "a folder outside --output-dir"});
    }
    // The set is written into a staging folder beside the output folder and takes its place
    // only when every file is complete (nest/core/staged_folder.h): a failure or an interrupt
    // leaves the folder as it was.
    StagedFolder set(output_dir, {"plan.yaml", "run.h5", trace_name, "summary.csv"},
                     {.replace = force, .key = "--output-dir"});
    const fs::path dir = output_dir;
    const fs::path plan_path = dir / "plan.yaml";
    std::vector<std::string> written = {plan_path.string(), (dir / "run.h5").string(),
                                        (dir / trace_name).string(),
                                        (dir / "summary.csv").string()};
    try {
      Progress progress("nest run", 3);
      job::Job job(job_spec(a), catalog(), context.log);
      follow_job(replay, r, job);
      job.start_baselines();  // beside the search, on the second core
      // The verification keeps its replay of the chosen plan: the run below reuses it.
      job::Placement placed = place(job, {.replay = replay, .keep_replay = true});
      const placer::Plan& plan = placed.plan;
      const placer::Verification* verified = placed.verification ? &*placed.verification : nullptr;
      const std::vector<placer::BaselineResult> baselines = job.baselines();
      progress.advance();
      // Inputs are recorded relative to the plan's final place (the staging folder is its
      // sibling, so the relative paths are the same from both).
      const std::string plan_yaml = job.plan_yaml(plan, baselines, plan_path, verified);
      const replay::RunRecord run = job.simulate(
          placed, {.replay = replay, .command_line = command_line(args), .plan_yaml = plan_yaml});
      progress.advance();
      write_text_atomically(set.path("plan.yaml"), plan_yaml);
      (void)write_outputs(run, {.hdf5 = set.path("run.h5").string(),
                                .trace = set.path(trace_name).string(),
                                .csv = set.path("summary.csv").string(),
                                .trace_options = trace});
      // The Chakra folder is its own set, put in place right after the run's.
      std::unique_ptr<StagedFolder> chakra = stage_chakra(run, chakra_dir);
      set.commit();
      if (chakra) {
        chakra->commit();
        written.push_back(chakra_dir);
      }
      progress.finish();
      warn_memory(context.log, run.summary, plan.capacity);
      if (json) {
        std::cout << Json{{"plan", Json::parse(io::plan_to_json(job.plan_inputs(plan_path), plan,
                                                                baselines, verified))},
                          {"summary", summary_json(run.summary)},
                          {"written", written}}
                         .dump(2)
                  << "\n";
        return 0;
      }
      print_placement(job, plan, baselines, verified);
      std::cout << "\n";
      print_summary(run.summary, written);
      return 0;
    } catch (const Error& e) {
      throw set.final_error(e);  // name the files where they were to be
    }
  });
}

}  // namespace nest::cli
