// `nest`: the command-line front of libnest. Parses the subcommand and the global options, runs
// the command, and is the only place that turns a nest::Error into a message and an exit status
// (2 for bad input, 1 for an internal failure).

#include <fmt/format.h>
#include <malloc.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "nest/core/error.h"
#include "nest/core/log.h"
#include "nest/core/temporaries.h"

namespace {

// The command line's logger: spdlog on stderr, so that stdout carries only the report.
class StderrLogger final : public nest::Logger {
 public:
  StderrLogger() : logger_(spdlog::stderr_color_mt("nest")) {
    logger_->set_pattern("%^%l%$: %v");
    logger_->set_level(spdlog::level::warn);
  }
  void set_level(nest::LogLevel level) { logger_->set_level(to_spdlog(level)); }
  void silence_warnings() { logger_->set_level(spdlog::level::err); }
  [[nodiscard]] bool enabled(nest::LogLevel level) const noexcept override {
    return logger_->should_log(to_spdlog(level));
  }
  void write(nest::LogLevel level, std::string_view line) override {
    logger_->log(to_spdlog(level), "{}", line);
  }

 private:
  static spdlog::level::level_enum to_spdlog(nest::LogLevel level) {
    switch (level) {
      case nest::LogLevel::kDebug:
        return spdlog::level::debug;
      case nest::LogLevel::kInfo:
        return spdlog::level::info;
      case nest::LogLevel::kWarn:
        return spdlog::level::warn;
    }
    return spdlog::level::warn;
  }
  std::shared_ptr<spdlog::logger> logger_;
};

// Writes one error line with a single write. std::cerr is unbuffered and writes each `<<` on its
// own, so under mpirun two ranks' messages interleaved mid-line ("nest " + the other rank's line +
// "sweep: ..."), which broke the MPI sweep test in CI.
void print_error(const std::string& line) {
  const std::string text = line + "\n";
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

// The table of subcommands, in the order `nest --help` lists them.
const std::vector<nest::cli::Command>& commands() {
  static const std::vector<nest::cli::Command> kCommands = {
      {"topology", "describe or validate a topology file", nest::cli::run_topology},
      {"collective", "simulate a collective and compare it with its closed form",
       nest::cli::run_collective},
      {"profile", "per-layer time, memory and collectives of a workload", nest::cli::run_profile},
      {"place", "choose the parallel degrees, partition and devices of a training job",
       nest::cli::run_place},
      {"simulate", "replay a plan for one iteration: timelines, memory and links to HDF5",
       nest::cli::run_simulate},
      {"run", "place, then simulate, in one (the main job)", nest::cli::run_run},
      {"sweep", "run a what-if study: one results row per point (CSV + HDF5)",
       nest::cli::run_sweep},
      {"validate", "check NEST against published numbers (one table)", nest::cli::run_validate},
      {"list", "list the bundled topologies, models, accelerators, profiles and studies",
       nest::cli::run_list},
  };
  return kCommands;
}

void print_usage() {
  std::cout << "nest " << NEST_VERSION
            << ": network- and memory-aware placement of distributed training\n\n"
               "usage: nest [--verbose|--debug|--quiet] <command> [options]\n\n"
               "  --verbose, -v  log phases and their timings to stderr\n"
               "  --debug        also log the collective oracle's work\n"
               "  --quiet, -q    log errors only (no warnings)\n\ncommands:\n";
  for (const auto& c : commands()) std::cout << fmt::format("  {:<12}{}\n", c.name, c.summary);
  std::cout << "\n`nest <command> --help` shows the options of a command.\n";
}

}  // namespace

int main(int argc, char** argv) {
  // glibc raises its mmap threshold after each large free (up to 32 MiB), after which large
  // short-lived blocks come from the brk heap and can fragment it. A placer search once
  // allocated a simulator's link table per simulation (3 MiB, 4,438 times in a Mixtral search on
  // 4,096 GPUs) and reached 13.6 GB of RSS for 0.3 GB live; the oracle now keeps one simulator
  // and resets it (that search: 74 MB without this setting, 65 MB with it). The fixed threshold
  // stays as a guard for other large short-lived buffers.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // SIGINT, SIGTERM and SIGHUP remove the output temporaries before the process ends by the
  // signal (exit status 130, 143, 129); a file-size limit becomes an error naming the file.
  nest::install_interrupt_cleanup();
  StderrLogger logger;
  const nest::cli::Context context{.log = &logger};

  std::vector<char*> args(argv + 1, argv + argc);
  while (!args.empty() && args.front()[0] == '-') {
    const std::string flag = args.front();
    if (flag == "--verbose" || flag == "-v") {
      logger.set_level(nest::LogLevel::kInfo);
    } else if (flag == "--debug") {
      logger.set_level(nest::LogLevel::kDebug);
    } else if (flag == "--quiet" || flag == "-q") {
      logger.silence_warnings();
    } else if (flag == "--help" || flag == "-h") {
      print_usage();
      return 0;
    } else if (flag == "--version") {
      std::cout << "nest " << NEST_VERSION << "\n";
      return 0;
    } else {
      print_error(fmt::format(
          "nest: unknown option \"{}\" (expected --verbose, --debug, --quiet, --help, --version "
          "or a command)",
          flag));
      return 2;
    }
    args.erase(args.begin());
  }
  if (args.empty()) {
    print_usage();
    return 2;
  }
  for (const auto& c : commands()) {
    if (c.name != args.front()) continue;
    try {
      return c.run(args, context);
    } catch (const nest::Error& e) {
      print_error(fmt::format("nest {}: {}", c.name, e.what()));
      return e.exit_status();
    } catch (const std::exception& e) {
      print_error(
          fmt::format("nest {}: internal error: {}", c.name, nest::printable(e.what(), 512)));
      return 1;
    }
  }
  std::string names;
  for (const auto& c : commands()) {
    names += ' ';
    names += c.name;
  }
  print_error(
      fmt::format("nest: unknown command \"{}\" (expected one of:{})", args.front(), names));
  return 2;
}
