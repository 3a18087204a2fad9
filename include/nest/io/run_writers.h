#pragma once
/// \file
/// Writers for a replayed iteration (`replay::RunRecord`): HDF5 (the schema is in README.md,
/// "HDF5 output"), Perfetto/Chrome trace JSON and a one-line CSV summary. Every writer writes to
/// a temporary name and renames when complete, and writes the same bytes for the same record
/// (no wall-clock timestamps, fixed object order, HDF5 object time tracking off).

#include <filesystem>
#include <string>

#include "nest/replay/run_record.h"

namespace nest::io {

/// Writes `record` as HDF5 to `path`. Throws `Error` (input) when `path` cannot be written.
void write_hdf5(const replay::RunRecord& record, const std::filesystem::path& path);

/// Writes a Chrome/Perfetto trace (open in ui.perfetto.dev): one process per device, one thread
/// per stream, a complete event per timeline row; timestamps in microseconds.
void write_trace_json(const replay::RunRecord& record, const std::filesystem::path& path);

/// The header line of the summary CSV (no newline).
[[nodiscard]] std::string summary_csv_header();
/// The summary as one CSV line (no newline), columns as in `summary_csv_header()`.
[[nodiscard]] std::string summary_csv_row(const replay::Summary& summary);
/// Writes header + row to `path`.
void write_summary_csv(const replay::Summary& summary, const std::filesystem::path& path);

}  // namespace nest::io
