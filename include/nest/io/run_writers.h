#pragma once
/// \file
/// Writers for a replayed iteration (`replay::RunRecord`): HDF5 (the schema is in README.md,
/// "HDF5 output"), Perfetto/Chrome trace JSON and a one-line CSV summary. Each writer comes in
/// two forms: into an `OutputFile` that the caller commits (so that several files can be
/// written completely before any of them is put in place), and to a path (written and committed
/// at once, nest/core/atomic_file.h). The same record gives the same bytes (no wall-clock
/// timestamps, fixed object order, HDF5 object time tracking off). Every writer throws `Error`
/// (input) naming the file when the file system refuses it (a full disk included).

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "nest/core/atomic_file.h"
#include "nest/replay/run_record.h"

namespace nest::io {

/// How to write a run's HDF5 file.
struct Hdf5Options {
  /// Every device's rows in /timeline and /memory/trace; false: the rows of one device per
  /// timeline class (devices whose timeline and memory rows are equal but for the device id),
  /// the others named in /timeline_classes.
  bool all_devices = false;
};

/// Writes `record` as HDF5 into `out`. The file is built in memory (about its own size) and
/// written at the end.
void write_hdf5(const replay::RunRecord& record, OutputFile& out, const Hdf5Options& options = {});
/// Writes `record` as HDF5 to `path`.
void write_hdf5(const replay::RunRecord& record, const std::filesystem::path& path,
                const Hdf5Options& options = {});

/// The timeline class of every device with rows in `record` (its timeline and memory rows
/// sorted by device, as `replay::replay` leaves them): (device, representative) by device,
/// where the representative is the lowest device whose timeline and memory rows equal this
/// device's field by field (the device id aside). Exact: classes are found by comparing rows,
/// not assumed from the plan. O(rows) expected (rows are hashed, equal hashes compared).
[[nodiscard]] std::vector<std::pair<std::uint32_t, std::uint32_t>> timeline_classes(
    const replay::RunRecord& record);

/// How many of the busiest links a trace of `nest simulate --trace` and `nest run` shows as
/// utilization counters (`replay::PlanReplayOptions::utilization_links`).
inline constexpr int kTraceBusiestLinks = 8;

/// How to write a trace.
struct TraceOptions {
  /// One process per device instead of one per stage replica (whose shards compute in
  /// lockstep, so one of them stands for all).
  bool all_devices = false;
  /// Gzip the JSON (Perfetto opens .json.gz as it is). Deterministic: the gzip header holds no
  /// name and a zero time.
  bool gzip = false;
};

/// Writes a Chrome/Perfetto trace (open in ui.perfetto.dev) into `out`, as README.md "Trace
/// output" describes: one process per stage replica (or per device), in stage order, with its
/// compute stream and network lanes; a complete event per timeline row, a flow from each
/// transfer to the compute that waits for it, memory counters per process and the utilization
/// of `record.link_series`' links. Timestamps are microseconds with picosecond digits.
void write_trace_json(const replay::RunRecord& record, OutputFile& out,
                      const TraceOptions& options = {});
/// Writes the trace of `record` to `path`.
void write_trace_json(const replay::RunRecord& record, const std::filesystem::path& path,
                      const TraceOptions& options = {});

/// The header line of the summary CSV (no newline).
[[nodiscard]] std::string summary_csv_header();
/// The summary as one CSV line (no newline), columns as in `summary_csv_header()`.
[[nodiscard]] std::string summary_csv_row(const replay::Summary& summary);
/// Writes header + row into `out`.
void write_summary_csv(const replay::Summary& summary, OutputFile& out);
/// Writes header + row to `path`.
void write_summary_csv(const replay::Summary& summary, const std::filesystem::path& path);

}  // namespace nest::io
