#include "nest/sweep/runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <exception>
#include <optional>
#include <system_error>

#include "nest/core/error.h"
#include "nest/core/folder_lock.h"
#include "nest/sweep/cluster.h"
#include "sweep/engine.h"

namespace nest::sweep {

double PointEvaluator::cost(const Point& /*point*/) const { return 1; }

namespace detail {

Dispatcher::Dispatcher(std::vector<std::size_t> order, std::int64_t limit)
    : order_(std::move(order)) {
  if (limit >= 0 && static_cast<std::size_t>(limit) < order_.size()) {
    order_.resize(static_cast<std::size_t>(limit));
  }
}

std::optional<std::size_t> Dispatcher::next() {
  if (next_ >= order_.size()) return std::nullopt;
  return order_[next_++];
}

WorkerPool::WorkerPool(int threads, std::function<std::string(std::size_t)> work)
    : work_(std::move(work)) {
  workers_.reserve(static_cast<std::size_t>(std::max(threads, 0)));
  for (int i = 0; i < threads; ++i) {
    try {
      workers_.emplace_back([this] { loop(); });
    } catch (const std::system_error& e) {
      // The system refused a thread (EAGAIN: a process or memory limit). A constructor that
      // throws runs no destructor: stop the threads already started, or they abort the process.
      stop();
      throw Error::input(
          fmt::format("cannot start {} threads, the system refused thread {}: {}", threads, i + 1,
                      e.code().message()),
          {.key = "--threads", .value = std::to_string(threads), .expected = "fewer threads"});
    }
  }
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  work_ready_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
}

void WorkerPool::submit(std::size_t point) {
  {
    const std::lock_guard lock(mutex_);
    queue_.push_back(point);
  }
  ++in_flight_;
  work_ready_.notify_one();
}

std::optional<Finished> WorkerPool::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!result_ready_.wait_for(lock, timeout, [this] { return !results_.empty(); })) {
    return std::nullopt;
  }
  Finished f = std::move(results_.front());
  results_.pop_front();
  --in_flight_;
  return f;
}

void WorkerPool::loop() {
  while (true) {
    std::size_t point = 0;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      point = queue_.front();
      queue_.pop_front();
    }
    std::string line = work_(point);
    {
      const std::lock_guard lock(mutex_);
      results_.push_back({point, std::move(line)});
    }
    result_ready_.notify_one();
  }
}

Sink::Sink(ResultsTable& table, std::filesystem::path csv, std::filesystem::path hdf5,
           std::vector<io::TableText> texts, Progress& progress)
    : table_(table),
      csv_(std::move(csv)),
      hdf5_(std::move(hdf5)),
      texts_(std::move(texts)),
      progress_(progress) {}

void Sink::accept(const Finished& finished) {
  Row row = table_.parse_csv_line(finished.line);
  if (row.point != finished.point) {
    throw Error::internal(
        fmt::format("the row of point {} says point {}", finished.point, row.point));
  }
  table_.insert(std::move(row));
  write();
  ++accepted_;
  progress_.advance();
}

void Sink::write() const {
  table_.write_csv(csv_);
  table_.write_hdf5(hdf5_, texts_);
}

}  // namespace detail

namespace {

std::string one_line(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  std::replace(text.begin(), text.end(), '\r', ' ');
  return text;
}

// The row of `point`: inputs, status, error and outputs, as a CSV line. Never throws: a
// failure of the evaluator becomes an error row.
std::string evaluate_line(const PointEvaluator& evaluator, const ResultsTable& shape,
                          std::size_t outputs, const Point& point) {
  Row row;
  row.point = point.index;
  row.cells.emplace_back(static_cast<std::int64_t>(point.index));
  for (const auto& input : point.inputs) row.cells.emplace_back(input);
  auto failed = [&](const std::string& message) {
    row.cells.resize(1 + point.inputs.size());
    row.cells.emplace_back(std::string("error"));
    row.cells.emplace_back(one_line(message));
    row.cells.resize(row.cells.size() + outputs);
    return shape.csv_line(row);
  };
  try {
    Outcome outcome = evaluator.evaluate(point);
    if (outcome.status != "ok" && outcome.status != "infeasible") {
      throw Error::internal("unknown status \"" + outcome.status + "\"");
    }
    if (outcome.cells.size() != outputs) {
      throw Error::internal(
          fmt::format("{} output cells for {} columns", outcome.cells.size(), outputs));
    }
    row.cells.emplace_back(outcome.status);
    row.cells.emplace_back(one_line(outcome.error));
    for (auto& c : outcome.cells) {
      if (auto* s = std::get_if<std::string>(&c)) *s = one_line(*s);
      row.cells.push_back(std::move(c));
    }
    // The table checks the cells' types; a copy keeps `shape` untouched.
    ResultsTable check(shape.columns());
    check.insert(row);
    return shape.csv_line(row);
  } catch (const Error& e) {
    return failed(e.what());
  } catch (const std::exception& e) {
    return failed(std::string("internal error: ") + e.what());
  }
}

// Checks that the resumed rows belong to this study: same point numbers and inputs.
void check_resumed(const Study& study, const ResultsTable& table, const std::string& file) {
  for (const auto& [point, row] : table.rows()) {
    if (point >= study.points.size()) {
      throw Error::input("a row names a point the study does not have",
                         {.file = file,
                          .key = "point",
                          .value = std::to_string(point),
                          .expected = fmt::format("a point below {}", study.points.size())});
    }
    const Point& p = study.points[point];
    for (std::size_t i = 0; i < p.inputs.size(); ++i) {
      const auto& cell = std::get<std::string>(row.cells[1 + i]);
      if (cell != p.inputs[i]) {
        throw Error::input(
            fmt::format("the row of point {} was made by another study", point),
            {.file = file,
             .key = study.input_columns[i],
             .value = cell,
             .expected = "\"" + p.inputs[i] + "\" (the study's value; --force starts over)"});
      }
    }
  }
}

}  // namespace

void validate(const SweepOptions& options) {
  if (options.threads < 1 || options.threads > kMaxThreads) {
    throw Error::input("thread count out of range",
                       {.key = "--threads",
                        .value = std::to_string(options.threads),
                        .expected = fmt::format("an integer in [1, {}]", kMaxThreads)});
  }
}

std::vector<Column> results_columns(const Study& study, const PointEvaluator& evaluator) {
  std::vector<Column> columns;
  columns.push_back({"point", ColumnType::kInt, ""});
  for (std::size_t i = 0; i < study.input_columns.size(); ++i) {
    std::vector<std::string> values;
    values.reserve(study.points.size());
    for (const Point& p : study.points) values.push_back(p.inputs[i]);
    columns.push_back(axis_column(study.input_columns[i], values));
  }
  columns.push_back({"status", ColumnType::kText, ""});
  columns.push_back({"error", ColumnType::kText, ""});
  for (auto& c : evaluator.columns()) columns.push_back(std::move(c));
  return columns;
}

SweepReport run_sweep(const Study& study, const PointEvaluator& evaluator,
                      const SweepOptions& options, const Cluster* cluster) {
  const bool distributed = cluster != nullptr && cluster->mpi() && cluster->size() > 1;
  const bool writer = cluster == nullptr || cluster->rank() == 0;
  validate(options);
  const std::vector<Column> columns = results_columns(study, evaluator);
  const std::size_t outputs = columns.size() - 3 - study.input_columns.size();
  ResultsTable table(columns);

  SweepReport report;
  report.points = study.points.size();
  report.ranks = distributed ? cluster->size() : 1;
  report.csv = options.output / "results.csv";
  report.hdf5 = options.output / "results.h5";

  // Rank 0 prepares the output folder; every rank learns whether that worked.
  std::optional<FolderLock> lock;  // held until the sweep returns
  std::string problem;
  std::optional<Error> own_error;
  if (writer) {
    try {
      std::error_code ec;
      std::filesystem::create_directories(options.output, ec);
      if (ec) {
        throw Error::input("cannot create the output folder: " + ec.message(),
                           {.key = "--output", .value = options.output.string()});
      }
      // One sweep per folder: two would rewrite each other's rows. (Temporaries a killed sweep
      // left are removed by the next write of each file: nest/core/atomic_file.h.)
      lock.emplace(options.output, "--output");
      if (std::filesystem::exists(report.csv)) {
        if (options.resume) {
          table.read_csv(report.csv);
          check_resumed(study, table, report.csv.string());
        } else if (!options.overwrite) {
          throw Error::input("the output folder already holds results",
                             {.key = "--output",
                              .value = options.output.string(),
                              .expected = "--resume to continue them or --force to start over"});
        }
      }
    } catch (const Error& e) {
      own_error = e;
      problem = e.what();
    }
  }
  problem = detail::agree(distributed ? cluster : nullptr, problem);
  if (own_error) throw *own_error;
  if (!problem.empty()) throw Error::input("rank 0 stopped: " + problem);

  const std::vector<io::TableText> texts = {
      {"study_name", study.name},
      {"study_file", std::filesystem::path(study.file).filename().string()},
      {"study_text", study.text, true},  // a dataset: a study can pass the 64 KiB attribute limit
      {"tool_version", NEST_VERSION},
  };
  report.resumed = table.rows().size();

  // Dispatch order: largest estimated cost first, ties by point number.
  std::vector<std::size_t> order;
  std::vector<double> cost(study.points.size(), 0);
  for (const Point& p : study.points) {
    if (table.contains(p.index)) continue;
    order.push_back(p.index);
    cost[p.index] = evaluator.cost(p);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });

  auto work = [&](std::size_t point) {
    return evaluate_line(evaluator, table, outputs, study.points[point]);
  };
  std::optional<detail::Dispatcher> dispatcher;
  std::optional<Progress> progress;
  std::optional<detail::Sink> sink;
  if (writer) {
    dispatcher.emplace(std::move(order), options.stop_after);
    progress.emplace("sweep " + study.name, dispatcher->total(), options.progress_stream,
                     options.progress);
    sink.emplace(table, report.csv, report.hdf5, texts, *progress);
    sink->write();  // the files exist (and agree with each other) from the start
  }

  if (distributed) {
    report.per_rank = detail::run_distributed(*cluster, writer ? &*dispatcher : nullptr,
                                              writer ? &*sink : nullptr, work, options.threads);
    if (!writer) {
      report.evaluated = report.per_rank.front();
      return report;
    }
    report.evaluated = sink->accepted();
  } else {
    detail::WorkerPool pool(options.threads, work);
    while (auto point = dispatcher->next()) pool.submit(*point);
    while (pool.in_flight() > 0) {
      if (auto finished = pool.wait(std::chrono::milliseconds(200))) sink->accept(*finished);
    }
    report.evaluated = sink->accepted();
    report.per_rank = {report.evaluated};
  }
  progress->finish();

  for (const auto& [point, row] : table.rows()) {
    const auto& status = std::get<std::string>(row.cells[1 + study.input_columns.size()]);
    if (status == "ok") ++report.ok;
    if (status == "infeasible") ++report.infeasible;
    if (status == "error") ++report.failed;
  }
  report.complete = table.rows().size() == study.points.size();
  return report;
}

}  // namespace nest::sweep
