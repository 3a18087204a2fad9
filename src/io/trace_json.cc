// The Perfetto / Chrome trace-event JSON of a replayed iteration (the format: README.md, "Trace
// output"), and the one-line CSV summary.
//
// Layout: one process per stage replica (its shards compute in lockstep, so the first shard's
// rows stand for all of them and the process name lists the devices), or one per device with
// `all_devices`; processes in stage order (pid and process_sort_index). Each process has the
// compute stream (tid 0) and as many network lanes (tid 1, 2, ...) as it has transfers in
// flight at once, since slices on one thread must nest. A transfer's slice and the compute
// slice that waits for it are joined by a flow (v2: bind_id with flow_out / flow_in). Counter
// tracks: memory per process (bytes per category and their total) and the utilization of the
// busiest links (`RunRecord::link_series`) in a last "network" process.

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/io/run_writers.h"

namespace nest::io {
namespace {

using replay::RunRecord;
using replay::Stream;
using replay::TaskKind;
using replay::TimelineRow;

constexpr std::size_t kChunk = std::size_t{1} << 16;

// Whole nanoseconds of a time, rounded half up: Perfetto's resolution. Slice boundaries are
// rounded once each, so slices that meet in picoseconds meet in the trace (a duration is the
// difference of two rounded times, never rounded on its own).
std::int64_t nanos(Time t) {
  const std::int64_t ps = t.ps();
  return ps >= 0 ? (ps + 500) / 1000 : -((-ps + 499) / 1000);
}

// Microseconds from whole nanoseconds, trailing zeros dropped ("12.000345" is not possible,
// "12.345", "5"), so the text is reproducible and short.
std::string micros(std::int64_t ns) {
  const char* sign = ns < 0 ? "-" : "";
  const std::int64_t a = ns < 0 ? -ns : ns;
  std::int64_t frac = a % 1000;
  if (frac == 0) return fmt::format("{}{}", sign, a / 1000);
  int digits = 3;
  while (frac % 10 == 0) {
    frac /= 10;
    --digits;
  }
  return fmt::format("{}{}.{:0{}d}", sign, a / 1000, frac, digits);
}
std::string micros(Time t) { return micros(nanos(t)); }

// A JSON string's content (names come from topology files).
std::string escaped(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out;
}

// "0-7", "0,8,16", "0-3,8-11": the devices of a process, runs of consecutive ids joined.
std::string device_ranges(const std::vector<std::uint32_t>& devices) {
  std::string out;
  for (std::size_t i = 0; i < devices.size();) {
    std::size_t j = i;
    while (j + 1 < devices.size() && devices[j + 1] == devices[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j == i ? fmt::format("{}", devices[i]) : fmt::format("{}-{}", devices[i], devices[j]);
    i = j + 1;
  }
  return out;
}

// Where the text goes: straight into the file, or through a gzip stream (zlib's gzip header
// has no name and a zero time, so the same text gives the same bytes).
class Sink {
 public:
  Sink(OutputFile& out, bool gzip) : out_(out), gzip_(gzip) {
    if (!gzip_) return;
    // 15 + 16: a gzip wrapper around a 32 KiB-window deflate stream; level 6 is zlib's default.
    if (deflateInit2(&z_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
      throw Error::internal("deflateInit2 failed");
    }
    open_ = true;
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;
  ~Sink() {
    if (open_) deflateEnd(&z_);
  }

  void write(std::string_view text) {
    if (!gzip_) {
      out_.write(text);
      return;
    }
    deflate_all(text, Z_NO_FLUSH);
  }

  void finish() {
    if (!gzip_) return;
    deflate_all({}, Z_FINISH);
    deflateEnd(&z_);
    open_ = false;
  }

 private:
  void deflate_all(std::string_view text, int flush) {
    z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
    z_.avail_in = static_cast<uInt>(text.size());
    int status = Z_OK;
    do {
      z_.next_out = reinterpret_cast<Bytef*>(buffer_.data());
      z_.avail_out = static_cast<uInt>(buffer_.size());
      status = deflate(&z_, flush);
      if (status == Z_STREAM_ERROR) throw Error::internal("deflate failed");
      out_.write({buffer_.data(), buffer_.size() - z_.avail_out});
    } while (z_.avail_out == 0 || (flush == Z_FINISH && status != Z_STREAM_END));
  }

  OutputFile& out_;
  bool gzip_;
  bool open_ = false;
  z_stream z_{};
  std::vector<char> buffer_ = std::vector<char>(kChunk);
};

// One process of the trace: the device whose rows it shows and the devices it stands for.
struct Process {
  int pid = 0;
  std::uint32_t device = 0;
  std::string name;
};

// Where each device of the placement sits, and which (stage, replica) holds it.
struct Seat {
  std::size_t replica_index = 0;  // index into RunRecord::placement
  std::size_t shard = 0;
};

class TraceWriter {
 public:
  TraceWriter(const RunRecord& record, const TraceOptions& options, Sink& sink)
      : r_(record), options_(options), sink_(sink) {}

  void write() {
    layout();
    assign_lanes();
    link_flows();
    emit("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    metadata();
    slices();
    memory_counters();
    link_counters();
    emit("\n]}\n");
    flush(true);
  }

 private:
  void layout() {
    for (std::size_t i = 0; i < r_.placement.size(); ++i) {
      const replay::StageReplica& s = r_.placement[i];
      for (std::size_t k = 0; k < s.devices.size(); ++k) seats_[s.devices[k]] = {i, k};
      if (!options_.all_devices) {
        const bool one = s.devices.size() == 1;
        add_process(s.devices.front(),
                    fmt::format("stage {} replica {}: device{} {}", s.stage, s.replica,
                                one ? "" : "s", device_ranges(s.devices)));
        continue;
      }
      for (std::size_t k = 0; k < s.devices.size(); ++k) {
        add_process(s.devices[k], fmt::format("device {}: stage {} replica {} shard {}",
                                              s.devices[k], s.stage, s.replica, k));
      }
    }
    // Devices the placement does not list (a hand-made record) get a process each, last.
    for (const TimelineRow& row : r_.timeline) {
      if (!seats_.contains(row.device) && !pid_of_.contains(row.device)) {
        add_process(row.device, fmt::format("device {}", row.device));
      }
    }
  }

  void add_process(std::uint32_t device, std::string name) {
    const int pid = static_cast<int>(processes_.size()) + 1;
    processes_.push_back({pid, device, std::move(name)});
    pid_of_[device] = pid;
  }

  // The rows shown: those of each process's device (the timeline is sorted by device, then
  // start). Network rows get the first lane free at their start.
  void assign_lanes() {
    std::map<std::uint32_t, std::vector<Time>> lane_ends;
    for (std::size_t i = 0; i < r_.timeline.size(); ++i) {
      const TimelineRow& row = r_.timeline[i];
      if (!pid_of_.contains(row.device)) continue;
      shown_.push_back(i);
      if (row.stream == Stream::kCompute) {
        tid_.push_back(0);
        continue;
      }
      std::vector<Time>& ends = lane_ends[row.device];
      std::size_t lane = 0;
      while (lane < ends.size() && ends[lane] > row.start) ++lane;
      if (lane == ends.size()) ends.push_back(row.end);
      ends[lane] = row.end;
      tid_.push_back(static_cast<int>(lane) + 1);
    }
    for (const auto& [device, ends] : lane_ends) lanes_[device] = static_cast<int>(ends.size());
  }

  // A flow from each transfer to the compute slice that waits for it: the forward of the next
  // stage (activations) or the backward of the previous one (gradients), same microbatch and
  // replica, the shard's counterpart.
  void link_flows() {
    std::map<std::tuple<std::uint32_t, std::int32_t, std::int32_t, bool>, std::size_t> consumers;
    for (std::size_t j = 0; j < shown_.size(); ++j) {
      const TimelineRow& row = r_.timeline[shown_[j]];
      if (row.kind == TaskKind::kForward || row.kind == TaskKind::kBackward) {
        consumers.emplace(
            std::tuple{row.device, row.stage, row.microbatch, row.kind == TaskKind::kForward}, j);
      }
    }
    flow_.assign(shown_.size(), {0, false});
    std::uint64_t next = 1;
    for (std::size_t j = 0; j < shown_.size(); ++j) {
      const TimelineRow& row = r_.timeline[shown_[j]];
      const bool forward = row.kind == TaskKind::kSendActivation;
      if (!forward && row.kind != TaskKind::kSendGradient) continue;
      const auto seat = seats_.find(row.device);
      const std::int32_t to_stage = row.stage + (forward ? 1 : -1);
      if (seat == seats_.end() || to_stage < 0 ||
          static_cast<std::size_t>(to_stage) >= r_.stages.size()) {
        continue;
      }
      const replay::StageReplica& from = r_.placement[seat->second.replica_index];
      const auto to_group = r_.stages[static_cast<std::size_t>(to_stage)].device_group;
      const replay::StageReplica* to = nullptr;
      for (const replay::StageReplica& s : r_.placement) {
        if (s.stage == to_group && s.replica == from.replica) to = &s;
      }
      if (to == nullptr || seat->second.shard >= to->devices.size()) continue;
      const std::uint32_t receiver = to->devices[seat->second.shard];
      const auto c = consumers.find({receiver, to_stage, row.microbatch, forward});
      if (c == consumers.end() || flow_[c->second].first != 0) continue;
      flow_[j] = {next, true};
      flow_[c->second] = {next, false};
      ++next;
    }
  }

  void metadata() {
    for (const Process& p : processes_) {
      event(fmt::format(
          "{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_name\",\"args\":{{\"name\":\"{1}\"}}}}",
          p.pid, escaped(p.name)));
      event(
          fmt::format("{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_sort_index\",\"args\":{{"
                      "\"sort_index\":{0}}}}}",
                      p.pid));
      thread_name(p.pid, 0, "compute");
      const auto lanes = lanes_.find(p.device);
      const int n = lanes == lanes_.end() ? 0 : lanes->second;
      for (int lane = 1; lane <= n; ++lane) {
        thread_name(p.pid, lane,
                    lane == 1 ? std::string("network") : fmt::format("network {}", lane));
      }
    }
    if (!r_.link_series.empty()) {
      const int pid = network_pid();
      event(
          fmt::format("{{\"ph\":\"M\",\"pid\":{},\"name\":\"process_name\",\"args\":{{\"name\":"
                      "\"network: the {} busiest links\"}}}}",
                      pid, r_.link_series.size()));
      event(
          fmt::format("{{\"ph\":\"M\",\"pid\":{0},\"name\":\"process_sort_index\",\"args\":{{"
                      "\"sort_index\":{0}}}}}",
                      pid));
    }
  }

  void thread_name(int pid, int tid, const std::string& name) {
    event(
        fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_name\",\"args\":{{"
                    "\"name\":\"{}\"}}}}",
                    pid, tid, name));
    event(
        fmt::format("{{\"ph\":\"M\",\"pid\":{},\"tid\":{},\"name\":\"thread_sort_index\","
                    "\"args\":{{\"sort_index\":{}}}}}",
                    pid, tid, tid));
  }

  int network_pid() const { return static_cast<int>(processes_.size()) + 1; }

  void slices() {
    for (std::size_t j = 0; j < shown_.size(); ++j) {
      const TimelineRow& row = r_.timeline[shown_[j]];
      std::string name = to_string(row.kind);
      if (row.microbatch >= 0) name += fmt::format(" mb{}", row.microbatch);
      std::string flow;
      if (flow_[j].first != 0) {
        flow = fmt::format(",\"bind_id\":{},\"{}\":true", flow_[j].first,
                           flow_[j].second ? "flow_out" : "flow_in");
      }
      event(
          fmt::format("{{\"ph\":\"X\",\"pid\":{},\"tid\":{},\"ts\":{},\"dur\":{},\"name\":\"{}\""
                      "{},\"args\":{{\"stage\":{},\"layers\":\"{}-{}\"}}}}",
                      pid_of_.at(row.device), tid_[j], micros(row.start),
                      micros(nanos(row.end) - nanos(row.start)), name, flow, row.stage,
                      row.first_layer, row.last_layer));
    }
  }

  // Per process: the four categories and their total at time 0, then the activations and the
  // total at each change (the last level of a nanosecond, so each track's times increase).
  void memory_counters() {
    const auto& m = r_.memory;  // sorted by device, then time
    for (std::size_t i = 0; i < m.size();) {
      const std::uint32_t device = m[i].device;
      const auto pid = pid_of_.find(device);
      std::int64_t level[4] = {0, 0, 0, 0};
      std::int64_t shown = -1;  // the activations last written
      bool first = true;
      while (i < m.size() && m[i].device == device) {
        const std::int64_t at = nanos(m[i].at);
        for (; i < m.size() && m[i].device == device && nanos(m[i].at) == at; ++i) {
          level[static_cast<int>(m[i].category)] = m[i].bytes.count();
        }
        if (pid == pid_of_.end()) continue;
        const std::int64_t total = level[0] + level[1] + level[2] + level[3];
        if (!first && level[3] == shown) continue;  // the constant categories do not change
        shown = level[3];
        if (first) {
          event(
              fmt::format("{{\"ph\":\"C\",\"pid\":{},\"ts\":{},\"name\":\"memory\",\"args\":{{"
                          "\"weights\":{},\"gradients\":{},\"optimizer\":{},\"activations\":{},"
                          "\"total\":{}}}}}",
                          pid->second, micros(at), level[0], level[1], level[2], level[3], total));
          first = false;
          continue;
        }
        event(
            fmt::format("{{\"ph\":\"C\",\"pid\":{},\"ts\":{},\"name\":\"memory\",\"args\":{{"
                        "\"activations\":{},\"total\":{}}}}}",
                        pid->second, micros(at), level[3], total));
      }
    }
  }

  std::string node_name(std::uint32_t id) const {
    return id < r_.topology.nodes.size() ? escaped(r_.topology.nodes[id].name)
                                         : fmt::format("node {}", id);
  }

  void link_counters() {
    const int pid = network_pid();
    for (const replay::LinkSeries& s : r_.link_series) {
      const std::string name = fmt::format("{} -> {}", node_name(s.src), node_name(s.dst));
      for (std::size_t i = 0; i < s.points.size(); ++i) {
        // Several changes in one nanosecond: the last holds from then on.
        if (i + 1 < s.points.size() && nanos(s.points[i + 1].at) == nanos(s.points[i].at)) {
          continue;
        }
        event(
            fmt::format("{{\"ph\":\"C\",\"pid\":{},\"ts\":{},\"name\":\"{}\",\"args\":{{"
                        "\"utilization\":{:.6g}}}}}",
                        pid, micros(s.points[i].at), name, s.points[i].utilization));
      }
    }
  }

  void event(std::string_view text) {
    if (!first_) emit(",\n");
    first_ = false;
    emit(text);
    flush(false);
  }
  void emit(std::string_view text) { text_.append(text.data(), text.data() + text.size()); }
  void flush(bool all) {
    if (!all && text_.size() < kChunk) return;
    sink_.write({text_.data(), text_.size()});
    text_.clear();
  }

  const RunRecord& r_;
  TraceOptions options_;
  Sink& sink_;
  std::vector<Process> processes_;
  std::map<std::uint32_t, int> pid_of_;  // shown device -> its process
  std::map<std::uint32_t, Seat> seats_;
  std::map<std::uint32_t, int> lanes_;                // shown device -> network lanes
  std::vector<std::size_t> shown_;                    // timeline rows shown, in timeline order
  std::vector<int> tid_;                              // per shown row
  std::vector<std::pair<std::uint64_t, bool>> flow_;  // per shown row: (bind id, out)
  fmt::memory_buffer text_;
  bool first_ = true;
};

}  // namespace

void write_trace_json(const replay::RunRecord& record, OutputFile& out,
                      const TraceOptions& options) {
  Sink sink(out, options.gzip);
  TraceWriter(record, options, sink).write();
  sink.finish();
}

void write_trace_json(const replay::RunRecord& record, const std::filesystem::path& path,
                      const TraceOptions& options) {
  OutputFile out(path);
  write_trace_json(record, out, options);
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
