#pragma once
// Option parsing shared by the subcommands: Boost.Program_options with its errors turned into
// nest::Error (exit status 2) that name the option.

#include <boost/program_options.hpp>
#include <span>
#include <string>
#include <vector>

#include "nest/config/limits.h"

namespace nest::cli {

namespace po = boost::program_options;

/// Parses `args` (args[0] is the command name) against `options` and `positional`; `--help`
/// is added and answered by printing `usage` and the options (returns false then).
/// Folders that may hold `workloads/` and `topologies/`: $NEST_HOME, the working directory and
/// the two folders above the executable (build trees live inside the source tree).
std::vector<std::string> search_roots();

/// A topology path, or the name of a file in `topologies/` of a search root ("h100_rail_1024").
/// Throws `Error` (input, key "--topology") when neither exists.
std::string find_topology(const std::string& name);

/// Adds `--max-input-size SIZE` and `--max-memory SIZE` (nest/config/limits.h) to a command
/// that reads input files or builds topologies.
void add_limit_options(po::options_description& options);

/// The limits given by `add_limit_options`' options, the defaults for those not given. Throws
/// `Error` (input, key the option) for a size that is not a positive size with a unit.
[[nodiscard]] config::Limits limits_of(const po::variables_map& vm);

bool parse_options(std::span<char* const> args, const std::string& usage,
                   po::options_description& options,
                   const po::positional_options_description& positional, po::variables_map& vm);

}  // namespace nest::cli
