// `nest sweep STUDY --output DIR`: runs a what-if study (nest/sweep/study.h) and writes
// DIR/results.csv and DIR/results.h5. Under `mpirun -np N` the ranks share the points and rank 0
// writes the same files a single process would.

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/error.h"
#include "nest/sweep/cluster.h"
#include "nest/sweep/evaluate.h"
#include "nest/sweep/runner.h"
#include "nest/sweep/study.h"

namespace nest::cli {

int run_sweep(std::span<char* const> args) {
  po::options_description options("options");
  options.add_options()("study", po::value<std::string>()->required(), "the study file (YAML)")(
      "output,o", po::value<std::string>()->required(),
      "folder for results.csv and results.h5 (created if missing)")(
      "resume", po::bool_switch(), "keep the rows already in the output folder, run the rest")(
      "force", po::bool_switch(), "discard the rows already in the output folder")(
      "threads,j", po::value<int>()->default_value(1), "evaluation threads per process")(
      "stop-after", po::value<long long>()->default_value(-1),
      "stop after this many new points, as if interrupted (for chunked runs)")(
      "progress", po::value<std::string>()->default_value("auto"),
      "progress bar on stderr: auto (on a terminal), always or never")(
      "dry-run", po::bool_switch(), "read and expand the study, list its points, run nothing");
  add_limit_options(options);
  po::positional_options_description positional;
  positional.add("study", 1);
  po::variables_map vm;
  if (!parse_options(
          args,
          "nest sweep STUDY --output DIR [--resume|--force] [--threads N] "
          "[--stop-after N] [--progress auto|always|never] [--dry-run] [--max-input-size SIZE] "
          "[--max-memory SIZE]",
          options, positional, vm)) {
    return 0;
  }
  const std::string progress = vm["progress"].as<std::string>();
  if (progress != "auto" && progress != "always" && progress != "never") {
    throw Error::input(
        "unknown progress mode",
        {.key = "--progress", .value = progress, .expected = "auto, always or never"});
  }
  if (vm["resume"].as<bool>() && vm["force"].as<bool>()) {
    throw Error::input("--resume and --force exclude each other",
                       {.key = "--resume", .expected = "one of them"});
  }

  // MPI first: every rank reads the study and loads the workloads itself (the same bytes give
  // the same points everywhere), so nothing but rows crosses the network.
  const sweep::Cluster cluster;
  const auto start = std::chrono::steady_clock::now();
  const sweep::Study study = sweep::load_study(vm["study"].as<std::string>(), limits_of(vm));
  if (vm["dry-run"].as<bool>()) {
    if (cluster.rank() != 0) return 0;
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
  o.output = vm["output"].as<std::string>();
  o.resume = vm["resume"].as<bool>();
  o.overwrite = vm["force"].as<bool>();
  o.threads = vm["threads"].as<int>();
  sweep::validate(o);
  o.stop_after = vm["stop-after"].as<long long>();
  o.progress = progress == "always"  ? Progress::Mode::kAlways
               : progress == "never" ? Progress::Mode::kNever
                                     : Progress::Mode::kAuto;
  if (cluster.rank() != 0) o.progress = Progress::Mode::kNever;
  const sweep::SweepReport r = sweep::run_sweep(study, evaluator, o, &cluster);
  if (cluster.rank() != 0) return 0;

  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
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

}  // namespace nest::cli
