#pragma once
// The subcommands of `nest`. Each lives in its own cmd_<name>.cc and is listed in commands()
// (main.cc). A command receives its own arguments (args[0] is the command name) and the
// context main made for it, writes its report to stdout (logs go to the context's logger, on
// stderr), and throws nest::Error on bad input.

#include <span>
#include <string_view>
#include <vector>

#include "nest/core/log.h"

namespace nest::job {
class Job;
}
namespace nest::placer {
struct Plan;
struct BaselineResult;
struct Verification;
}  // namespace nest::placer

namespace nest::cli {

/// What main hands every command.
struct Context {
  Logger* log = nullptr;  ///< stderr, at the level of --verbose / --quiet
};

using CommandFn = int (*)(std::span<char* const> args, const Context& context);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFn run;
};

/// `nest profile`: per-layer profile of a model on an accelerator, or of a profile file.
int run_profile(std::span<char* const> args, const Context& context);

/// `nest topology describe|validate FILE`: size, diameter, injection and bisection bandwidth.
int run_topology(std::span<char* const> args, const Context& context);

/// `nest collective`: simulated versus closed-form time of a collective on a topology.
int run_collective(std::span<char* const> args, const Context& context);

/// `nest place`: the NEST search for a workload on a network, with the baselines beside it.
int run_place(std::span<char* const> args, const Context& context);

/// `nest simulate --plan P -o run.h5`: replay a plan file on the network simulator.
int run_simulate(std::span<char* const> args, const Context& context);

/// `nest run`: place, then simulate, in one process, writing everything to one folder.
int run_run(std::span<char* const> args, const Context& context);

/// `nest validate`: the table of checks against published numbers; non-zero on any failure.
int run_validate(std::span<char* const> args, const Context& context);

/// `nest sweep STUDY --output DIR`: what-if studies, one results row per point (MPI-aware).
int run_sweep(std::span<char* const> args, const Context& context);

/// `nest list [KIND]`: the bundled topologies, models, accelerators, profiles and studies.
int run_list(std::span<char* const> args, const Context& context);

/// The text report of a placement (cmd_place.cc), shared by `nest place` and `nest run`.
/// With `verification`, the replayed candidates and the chosen plan's ranks.
void print_placement(const job::Job& job, const placer::Plan& plan,
                     const std::vector<placer::BaselineResult>& baselines,
                     const placer::Verification* verification = nullptr);

}  // namespace nest::cli
