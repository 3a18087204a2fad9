#pragma once
/// \file
/// Running a study: every point that has no row yet is evaluated (by a `PointEvaluator`, on a
/// pool of threads, and over the ranks of an MPI job when there is one), and each finished row
/// is added to the results table, whose files are rewritten atomically (nest/sweep/table.h).
///
/// Order and determinism: points are *dispatched* largest estimated cost first (ties by point
/// number), so that a long point does not start last and hold up the end; rows are *written* in
/// point order, whatever finished first. A point's row depends only on the study and the
/// evaluator, so the files are the same bytes for any number of threads or ranks, and after any
/// sequence of interruptions and `--resume`s.
///
/// Table columns: `point`, one text column per input (`Study::input_columns`), `status` ("ok",
/// "infeasible" or "error"), `error` (why a point failed or has no plan; empty when ok), then
/// the evaluator's columns. A point whose evaluation throws becomes an "error" row with the
/// message and empty outputs; the sweep goes on.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "nest/core/progress.h"
#include "nest/sweep/study.h"
#include "nest/sweep/table.h"

namespace nest::sweep {

class Cluster;

/// What evaluating one point gave.
struct Outcome {
  std::string status = "ok";  ///< "ok" or "infeasible"
  std::string error;          ///< why infeasible; empty when ok
  std::vector<Cell> cells;    ///< one per `PointEvaluator::columns()`
};

/// Turns a point into its outputs. Implementations must be safe to call from several threads
/// at once (`evaluate` is const and must not touch shared mutable state).
class PointEvaluator {
 public:
  PointEvaluator() = default;
  PointEvaluator(const PointEvaluator&) = delete;
  PointEvaluator& operator=(const PointEvaluator&) = delete;
  virtual ~PointEvaluator() = default;

  /// The output columns, after the inputs, status and error.
  [[nodiscard]] virtual std::vector<Column> columns() const = 0;
  /// Evaluates `point`. Throws `Error` for a point that fails (its row records the message).
  [[nodiscard]] virtual Outcome evaluate(const Point& point) const = 0;
  /// A relative cost estimate that orders the dispatch (larger first). Default 1.
  [[nodiscard]] virtual double cost(const Point& point) const;
};

/// Most evaluation threads per process.
inline constexpr int kMaxThreads = 1024;

/// How to run a sweep.
struct SweepOptions {
  std::filesystem::path output;  ///< folder of results.csv and results.h5 (created if missing)
  bool resume = false;           ///< keep the rows already in `output`, run the others
  bool overwrite = false;        ///< discard rows already in `output`
  int threads = 1;               ///< evaluation threads per process, in [1, kMaxThreads]
  /// Stop after this many new points (as if interrupted there); negative: no limit.
  std::int64_t stop_after = -1;
  Progress::Mode progress = Progress::Mode::kAuto;
  std::FILE* progress_stream = stderr;  ///< not owned
};

/// What a sweep did. On ranks other than 0 only `ranks` and `evaluated` are filled.
struct SweepReport {
  std::size_t points = 0;      ///< points in the study
  std::size_t resumed = 0;     ///< rows that were already in the output
  std::size_t evaluated = 0;   ///< points evaluated by this run (this rank, on ranks > 0)
  std::size_t ok = 0;          ///< rows with status ok (whole table)
  std::size_t infeasible = 0;  ///< rows with status infeasible
  std::size_t failed = 0;      ///< rows with status error
  bool complete = false;       ///< every point has a row
  int ranks = 1;               ///< processes that took part
  /// Rank 0: the points each rank evaluated (one entry per rank); other ranks: their own count.
  std::vector<std::size_t> per_rank;
  std::filesystem::path csv;  ///< the results files
  std::filesystem::path hdf5;
};

/// Throws `Error` (input, key "--threads") unless `threads` is in [1, kMaxThreads].
void validate(const SweepOptions& options);

/// The columns of the results table of `study` evaluated by `evaluator`.
[[nodiscard]] std::vector<Column> results_columns(const Study& study,
                                                  const PointEvaluator& evaluator);

/// Runs the sweep (see the file comment). Without `cluster` (or with a single-process one) it
/// runs in this process; with an MPI cluster every rank must call it with the same study, and
/// rank 0 gathers and writes. Throws `Error` (input) before any work when the output folder
/// holds results and neither `resume` nor `overwrite` is set, when the existing rows do not
/// belong to this study, or when `validate(options)` fails (also when the system refuses a
/// thread); and when the files cannot be written.
SweepReport run_sweep(const Study& study, const PointEvaluator& evaluator,
                      const SweepOptions& options, const Cluster* cluster = nullptr);

}  // namespace nest::sweep
