#include <fmt/format.h>

#include <iterator>
#include <set>
#include <string>
#include <utility>

#include "nest/core/atomic_file.h"
#include "nest/io/run_writers.h"

namespace nest::io {
namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;

// Exact microseconds from integer picoseconds ("12.000345"), so the text is reproducible.
std::string micros(Time t) {
  const std::int64_t ps = t.ps();
  const char* sign = ps < 0 ? "-" : "";
  const std::int64_t a = ps < 0 ? -ps : ps;
  return fmt::format("{}{}.{:06d}", sign, a / 1'000'000, a % 1'000'000);
}

}  // namespace

void write_trace_json(const replay::RunRecord& record, OutputFile& out) {
  fmt::memory_buffer text;
  auto to = std::back_inserter(text);
  auto spill = [&] {
    if (text.size() < kChunk) return;
    out.write({text.data(), text.size()});
    text.clear();
  };
  // Track names first: one process per device, one thread per stream.
  std::set<std::pair<std::uint32_t, int>> tracks;
  for (const auto& row : record.timeline) tracks.emplace(row.device, static_cast<int>(row.stream));
  fmt::format_to(to, "{{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
  bool first = true;
  auto sep = [&] {
    if (!first) fmt::format_to(to, ",\n");
    first = false;
  };
  std::uint32_t last_device = UINT32_MAX;
  for (const auto& [device, stream] : tracks) {
    if (device != last_device) {
      sep();
      fmt::format_to(to,
                     "{{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{0},\"args\":{{\"name\":"
                     "\"device {0}\"}}}}",
                     device);
      last_device = device;
    }
    sep();
    fmt::format_to(to,
                   "{{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{},\"tid\":{},\"args\":{{"
                   "\"name\":\"{}\"}}}}",
                   device, stream, to_string(static_cast<replay::Stream>(stream)));
  }
  for (const auto& row : record.timeline) {
    sep();
    fmt::format_to(to,
                   "{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"name\":\"{} mb{}\",\"cat\":\"{}\","
                   "\"ts\":{},\"dur\":{},\"args\":{{\"stage\":{},\"layers\":\"{}-{}\"}}}}",
                   row.device, static_cast<int>(row.stream), to_string(row.kind), row.microbatch,
                   to_string(row.kind), micros(row.start), micros(row.end - row.start), row.stage,
                   row.first_layer, row.last_layer);
    spill();
  }
  fmt::format_to(to, "\n]}}\n");
  out.write({text.data(), text.size()});
}

void write_trace_json(const replay::RunRecord& record, const std::filesystem::path& path) {
  OutputFile out(path);
  write_trace_json(record, out);
  out.commit();
}

std::string summary_csv_header() {
  return "iteration_time_s,estimate_s,estimate_error,sequences_per_s,tokens_per_s,"
         "bubble_fraction,exposed_communication_s,peak_memory_bytes,model_flops_utilization";
}

std::string summary_csv_row(const replay::Summary& s) {
  const double est = s.estimate.to_seconds();
  const double error = est == 0 ? 0.0 : (s.iteration_time.to_seconds() - est) / est;
  return fmt::format("{:.12g},{:.12g},{:.6g},{:.6g},{:.6g},{:.6g},{:.12g},{},{:.6g}",
                     s.iteration_time.to_seconds(), est, error, s.sequences_per_s, s.tokens_per_s,
                     s.bubble_fraction, s.exposed_communication.to_seconds(), s.peak_memory.count(),
                     s.model_flops_utilization);
}

void write_summary_csv(const replay::Summary& summary, OutputFile& out) {
  out.write(summary_csv_header() + "\n" + summary_csv_row(summary) + "\n");
}

void write_summary_csv(const replay::Summary& summary, const std::filesystem::path& path) {
  OutputFile out(path);
  write_summary_csv(summary, out);
  out.commit();
}

}  // namespace nest::io
