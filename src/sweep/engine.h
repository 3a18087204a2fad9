#pragma once
// The moving parts of a sweep run, shared by the in-process runner (runner.cc) and the MPI
// distribution (cluster.cc): the dispatch order, the pool of evaluation threads and rank 0's
// sink that keeps the table and its files.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "nest/core/progress.h"
#include "nest/sweep/cluster.h"
#include "nest/sweep/table.h"

namespace nest::sweep::detail {

// The points still to run, in dispatch order, at most `limit` of them (negative: all).
class Dispatcher {
 public:
  Dispatcher(std::vector<std::size_t> order, std::int64_t limit);
  // The next point to run, or nothing when all have been handed out.
  [[nodiscard]] std::optional<std::size_t> next();
  // How many points this dispatcher hands out in all.
  [[nodiscard]] std::size_t total() const noexcept { return order_.size(); }

 private:
  std::vector<std::size_t> order_;
  std::size_t next_ = 0;
};

// A point's result on its way to rank 0: the point and its CSV line.
struct Finished {
  std::size_t point = 0;
  std::string line;
};

// `threads` workers run `work(point)` for submitted points; the owner collects the results.
// `work` must not throw. The destructor drops points not started and waits for running ones.
class WorkerPool {
 public:
  // Starts `threads` workers; throws Error (input, key "--threads") when the system refuses
  // one, after stopping those it started.
  WorkerPool(int threads, std::function<std::string(std::size_t)> work);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  void submit(std::size_t point);
  // A finished point, waiting up to `timeout` for one; nothing when none finished in time.
  [[nodiscard]] std::optional<Finished> wait(std::chrono::milliseconds timeout);
  // Points submitted and not yet collected.
  [[nodiscard]] std::size_t in_flight() const noexcept { return in_flight_; }
  [[nodiscard]] int threads() const noexcept { return static_cast<int>(workers_.size()); }

 private:
  void loop();
  void stop();

  std::function<std::string(std::size_t)> work_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable result_ready_;
  std::deque<std::size_t> queue_;
  std::deque<Finished> results_;
  bool stopping_ = false;
  std::size_t in_flight_ = 0;  // owner thread only
  std::vector<std::thread> workers_;
};

// Rank 0's end: parses each finished line, adds it to the table, rewrites both files and
// advances the progress bar.
class Sink {
 public:
  Sink(ResultsTable& table, std::filesystem::path csv, std::filesystem::path hdf5,
       std::vector<io::TableText> texts, Progress& progress);
  void accept(const Finished& finished);
  void write() const;
  [[nodiscard]] std::size_t accepted() const noexcept { return accepted_; }

 private:
  ResultsTable& table_;
  std::filesystem::path csv_;
  std::filesystem::path hdf5_;
  std::vector<io::TableText> texts_;
  Progress& progress_;
  std::size_t accepted_ = 0;
};

// Rank 0's preparation outcome reaches every rank: returns rank 0's `error` (empty: go on).
// Without MPI it returns `error` unchanged.
[[nodiscard]] std::string agree(const Cluster* cluster, const std::string& error);

// Runs the distributed sweep loop on every rank of `cluster` (see cluster.cc): rank 0 hands
// out points from `dispatcher` and feeds `sink` (both null on other ranks); every rank runs
// `threads` evaluation threads. Returns, on rank 0, the points each rank evaluated; on other
// ranks, one entry: the points this rank evaluated.
std::vector<std::size_t> run_distributed(const Cluster& cluster, Dispatcher* dispatcher, Sink* sink,
                                         const std::function<std::string(std::size_t)>& work,
                                         int threads);

}  // namespace nest::sweep::detail
