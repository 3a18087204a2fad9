#pragma once
// Option parsing for the subcommands, in one style: every option is bound once to the variable
// it fills (with its default being that variable's value), and may name the library field it
// stands for, so that an error the library raises about that field ("devices",
// "workload.model", "tensor_parallel") reaches the user under the option's name ("--devices").
// Boost.Program_options does the parsing behind this interface (options.cc only), so the
// command files do not compile it.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nest/config/limits.h"
#include "nest/core/catalog.h"
#include "nest/core/error.h"
#include "nest/core/units.h"

namespace nest::cli {

/// The options of one command.
class Options {
 public:
  /// `usage` is the synopsis printed by `--help` and in parse errors.
  explicit Options(std::string usage);
  ~Options();
  Options(const Options&) = delete;
  Options& operator=(const Options&) = delete;

  /// Binds `--name` (a ",x" suffix adds a one-letter form: "output,o") to `out`. Types: flags
  /// (bool, no argument), text, integers, floating point, and the unit types (parsed as NEST
  /// parses them everywhere: "50 GB/s", "5 us", "1 GiB"); an optional stays empty unless given.
  /// `field` names the library field the option answers for (see `translate`).
  template <typename T>
  Options& add(const char* name, T* out, const char* help, std::string field = {});

  /// Binds the next positional argument to `out` (required unless `required` is false).
  Options& positional(const char* name, std::string* out, const char* help, bool required = true);

  /// Parses `args` (args[0] is the command name). Returns false when `--help` was answered.
  /// Throws `Error` (input, key: the option) on an unknown option, a missing value or a value
  /// of the wrong type or unit.
  [[nodiscard]] bool parse(std::span<char* const> args);
  /// True when the user gave `name` (not just its default).
  [[nodiscard]] bool given(std::string_view name) const;

  /// `e` with the option's name as its key when `e` is about a field bound here and names no
  /// file (errors in files keep their file, line and key).
  [[nodiscard]] Error translate(const Error& e) const;
  /// Runs `body`, translating the errors it throws.
  int run(const std::function<int()>& body) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The data catalog of the command line: the standard roots (nest/core/catalog.h).
[[nodiscard]] Catalog catalog();

/// A topology path, or the name of a file in `topologies/` of a catalog root. Throws `Error`
/// (input, key `key`) when neither exists.
[[nodiscard]] std::string find_topology(const std::string& name,
                                        const std::string& key = "--topology");

/// "nest <args...>", for the metadata of output files.
[[nodiscard]] std::string command_line(std::span<char* const> args);

/// The input limits a command takes (`--max-input-size`, `--max-memory`; nest/config/limits.h).
struct LimitArgs {
  std::optional<Bytes> max_input;
  std::optional<Bytes> max_memory;
};

/// Adds `--max-input-size SIZE` and `--max-memory SIZE` to a command that reads input files or
/// builds topologies.
void add_limit_options(Options& options, LimitArgs& args);

/// The limits given, the defaults for those not given. Throws `Error` (input, key the option)
/// for a size that is not positive.
[[nodiscard]] config::Limits limits_of(const LimitArgs& args);

}  // namespace nest::cli
