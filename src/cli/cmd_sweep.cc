// `nest sweep STUDY --output DIR`: runs a what-if study (nest/sweep/study.h) and writes
// DIR/results.csv and DIR/results.h5. Under `mpirun -np N` the ranks share the points and rank 0
// writes the same files a single process would.

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/error.h"
#include "nest/sweep/cluster.h"
#include "nest/sweep/evaluate.h"
#include "nest/sweep/runner.h"
#include "nest/sweep/study.h"

namespace nest::cli {

namespace {

int sweep_unchecked(const std::string& study_file, const std::string& output, bool resume,
                    bool force, int threads, std::int64_t stop_after, const std::string& progress,
                    bool dry_run, bool json, const config::Limits& limits) {
  if (output.empty() && !dry_run) throw Error::input("missing --output", {.key = "--output"});
  if (progress != "auto" && progress != "always" && progress != "never") {
    throw Error::input(
        "unknown progress mode",
        {.key = "--progress", .value = progress, .expected = "auto, always or never"});
  }
  if (resume && force) {
    throw Error::input("--resume and --force exclude each other",
                       {.key = "--resume", .expected = "one of them"});
  }
  // MPI first: every rank reads the study and loads the workloads itself (the same bytes give
  // the same points everywhere), so nothing but rows crosses the network.
  const sweep::Cluster cluster;
  const auto start = std::chrono::steady_clock::now();
  const sweep::Study study =
      sweep::load_study(catalog().find(DataKind::kStudy, study_file, "study"), limits);
  if (dry_run) {
    if (cluster.rank() != 0) return 0;
    if (json) {
      nlohmann::ordered_json points = nlohmann::ordered_json::array();
      for (const auto& p : study.points) {
        nlohmann::ordered_json point = {{"point", p.index}};
        for (std::size_t c = 0; c < study.input_columns.size(); ++c) {
          point[study.input_columns[c]] = p.inputs[c];
        }
        points.push_back(std::move(point));
      }
      std::cout << nlohmann::ordered_json{{"study", study.name}, {"points", points}}.dump(2)
                << "\n";
      return 0;
    }
    std::cout << fmt::format("study {}: {} points\n", study.name, study.points.size());
    std::string header = "point";
    for (const auto& c : study.input_columns) header += "," + c;
    std::cout << header << "\n";
    for (const auto& p : study.points) {
      std::string line = std::to_string(p.index);
      for (const auto& v : p.inputs) line += "," + v;
      std::cout << line << "\n";
    }
    return 0;
  }
  const sweep::StudyEvaluator evaluator(study);

  sweep::SweepOptions o;
  o.output = output;
  o.resume = resume;
  o.overwrite = force;
  o.threads = threads;
  sweep::validate(o);
  o.stop_after = stop_after;
  o.progress = progress == "always"  ? Progress::Mode::kAlways
               : progress == "never" ? Progress::Mode::kNever
                                     : Progress::Mode::kAuto;
  if (cluster.rank() != 0) o.progress = Progress::Mode::kNever;
  const sweep::SweepReport r = sweep::run_sweep(study, evaluator, o, &cluster);
  if (cluster.rank() != 0) return 0;

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (json) {
    std::cout << nlohmann::ordered_json{{"study", study.name},
                                        {"points", r.points},
                                        {"resumed", r.resumed},
                                        {"evaluated", r.evaluated},
                                        {"ranks", r.ranks},
                                        {"threads", o.threads},
                                        {"points_per_rank", r.per_rank},
                                        {"ok", r.ok},
                                        {"infeasible", r.infeasible},
                                        {"failed", r.failed},
                                        {"complete", r.complete},
                                        {"wall_s", seconds},
                                        {"written", {r.csv.string(), r.hdf5.string()}}}
                     .dump(2)
              << "\n";
    return 0;
  }
  std::cout << fmt::format(
      "sweep {}: {} points, {} resumed, {} evaluated on {} process{} x {} thread{} in {:.1f} s\n",
      study.name, r.points, r.resumed, r.evaluated, r.ranks, r.ranks == 1 ? "" : "es", o.threads,
      o.threads == 1 ? "" : "s", seconds);
  if (r.ranks > 1) {
    std::string split;
    for (std::size_t k = 0; k < r.per_rank.size(); ++k) {
      split += fmt::format("{}rank {}: {}", k ? ", " : "", k, r.per_rank[k]);
    }
    std::cout << "points per rank: " << split << "\n";
  }
  std::cout << fmt::format("rows: {} ok, {} infeasible, {} error{}\n", r.ok, r.infeasible, r.failed,
                           r.complete ? "" : " (incomplete: --resume continues)");
  std::cout << "wrote " << r.csv.string() << " and " << r.hdf5.string() << "\n";
  return 0;
}

}  // namespace

int run_sweep(std::span<char* const> args, const Context&) {
  std::string study_file;
  std::string output;
  bool resume = false;
  bool force = false;
  int threads = 1;
  std::int64_t stop_after = -1;
  std::string progress = "auto";
  bool dry_run = false;
  bool json = false;
  Options options(
      "nest sweep STUDY --output DIR [--resume|--force] [--threads N] [--stop-after N] "
      "[--progress auto|always|never] [--dry-run] [--json] [--max-input-size SIZE] "
      "[--max-memory SIZE]");
  options.positional("study", &study_file, "the study file (YAML) or name (studies/)")
      .add("output,o", &output, "folder for results.csv and results.h5 (created if missing)")
      .add("resume", &resume, "keep the rows already in the output folder, run the rest")
      .add("force", &force, "discard the rows already in the output folder")
      .add("threads,j", &threads, "evaluation threads per process", "threads")
      .add("stop-after", &stop_after,
           "stop after this many new points, as if interrupted (for chunked runs)")
      .add("progress", &progress, "progress bar on stderr: auto (on a terminal), always or never")
      .add("dry-run", &dry_run, "read and expand the study, list its points, run nothing")
      .add("json", &json, "print the report (or the points of --dry-run) as JSON");
  LimitArgs limit_args;
  add_limit_options(options, limit_args);
  if (!options.parse(args)) return 0;
  return options.run([&] {
    return sweep_unchecked(study_file, output, resume, force, threads, stop_after, progress,
                           dry_run, json, limits_of(limit_args));
  });
}

}  // namespace nest::cli
