#pragma once
/// \file
/// A table as an HDF5 file (the writer behind a sweep's `results.h5`, nest/sweep/table.h):
/// one dataset, a packed compound of one member per column (int64, float64 or a
/// variable-length UTF-8 string), one element per row; a `<column>.unit` attribute on the
/// dataset for each column with a unit; texts beside it in the root group. Written atomically
/// (nest/core/atomic_file.h), with object time tracking off, so the same table gives the same
/// bytes. HDF5 itself stays private to the io module.

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

namespace nest::io {

/// The values of one column, one per row.
using ColumnValues =
    std::variant<std::vector<std::int64_t>, std::vector<double>, std::vector<std::string>>;

/// One column of a table.
struct TableColumn {
  std::string name;
  std::string unit;  ///< the attribute `<name>.unit` when not empty
  ColumnValues values;
};

/// A text of the root group: a short one (a name, a version) as a string attribute, a whole
/// file's text (which can pass HDF5's 64 KiB attribute limit) as a scalar string dataset.
struct TableText {
  std::string name;
  std::string value;
  bool dataset = false;
};

/// Writes `path` atomically: the dataset `/<dataset>` holding `columns`, then `texts` in the
/// root group, in order. Throws `Error` (input) naming `path` when the file system refuses the
/// file; `Error` (internal) when the columns differ in length or HDF5 refuses a value.
void write_table_hdf5(const std::filesystem::path& path, const std::string& dataset,
                      const std::vector<TableColumn>& columns, const std::vector<TableText>& texts);

}  // namespace nest::io
