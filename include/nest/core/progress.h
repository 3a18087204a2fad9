#pragma once
/// \file
/// A progress reporter: draws a one-line bar with count, rate and time left on a terminal, and
/// stays silent when the stream is not a terminal (pipes, CI logs, files).

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace nest {

/// Reports progress of `total` units of work. Redraws at most ten times a second. Not
/// thread-safe: call from one thread.
class Progress {
 public:
  /// `out` is where to draw (not owned); the bar is drawn only if `out` is a terminal, or
  /// always/never when `force` says so.
  enum class Mode { kAuto, kAlways, kNever };
  Progress(std::string label, std::uint64_t total, std::FILE* out = stderr,
           Mode mode = Mode::kAuto);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  /// Marks `n` more units done.
  void advance(std::uint64_t n = 1);
  /// Draws the final state and ends the line (also done by the destructor).
  void finish();

  [[nodiscard]] std::uint64_t done() const noexcept { return done_; }
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }

 private:
  void draw();

  std::string label_;
  std::uint64_t total_;
  std::uint64_t done_ = 0;
  std::FILE* out_;
  bool enabled_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace nest
