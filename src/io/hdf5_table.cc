#include "nest/io/hdf5_table.h"

#include <fmt/format.h>

#include <cstring>

#include "io/hdf5.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"

namespace nest::io {
namespace {

std::size_t rows_of(const ColumnValues& values) {
  return std::visit([](const auto& v) { return v.size(); }, values);
}

}  // namespace

void write_table_hdf5(const std::filesystem::path& path, const std::string& dataset,
                      const std::vector<TableColumn>& columns,
                      const std::vector<TableText>& texts) {
  // Every member is 8 bytes in memory (int64, double or char*), so a row is 8·columns bytes.
  constexpr std::size_t kSlot = 8;
  static_assert(sizeof(char*) == kSlot && sizeof(double) == kSlot);
  const std::size_t rows = columns.empty() ? 0 : rows_of(columns.front().values);
  for (const TableColumn& c : columns) {
    if (rows_of(c.values) != rows) {
      throw Error::internal(
          fmt::format("column {} has {} values for {} rows", c.name, rows_of(c.values), rows));
    }
  }
  const std::size_t row_size = kSlot * columns.size();
  OutputFile out(path);
  try {
    h5::MemoryFile file;
    h5::Id text = h5::utf8_type();
    h5::Id memory(H5Tcreate(H5T_COMPOUND, row_size), H5Tclose, "H5Tcreate");
    std::vector<unsigned char> buffer(row_size * rows);
    for (std::size_t c = 0; c < columns.size(); ++c) {
      const ColumnValues& values = columns[c].values;
      hid_t type = text.get();
      if (std::holds_alternative<std::vector<std::int64_t>>(values)) type = H5T_NATIVE_INT64;
      if (std::holds_alternative<std::vector<double>>(values)) type = H5T_NATIVE_DOUBLE;
      h5::check(H5Tinsert(memory.get(), columns[c].name.c_str(), c * kSlot, type), "H5Tinsert");
      for (std::size_t r = 0; r < rows; ++r) {
        unsigned char* slot = buffer.data() + r * row_size + c * kSlot;
        std::visit(
            [&](const auto& v) {
              if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::vector<std::string>>) {
                const char* p = v[r].c_str();
                std::memcpy(slot, &p, kSlot);
              } else {
                std::memcpy(slot, &v[r], kSlot);
              }
            },
            values);
      }
    }
    h5::Id ds =
        h5::table_dataset(file.get(), ("/" + dataset).c_str(), memory.get(), rows, buffer.data());
    for (const TableColumn& c : columns) {
      if (!c.unit.empty()) h5::string_attribute(ds.get(), c.name + ".unit", c.unit);
    }
    ds.close();
    memory.close();
    text.close();
    for (const TableText& t : texts) {
      if (t.dataset) {
        h5::text_dataset(file.get(), ("/" + t.name).c_str(), t.value);
      } else {
        h5::string_attribute(file.get(), t.name, t.value);
      }
    }
    file.write_to(out);
  } catch (const Error& e) {
    throw e.in_file(path.string());
  }
  out.commit();
}

}  // namespace nest::io
