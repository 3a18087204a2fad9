#include "nest/sweep/table.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <optional>
#include <set>

#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/io/hdf5_table.h"

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

std::optional<std::int64_t> plain_int(std::string_view text) {
  std::int64_t v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<double> plain_real(std::string_view text) {
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size() || !std::isfinite(v)) {
    return std::nullopt;
  }
  return v;
}

// The quantities an axis can hold, each with its SI unit in results.h5 and how results.h5
// stores it.
struct Quantity {
  const char* unit;
  ColumnType stored;
  double (*parse)(std::string_view);
};

constexpr Quantity kQuantities[] = {
    {"B", ColumnType::kInt, [](std::string_view t) { return parse_bytes(t).as_double(); }},
    {"s", ColumnType::kReal, [](std::string_view t) { return parse_time(t).to_seconds(); }},
    {"B/s", ColumnType::kReal, [](std::string_view t) { return parse_bandwidth(t).bytes_per_s(); }},
};

std::optional<double> quantity(const Quantity& q, std::string_view text) {
  try {
    return q.parse(text);
  } catch (const Error&) {
    return std::nullopt;
  }
}

// The number results.h5 stores for the text `text` of an axis column; nullopt when missing.
std::optional<double> axis_number(const Column& column, std::string_view text) {
  if (text.empty()) return std::nullopt;
  if (column.unit.empty()) {
    if (column.hdf5 == ColumnType::kInt) {
      const auto v = plain_int(text);
      return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
    }
    return plain_real(text);
  }
  for (const Quantity& q : kQuantities) {
    if (column.unit == q.unit) return quantity(q, text);
  }
  return std::nullopt;
}

}  // namespace

std::string format_real(double value) { return fmt::format("{}", value); }

Column axis_column(std::string name, const std::vector<std::string>& values) {
  Column column{std::move(name), ColumnType::kText, ""};
  const std::set<std::string> distinct(values.begin(), values.end());
  bool any = false;
  bool ints = true;
  bool reals = true;
  bool fits[std::size(kQuantities)];
  std::fill(std::begin(fits), std::end(fits), true);
  for (const std::string& v : distinct) {
    if (v.empty()) continue;  // a point that does not set the axis: missing in results.h5
    any = true;
    const bool plain = plain_real(v).has_value();
    ints = ints && plain_int(v).has_value();
    reals = reals && plain;
    for (std::size_t q = 0; q < std::size(kQuantities); ++q) {
      if (fits[q]) fits[q] = !plain && quantity(kQuantities[q], v).has_value();
    }
  }
  if (!any) return column;
  if (ints) {
    column.hdf5 = ColumnType::kInt;
  } else if (reals) {
    column.hdf5 = ColumnType::kReal;
  } else {
    for (std::size_t q = 0; q < std::size(kQuantities); ++q) {
      if (!fits[q]) continue;
      column.hdf5 = kQuantities[q].stored;
      column.unit = kQuantities[q].unit;
      break;
    }
  }
  return column;
}

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

void ResultsTable::write_hdf5(const std::filesystem::path& h5_path,
                              const std::vector<io::TableText>& texts) const {
  std::vector<const Row*> rows;  // point order, walked once per column
  rows.reserve(rows_.size());
  for (const auto& [point, row] : rows_) rows.push_back(&row);
  std::vector<io::TableColumn> columns;
  columns.reserve(columns_.size());
  for (std::size_t c = 0; c < columns_.size(); ++c) {
    const Column& column = columns_[c];
    const ColumnType stored = column.type == ColumnType::kText ? column.hdf5 : column.type;
    io::TableColumn out{column.name, column.unit, {}};
    if (stored == ColumnType::kInt) {
      std::vector<std::int64_t> v(rows.size(), kMissingInt);
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const Cell& cell = rows[r]->cells[c];
        if (const auto* i = std::get_if<std::int64_t>(&cell)) {
          v[r] = *i;
        } else if (const auto* s = std::get_if<std::string>(&cell)) {
          if (const auto n = axis_number(column, *s)) v[r] = static_cast<std::int64_t>(*n);
        }
      }
      out.values = std::move(v);
    } else if (stored == ColumnType::kReal) {
      std::vector<double> v(rows.size(), std::numeric_limits<double>::quiet_NaN());
      for (std::size_t r = 0; r < rows.size(); ++r) {
        const Cell& cell = rows[r]->cells[c];
        if (const auto* d = std::get_if<double>(&cell)) {
          v[r] = *d;
        } else if (const auto* s = std::get_if<std::string>(&cell)) {
          if (const auto n = axis_number(column, *s)) v[r] = *n;
        }
      }
      out.values = std::move(v);
    } else {
      std::vector<std::string> v(rows.size());
      for (std::size_t r = 0; r < rows.size(); ++r) {
        if (const auto* s = std::get_if<std::string>(&rows[r]->cells[c])) v[r] = *s;
      }
      out.values = std::move(v);
    }
    columns.push_back(std::move(out));
  }
  io::write_table_hdf5(h5_path, "results", columns, texts);
}

}  // namespace nest::sweep
