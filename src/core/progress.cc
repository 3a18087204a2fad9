#include "nest/core/progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

namespace nest {

Progress::Progress(std::string label, std::uint64_t total, std::FILE* out, Mode mode)
    : label_(std::move(label)),
      total_(total),
      out_(out),
      enabled_(mode == Mode::kAlways || (mode == Mode::kAuto && isatty(fileno(out)) != 0)),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() { finish(); }

void Progress::advance(std::uint64_t n) {
  done_ += n;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_) return;
  last_draw_ = now;
  draw();
}

void Progress::finish() {
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  draw();
  std::fputc('\n', out_);
  std::fflush(out_);
}

void Progress::draw() {
  constexpr int kWidth = 30;
  const double fraction =
      total_ == 0 ? 1.0 : std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  const int filled = static_cast<int>(fraction * kWidth);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = elapsed > 0 ? static_cast<double>(done_) / elapsed : 0.0;
  const double left = rate > 0 ? static_cast<double>(total_ - std::min(done_, total_)) / rate : 0;
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') +
                          std::string(static_cast<std::size_t>(kWidth - filled), '.');
  fmt::print(out_, "\r{} [{}] {}/{} {:.1f}/s {:.0f}s left  ", label_, bar, done_, total_, rate,
             left);
  std::fflush(out_);
}

}  // namespace nest
