#pragma once
// The subcommands of `nest`. Each lives in its own cmd_<name>.cc and is listed in kCommands
// (main.cc). A command receives its own arguments (argv[0] is the command name), writes its
// report to stdout, and throws nest::Error on bad input.

#include <span>
#include <string_view>

namespace nest::cli {

using CommandFn = int (*)(std::span<char* const> args);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFn run;
};

/// `nest profile`: per-layer profile of a model on an accelerator, or of a profile file.
int run_profile(std::span<char* const> args);

/// `nest topology describe|validate FILE`: size, diameter, injection and bisection bandwidth.
int run_topology(std::span<char* const> args);

/// `nest collective`: simulated versus closed-form time of a collective on a topology.
int run_collective(std::span<char* const> args);

/// `nest place`: the NEST search for a workload on a network, with the baselines beside it.
int run_place(std::span<char* const> args);

/// `nest simulate --plan P -o run.h5`: replay a plan file on the network simulator.
int run_simulate(std::span<char* const> args);

/// `nest run`: `nest place` then `nest simulate`, writing everything to one folder.
int run_run(std::span<char* const> args);

/// `nest validate`: the table of checks against published numbers; non-zero on any failure.
int run_validate(std::span<char* const> args);

/// `nest sweep STUDY --output DIR`: what-if studies, one results row per point (MPI-aware).
int run_sweep(std::span<char* const> args);

}  // namespace nest::cli
