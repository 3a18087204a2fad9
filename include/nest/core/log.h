#pragma once
/// \file
/// Logging without a global logger: library code that has something to say (phases and their
/// timings, oracle simulations, warnings) writes to a `Logger` it was handed, or to nothing. The
/// command-line front implements it with spdlog on stderr (`nest --verbose` / `--quiet`); the
/// Python module and C++ users pass their own or none. Library code never prints by itself.

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace nest {

/// Severity, lowest first: debug = every oracle simulation and cache decision, info = phases and
/// their timings, warn = something the user should look at (the run still succeeds).
enum class LogLevel : unsigned char { kDebug, kInfo, kWarn };

/// A sink for log lines. Implementations must be safe to call from several threads at once
/// when they are shared between threads (sweeps evaluate points in parallel).
class Logger {
 public:
  Logger() = default;
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;
  virtual ~Logger() = default;

  /// True when lines of `level` are written (callers skip formatting otherwise).
  [[nodiscard]] virtual bool enabled(LogLevel level) const noexcept = 0;
  /// Writes one line (no trailing newline in `line`).
  virtual void write(LogLevel level, std::string_view line) = 0;
};

/// Formats and writes one line to `log` when it is non-null and `level` is enabled.
template <typename... Args>
void log(Logger* log, LogLevel level, fmt::format_string<Args...> format, Args&&... args) {
  if (log == nullptr || !log->enabled(level)) return;
  log->write(level, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace nest
