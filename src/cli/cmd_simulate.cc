// `nest simulate` (replay a plan file) and `nest run` (place, then simulate, in one).

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/options.h"
#include "nest/core/error.h"
#include "nest/core/progress.h"
#include "nest/core/unit_parse.h"
#include "nest/io/plan_file.h"
#include "nest/io/run_writers.h"
#include "nest/job/plan_inputs.h"
#include "nest/replay/plan_replay.h"
#include "nest/topo/loader.h"

namespace nest::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kSimulateUsage =
    "nest simulate --plan plan.yaml -o run.h5 [--trace run.json] [--csv run.csv] "
    "[--topology FILE] [--schedule 1f1b|gpipe|interleaved] [--virtual-stages V] [--buckets N] "
    "[--seed N]";

constexpr const char* kRunUsage =
    "nest run [place options] [--output-dir DIR] [--schedule 1f1b|gpipe|interleaved] "
    "[--virtual-stages V] [--buckets N] "
    "(writes DIR/plan.yaml, DIR/run.h5, DIR/trace.json, DIR/summary.csv)";

// FNV-1a 64 of a file's bytes, in hex: identifies the inputs in /meta.
std::string file_hash(const std::string& path) {
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

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

replay::Schedule parse_schedule(const std::string& text) {
  if (text == "1f1b") return replay::Schedule::kOneFOneB;
  if (text == "gpipe") return replay::Schedule::kGPipe;
  if (text == "interleaved") return replay::Schedule::kInterleaved;
  throw Error::input(
      "unknown schedule",
      {.key = "--schedule", .value = text, .expected = "1f1b, gpipe or interleaved"});
}

struct SimulateRequest {
  std::string plan;
  std::string output;
  std::optional<std::string> trace;
  std::optional<std::string> csv;
  std::optional<std::string> topology;  // overrides the plan's
  replay::PlanReplayOptions replay;
  std::string command_line;
};

void add_replay_options(po::options_description& o) {
  o.add_options()("schedule", po::value<std::string>()->default_value("1f1b"),
                  "pipeline schedule: 1f1b, gpipe or interleaved (1F1B with virtual stages)")(
      "virtual-stages", po::value<int>()->default_value(2),
      "model chunks per device under --schedule interleaved")(
      "buckets", po::value<int>()->default_value(4),
      "data-parallel gradient buckets (reduced as the last backward pass produces them)");
}

void read_replay_options(const po::variables_map& vm, SimulateRequest& r) {
  r.replay.schedule = parse_schedule(vm["schedule"].as<std::string>());
  r.replay.gradient_buckets = vm["buckets"].as<int>();
  r.replay.virtual_stages = vm["virtual-stages"].as<int>();
  if (r.replay.gradient_buckets < 1) {
    throw Error::input("bucket count out of range",
                       {.key = "--buckets",
                        .value = std::to_string(r.replay.gradient_buckets),
                        .expected = "an integer >= 1"});
  }
}

std::string command_line(std::span<char* const> args) {
  std::string s = "nest";
  for (char* a : args) s += std::string(" ") + a;
  return s;
}

void print_summary(const replay::Summary& s, Bytes capacity,
                   const std::vector<std::string>& written) {
  const double est = s.estimate.to_seconds();
  std::cout << fmt::format("iteration (replayed)   {}\n", format_time(s.iteration_time));
  std::cout << fmt::format("estimate (placer)      {}  ({:+.2f}% replayed vs estimate)\n",
                           format_time(s.estimate),
                           est > 0 ? 100 * (s.iteration_time.to_seconds() - est) / est : 0.0);
  std::cout << fmt::format("throughput             {:.4g} sequences/s, {:.4g} tokens/s\n",
                           s.sequences_per_s, s.tokens_per_s);
  if (s.model_flops_utilization > 0) {
    std::cout << fmt::format("MFU                    {:.1f}%\n", 100 * s.model_flops_utilization);
  }
  std::cout << fmt::format("bubble                 {:.1f}% of compute-stream time\n",
                           100 * s.bubble_fraction);
  std::cout << fmt::format("exposed communication  {}\n", format_time(s.exposed_communication));
  std::cout << fmt::format("peak memory            {} (largest device)\n",
                           format_bytes(s.peak_memory));
  if (s.peak_memory > capacity) {
    // The plan's memory check assumed its own schedule (1F1B); another may hold more.
    std::cout << fmt::format("warning                the peak exceeds the {} of device memory\n",
                             format_bytes(capacity));
  }
  for (const auto& w : written) std::cout << "wrote " << w << "\n";
}

int simulate(const SimulateRequest& req, Progress* progress) {
  const io::PlanRecord record = io::read_plan_file(req.plan);
  const fs::path plan_path(req.plan);
  const workload::LayerProfile profile = job::load_plan_profile(record, plan_path);
  std::string topology_path;
  if (req.topology) {
    topology_path = find_topology(*req.topology);
  } else if (!record.inputs.topology.empty()) {
    topology_path = job::resolve_plan_path(record.inputs.topology, plan_path, "inputs.topology");
  } else {
    throw Error::input("the plan names no topology to replay on",
                       {.file = req.plan,
                        .key = "inputs.topology",
                        .expected = "a plan made with --topology, or --topology here"});
  }
  const topo::Topology topology = topo::load_topology(topology_path);
  if (topology.num_devices() < static_cast<std::size_t>(record.inputs.devices)) {
    throw Error::input(fmt::format("the plan needs {} devices, the topology has {}",
                                   record.inputs.devices, topology.num_devices()),
                       {.file = topology_path, .key = "devices"});
  }
  const auto comm = job::make_comm_cost(record.inputs, &topology);
  const placer::Plan plan = job::evaluate_record(record, profile, *comm);
  if (!plan.fits()) {
    for (std::size_t s = 0; s < plan.stages.size(); ++s) {
      if (plan.stages[s].fits(plan.capacity)) continue;
      throw Error::input(
          fmt::format("stage {} needs {} per device, more than the {} of memory", s,
                      format_bytes(plan.stages[s].memory.total()), format_bytes(plan.capacity)),
          {.file = req.plan, .key = fmt::format("partition[{}]", s)});
    }
  }
  if (progress != nullptr) progress->advance();

  replay::RunRecord run = replay::replay_plan(plan, profile, topology, req.replay);
  run.meta.tool_version = NEST_VERSION;
  run.meta.command_line = req.command_line;
  run.meta.plan_yaml = slurp(req.plan);
  std::vector<std::string> inputs = {req.plan, topology_path};
  for (const auto* p : {&record.inputs.profile, &record.inputs.model, &record.inputs.accelerator}) {
    if (!p->empty()) inputs.push_back(job::resolve_plan_path(*p, plan_path, "inputs"));
  }
  for (const auto& p : inputs) run.meta.inputs.emplace_back(p, file_hash(p));
  if (progress != nullptr) progress->advance();

  std::vector<std::string> written;
  io::write_hdf5(run, req.output);
  written.push_back(req.output);
  if (req.trace) {
    io::write_trace_json(run, *req.trace);
    written.push_back(*req.trace);
  }
  if (req.csv) {
    io::write_summary_csv(run.summary, *req.csv);
    written.push_back(*req.csv);
  }
  if (progress != nullptr) progress->finish();
  print_summary(run.summary, plan.capacity, written);
  return 0;
}

}  // namespace

int run_simulate(std::span<char* const> args) {
  po::options_description o("options");
  o.add_options()("plan", po::value<std::string>()->required(), "plan file (from nest place -o)")(
      "output,o", po::value<std::string>()->required(), "HDF5 file to write")(
      "trace", po::value<std::string>(), "also write a Perfetto/Chrome trace JSON")(
      "csv", po::value<std::string>(), "also write a one-line CSV summary")(
      "topology", po::value<std::string>(), "replay on this topology instead of the plan's")(
      "seed", po::value<std::uint64_t>()->default_value(0), "ECMP seed of the transfers");
  add_replay_options(o);
  po::variables_map vm;
  if (!parse_options(args, kSimulateUsage, o, {}, vm)) return 0;
  SimulateRequest req;
  req.plan = vm["plan"].as<std::string>();
  req.output = vm["output"].as<std::string>();
  if (vm.count("trace")) req.trace = vm["trace"].as<std::string>();
  if (vm.count("csv")) req.csv = vm["csv"].as<std::string>();
  if (vm.count("topology")) req.topology = vm["topology"].as<std::string>();
  read_replay_options(vm, req);
  req.replay.seed = vm["seed"].as<std::uint64_t>();
  req.command_line = command_line(args);
  return simulate(req, nullptr);
}

int run_run(std::span<char* const> args) {
  // Options of `run` itself; everything else goes to `nest place`.
  po::options_description o("options of run (the others are nest place's)");
  o.add_options()("output-dir", po::value<std::string>()->default_value("run"),
                  "folder for plan.yaml, run.h5, trace.json and summary.csv")("help,h",
                                                                              "show this help");
  add_replay_options(o);
  po::variables_map vm;
  std::vector<std::string> rest;
  try {
    const auto parsed = po::command_line_parser(static_cast<int>(args.size()), args.data())
                            .options(o)
                            .allow_unregistered()
                            .run();
    rest = po::collect_unrecognized(parsed.options, po::include_positional);
    po::store(parsed, vm);
    po::notify(vm);
  } catch (const po::error& e) {
    throw Error::input(e.what(), {.key = "run", .expected = std::string("usage: ") + kRunUsage});
  }
  if (vm.count("help") != 0) {
    std::cout << "usage: " << kRunUsage << "\n\n" << o << "\n";
    return 0;
  }
  for (const auto& r : rest) {
    if (r == "-o" || r == "--output" || r.rfind("--output=", 0) == 0 || r == "--json") {
      throw Error::input("option not available in nest run",
                         {.key = r, .expected = "--output-dir (run writes plan.yaml there)"});
    }
  }
  SimulateRequest req;
  read_replay_options(vm, req);
  const fs::path dir = vm["output-dir"].as<std::string>();
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error::input("cannot create the output folder: " + ec.message(),
                       {.key = "--output-dir", .value = dir.string()});
  }
  // A run that fails leaves no folder of its own behind (nor, by the writers, any file).
  struct RemoveIfEmpty {
    fs::path dir;
    bool armed;
    ~RemoveIfEmpty() {
      std::error_code ignored;
      if (armed && fs::is_empty(dir, ignored)) fs::remove(dir, ignored);
    }
  } cleanup{dir, !existed};
  req.plan = (dir / "plan.yaml").string();
  req.output = (dir / "run.h5").string();
  req.trace = (dir / "trace.json").string();
  req.csv = (dir / "summary.csv").string();
  req.command_line = command_line(args);

  Progress progress("nest run", 3);
  std::vector<std::string> place_args = {"place"};
  place_args.insert(place_args.end(), rest.begin(), rest.end());
  place_args.push_back("-o");
  place_args.push_back(req.plan);
  std::vector<char*> argv;
  for (auto& a : place_args) argv.push_back(a.data());
  const int status = run_place(argv);
  if (status != 0) return status;
  progress.advance();
  std::cout << "\n";
  return simulate(req, &progress);
}

}  // namespace nest::cli
