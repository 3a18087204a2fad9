// The cost of keeping a sweep's results whole after every row: each finished point rewrites
// results.csv and results.h5 (to temporary names, then renamed), so a row costs O(rows so far).
// These benchmarks time one rewrite of both files for a wide table (93 columns) of growing
// length, and the CSV line round trip a row makes (worker -> rank 0).

#include <benchmark/benchmark.h>

#include <filesystem>
#include <string>
#include <vector>

#include "nest/sweep/table.h"

namespace {

using nest::sweep::Cell;
using nest::sweep::Column;
using nest::sweep::ColumnType;
using nest::sweep::ResultsTable;
using nest::sweep::Row;

// A wide table: the point, 12 texts (inputs, status, plan, notes), 40 integers and 40 reals.
std::vector<Column> columns() {
  std::vector<Column> c = {{"point", ColumnType::kInt, ""}};
  for (int i = 0; i < 12; ++i) c.push_back({"text" + std::to_string(i), ColumnType::kText, ""});
  for (int i = 0; i < 40; ++i) c.push_back({"int" + std::to_string(i), ColumnType::kInt, ""});
  for (int i = 0; i < 40; ++i) c.push_back({"real" + std::to_string(i), ColumnType::kReal, "s"});
  return c;
}

Row row(std::size_t point) {
  Row r;
  r.point = point;
  r.cells.emplace_back(static_cast<std::int64_t>(point));
  for (int i = 0; i < 12; ++i) r.cells.emplace_back(std::string("t8 e1 pp16 dp32 mb1 zero1"));
  for (int i = 0; i < 40; ++i) r.cells.emplace_back(static_cast<std::int64_t>(point * 40 + i));
  for (int i = 0; i < 40; ++i) r.cells.emplace_back(1.0 / static_cast<double>(point + i + 3));
  return r;
}

ResultsTable table(std::size_t rows) {
  ResultsTable t(columns());
  for (std::size_t p = 0; p < rows; ++p) t.insert(row(p));
  return t;
}

std::filesystem::path scratch() {
  auto dir = std::filesystem::temp_directory_path() / "nest_sweep_bench";
  std::filesystem::create_directories(dir);
  return dir;
}

void BM_RewriteCsvAndHdf5(benchmark::State& state) {
  const ResultsTable t = table(static_cast<std::size_t>(state.range(0)));
  const auto dir = scratch();
  const std::vector<nest::io::TableText> attrs = {{"study_name", "bench"}};
  for (auto _ : state) {
    t.write_csv(dir / "results.csv");
    t.write_hdf5(dir / "results.h5", attrs);
  }
  state.counters["rows"] = static_cast<double>(state.range(0));
  state.counters["csv_bytes"] =
      static_cast<double>(std::filesystem::file_size(dir / "results.csv"));
  state.counters["h5_bytes"] = static_cast<double>(std::filesystem::file_size(dir / "results.h5"));
}
BENCHMARK(BM_RewriteCsvAndHdf5)
    ->Arg(10)
    ->Arg(100)
    ->Arg(1000)
    ->Arg(10000)
    ->Unit(benchmark::kMillisecond);

void BM_RowThroughCsvLine(benchmark::State& state) {
  const ResultsTable t(columns());
  const Row r = row(12345);
  for (auto _ : state) {
    const std::string line = t.csv_line(r);
    benchmark::DoNotOptimize(t.parse_csv_line(line));
  }
}
BENCHMARK(BM_RowThroughCsvLine)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
