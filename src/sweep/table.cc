#include "nest/sweep/table.h"

#include <H5Cpp.h>
#include <fmt/format.h>
#include <hdf5.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "nest/core/atomic_file.h"
#include "nest/core/error.h"

namespace nest::sweep {
namespace {

constexpr std::int64_t kMissingInt = -1;

const char* type_name(ColumnType type) {
  switch (type) {
    case ColumnType::kInt:
      return "an integer";
    case ColumnType::kReal:
      return "a number";
    case ColumnType::kText:
      return "a text";
  }
  return "?";
}

bool fits(const Cell& cell, ColumnType type) {
  if (std::holds_alternative<std::monostate>(cell)) return true;
  switch (type) {
    case ColumnType::kInt:
      return std::holds_alternative<std::int64_t>(cell);
    case ColumnType::kReal:
      return std::holds_alternative<double>(cell) && std::isfinite(std::get<double>(cell));
    case ColumnType::kText: {
      if (!std::holds_alternative<std::string>(cell)) return false;
      const auto& s = std::get<std::string>(cell);
      return s.find_first_of("\r\n") == std::string::npos;
    }
  }
  return false;
}

H5::DSetCreatPropList no_times() {
  H5::DSetCreatPropList p;
  H5Pset_obj_track_times(p.getId(), false);
  return p;
}

void string_attr(H5::H5Object& obj, const std::string& name, const std::string& value) {
  const H5::StrType type(H5::PredType::C_S1, value.empty() ? 1 : value.size());
  obj.createAttribute(name, type, H5::DataSpace(H5S_SCALAR)).write(type, value.c_str());
}

}  // namespace

std::string format_real(double value) { return fmt::format("{}", value); }

std::string csv_field(std::string_view text) {
  if (text.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(text);
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  std::size_t i = 0;
  while (true) {
    field.clear();
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) {
          throw Error::input("unclosed quote in CSV line", {.expected = "RFC 4180 quoting"});
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',') {
        throw Error::input("text after a closing quote in CSV line",
                           {.expected = "RFC 4180 quoting"});
      }
    } else {
      while (i < line.size() && line[i] != ',') field += line[i++];
    }
    fields.push_back(field);
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return fields;
}

ResultsTable::ResultsTable(std::vector<Column> columns) : columns_(std::move(columns)) {
  if (columns_.empty() || columns_.front().name != "point" ||
      columns_.front().type != ColumnType::kInt) {
    throw Error::internal("a results table starts with the integer column \"point\"");
  }
}

void ResultsTable::insert(Row row) {
  if (row.cells.size() != columns_.size()) {
    throw Error::internal(fmt::format("row of point {} has {} cells for {} columns", row.point,
                                      row.cells.size(), columns_.size()));
  }
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    if (!fits(row.cells[c], columns_[c].type)) {
      throw Error::internal(fmt::format("row of point {}: column {} needs {} on one line",
                                        row.point, columns_[c].name, type_name(columns_[c].type)));
    }
  }
  if (row.cells.front() != Cell(static_cast<std::int64_t>(row.point))) {
    throw Error::internal(fmt::format("row of point {} has another point number", row.point));
  }
  const std::size_t point = row.point;
  rows_.insert_or_assign(point, std::move(row));
}

std::string ResultsTable::csv_header() const {
  std::string out;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    out += (c ? "," : "") + csv_field(columns_[c].name);
  }
  return out;
}

std::string ResultsTable::csv_line(const Row& row) const {
  std::string out;
  for (std::size_t c = 0; c < row.cells.size(); ++c) {
    if (c) out += ',';
    const Cell& cell = row.cells[c];
    if (const auto* i = std::get_if<std::int64_t>(&cell)) {
      out += std::to_string(*i);
    } else if (const auto* d = std::get_if<double>(&cell)) {
      out += format_real(*d);
    } else if (const auto* s = std::get_if<std::string>(&cell)) {
      out += csv_field(*s);
    }
  }
  return out;
}

Row ResultsTable::parse_csv_line(std::string_view text, const std::string& file, int line) const {
  std::vector<std::string> fields;
  try {
    fields = split_csv_line(text);
  } catch (const Error& e) {
    throw e.in_file(file, line);
  }
  if (fields.size() != columns_.size()) {
    throw Error::input(fmt::format("{} fields for {} columns", fields.size(), columns_.size()),
                       {.file = file, .line = line, .expected = "a row of this study's table"});
  }
  Row row;
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const std::string& f = fields[c];
    const Column& column = columns_[c];
    if (column.type == ColumnType::kText) {
      row.cells.emplace_back(f);
      continue;
    }
    if (f.empty()) {
      row.cells.emplace_back(std::monostate{});
      continue;
    }
    const char* end = f.data() + f.size();
    bool ok = false;
    if (column.type == ColumnType::kInt) {
      std::int64_t v = 0;
      const auto r = std::from_chars(f.data(), end, v);
      ok = r.ec == std::errc{} && r.ptr == end;
      row.cells.emplace_back(v);
    } else {
      double v = 0;
      const auto r = std::from_chars(f.data(), end, v);
      ok = r.ec == std::errc{} && r.ptr == end && std::isfinite(v);
      row.cells.emplace_back(v);
    }
    if (!ok) {
      throw Error::input("malformed field", {.file = file,
                                             .line = line,
                                             .key = column.name,
                                             .value = f,
                                             .expected = type_name(column.type)});
    }
  }
  const auto* point = std::get_if<std::int64_t>(&row.cells.front());
  if (point == nullptr || *point < 0) {
    throw Error::input("missing point number", {.file = file,
                                                .line = line,
                                                .key = "point",
                                                .value = fields.front(),
                                                .expected = "an integer >= 0"});
  }
  row.point = static_cast<std::size_t>(*point);
  return row;
}

std::string ResultsTable::csv() const {
  std::string out = csv_header() + "\n";
  for (const auto& [point, row] : rows_) out += csv_line(row) + "\n";
  return out;
}

void ResultsTable::write_csv(const std::filesystem::path& csv_path) const {
  write_text_atomically(csv_path, csv());
}

void ResultsTable::read_csv(const std::filesystem::path& csv_path) {
  const std::string file = csv_path.string();
  std::ifstream in(csv_path, std::ios::binary);
  if (!in) throw Error::input("cannot open results", {.file = file, .expected = "a readable CSV"});
  std::string line;
  if (!std::getline(in, line)) {
    throw Error::input("empty results file", {.file = file, .expected = "a header line"});
  }
  if (line != csv_header()) {
    throw Error::input("the results' columns differ from this study's",
                       {.file = file,
                        .line = 1,
                        .value = line.substr(0, 200),
                        .expected = "the header " + csv_header().substr(0, 200)});
  }
  int number = 1;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    Row row = parse_csv_line(line, file, number);
    if (rows_.count(row.point) != 0) {
      throw Error::input("point listed twice", {.file = file,
                                                .line = number,
                                                .key = "point",
                                                .value = std::to_string(row.point),
                                                .expected = "one row per point"});
    }
    const std::size_t point = row.point;
    rows_.emplace(point, std::move(row));
  }
}

void ResultsTable::write_hdf5(
    const std::filesystem::path& h5_path,
    const std::vector<std::pair<std::string, std::string>>& attributes) const {
  // Every member is 8 bytes in memory (int64, double or char*), so a row is 8·columns bytes.
  constexpr std::size_t kSlot = 8;
  static_assert(sizeof(char*) == kSlot && sizeof(double) == kSlot);
  const std::size_t row_size = kSlot * columns_.size();
  write_atomically(h5_path, [&](const std::filesystem::path& temp) {
    try {
      H5::Exception::dontPrint();
      H5::H5File file(temp.string(), H5F_ACC_TRUNC);
      const H5::StrType text_type(H5::PredType::C_S1, H5T_VARIABLE);
      H5::CompType memory(row_size);
      for (std::size_t c = 0; c < columns_.size(); ++c) {
        const Column& col = columns_[c];
        const H5::DataType& t = col.type == ColumnType::kInt    ? H5::PredType::NATIVE_INT64
                                : col.type == ColumnType::kReal ? H5::PredType::NATIVE_DOUBLE
                                                                : text_type;
        memory.insertMember(col.name, c * kSlot, t);
      }
      std::vector<unsigned char> buffer(row_size * rows_.size());
      std::size_t r = 0;
      for (const auto& [point, row] : rows_) {
        unsigned char* base = buffer.data() + r++ * row_size;
        for (std::size_t c = 0; c < columns_.size(); ++c) {
          const Cell& cell = row.cells[c];
          unsigned char* slot = base + c * kSlot;
          if (columns_[c].type == ColumnType::kInt) {
            const std::int64_t v = std::holds_alternative<std::int64_t>(cell)
                                       ? std::get<std::int64_t>(cell)
                                       : kMissingInt;
            std::memcpy(slot, &v, kSlot);
          } else if (columns_[c].type == ColumnType::kReal) {
            const double v = std::holds_alternative<double>(cell)
                                 ? std::get<double>(cell)
                                 : std::numeric_limits<double>::quiet_NaN();
            std::memcpy(slot, &v, kSlot);
          } else {
            static const char kEmpty[] = "";
            const char* p = std::holds_alternative<std::string>(cell)
                                ? std::get<std::string>(cell).c_str()
                                : kEmpty;
            std::memcpy(slot, &p, kSlot);
          }
        }
      }
      // The file type is packed: no padding bytes (whose content is arbitrary) reach the file.
      H5::CompType packed(row_size);
      packed.copy(memory);
      packed.pack();
      const hsize_t n = rows_.size();
      H5::DataSet ds = file.createDataSet("/results", packed, H5::DataSpace(1, &n), no_times());
      if (n > 0) ds.write(buffer.data(), memory);
      for (const Column& col : columns_) {
        if (!col.unit.empty()) string_attr(ds, col.name + ".unit", col.unit);
      }
      H5::Group root = file.openGroup("/");
      for (const auto& [name, value] : attributes) string_attr(root, name, value);
    } catch (const H5::Exception& e) {
      throw Error::input("cannot write HDF5 file: " + e.getDetailMsg(),
                         {.file = h5_path.string(), .expected = "a writable path"});
    }
  });
}

}  // namespace nest::sweep
