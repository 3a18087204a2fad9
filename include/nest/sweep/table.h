#pragma once
/// \file
/// The results table of a sweep: one row per point, in point order, written as CSV
/// (`results.csv`) and HDF5 (`results.h5`) in the output folder. Both files are rewritten whole
/// after every new row, each to a temporary name renamed over the old one, so that a killed sweep
/// leaves complete files holding every row finished before it; the CSV is the record `--resume`
/// reads back.
///
/// CSV: a header line of column names, then one line per row; RFC 4180 quoting (fields with a
/// comma, a quote or a line break are quoted, quotes doubled). Integers in decimal; reals in the
/// shortest form that reads back to the same double (so a row read and written again is the
/// same text); a missing value is an empty field.
///
/// HDF5: dataset `/results`, a packed compound of one member per column, one element per row:
/// int64 for integer columns, float64 for real ones, a variable-length UTF-8 string for text
/// ones — except an input column (an axis) whose every value in the study is a plain integer
/// (`devices`, `seed`), a plain number (`spine_oversubscription`) or a quantity of one kind
/// (`topology.nic_bandwidth: 50 GB/s`), which is stored as a number: int64, float64, or the
/// quantity in its SI unit (B as int64, s and B/s as float64) with a `<column>.unit` attribute.
/// A missing integer is -1, a missing real NaN, a missing text "". Attributes of `/results`:
/// `<column>.unit` for columns with a unit; of the root group: `study_name`, `study_file`,
/// `tool_version` (UTF-8 strings); dataset `/study_text`: the study file's text (a scalar UTF-8
/// string, of any size). Object time tracking is off, so the same rows give the same bytes.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "nest/io/hdf5_table.h"

namespace nest::sweep {

/// The type of a column.
enum class ColumnType : std::uint8_t { kInt, kReal, kText };

/// One column of the results table.
struct Column {
  std::string name;
  ColumnType type = ColumnType::kText;
  std::string unit;  ///< e.g. "s", "B", "1/s"; empty when none
  /// How results.h5 stores a text column: kText, or kInt / kReal for an axis whose values are
  /// numbers (then `unit` is the SI unit of a quantity, or empty). Ignored for other columns.
  ColumnType hdf5 = ColumnType::kText;
  friend bool operator==(const Column&, const Column&) = default;
};

/// The text column `name` of an axis whose values are `values` (every value the study gives
/// it; empty ones are missing), stored in results.h5 as a number when they all are one: plain
/// integers as int64, plain numbers as float64, else sizes in B (int64), durations in s or rates
/// in B/s (float64). Otherwise the column stays text.
[[nodiscard]] Column axis_column(std::string name, const std::vector<std::string>& values);

/// A cell: missing, an integer, a real or a text. A missing text is the empty text.
using Cell = std::variant<std::monostate, std::int64_t, double, std::string>;

/// One row: the point it belongs to and one cell per column (the first column is the point).
struct Row {
  std::size_t point = 0;
  std::vector<Cell> cells;
  friend bool operator==(const Row&, const Row&) = default;
};

/// The rows of a sweep, kept sorted by point, and their files.
class ResultsTable {
 public:
  /// A table of `columns`; the first must be the integer column "point".
  /// Throws `Error` (internal) otherwise.
  explicit ResultsTable(std::vector<Column> columns);

  [[nodiscard]] const std::vector<Column>& columns() const noexcept { return columns_; }
  /// Rows by point.
  [[nodiscard]] const std::map<std::size_t, Row>& rows() const noexcept { return rows_; }
  [[nodiscard]] bool contains(std::size_t point) const { return rows_.count(point) != 0; }

  /// Adds (or replaces) the row of `row.point`. Throws `Error` (internal) when the cells do not
  /// fit the columns (count, or a cell of the wrong type).
  void insert(Row row);

  /// The CSV header line (no newline).
  [[nodiscard]] std::string csv_header() const;
  /// One row as a CSV line (no newline).
  [[nodiscard]] std::string csv_line(const Row& row) const;
  /// Parses a CSV line of this table into a row. Throws `Error` (input) naming `file` and
  /// `line` when the fields do not fit the columns.
  [[nodiscard]] Row parse_csv_line(std::string_view text, const std::string& file = {},
                                   int line = 0) const;
  /// The whole CSV text: header and rows in point order, each line ending in '\n'.
  [[nodiscard]] std::string csv() const;

  /// Writes `csv_path` atomically. O(rows · columns).
  void write_csv(const std::filesystem::path& csv_path) const;
  /// Writes `h5_path` atomically with `texts` in the root group (attributes, or datasets for
  /// whole-file texts), in that order. Throws `Error` (input) naming the file when it cannot be
  /// written.
  void write_hdf5(const std::filesystem::path& h5_path,
                  const std::vector<io::TableText>& texts) const;

  /// Reads the rows of a CSV file written by `write_csv` for the same columns. Throws `Error`
  /// (input) naming the file and line when the header differs or a line does not parse.
  void read_csv(const std::filesystem::path& csv_path);

 private:
  std::vector<Column> columns_;
  std::map<std::size_t, Row> rows_;
};

/// Splits one CSV line into fields (RFC 4180 quoting). Throws `Error` (input) on an unclosed
/// quote or text after a closing quote.
[[nodiscard]] std::vector<std::string> split_csv_line(std::string_view line);

/// Quotes a field when it holds a comma, a quote or a line break.
[[nodiscard]] std::string csv_field(std::string_view text);

/// The shortest decimal text that reads back as exactly `value` (finite values only).
[[nodiscard]] std::string format_real(double value);

}  // namespace nest::sweep
