#pragma once
/// \file
/// The job's threads (internal to src/job/): who holds the threads beside the search's
/// (`ThreadShare`) and the verification's replays begun while the search still runs
/// (`EarlyReplays`). Not part of the installed API; tests include it.

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <thread>
#include <utility>
#include <vector>

#include "nest/core/units.h"
#include "nest/placer/plan.h"
#include "nest/replay/plan_replay.h"
#include "nest/replay/run_record.h"

namespace nest::coll {
class CollectiveOracle;
}

namespace nest::job::detail {

// The job's threads beside the search's own and who holds them: the baselines' queue (one)
// and the verification's replays (their helpers). The job's oracle simulates a query's sets on
// what is left, at least one (`CollectiveOracle::set_threads`).
struct ThreadShare {
  std::mutex mutex;
  std::condition_variable changed;           // notified when `held` changes
  coll::CollectiveOracle* oracle = nullptr;  // the job's, if it prices on one
  int threads = 1;                           // JobSpec::threads
  int held = 0;
  // `n` threads more held (less, when negative).
  void hold(int n) {
    const std::lock_guard lock(mutex);
    hold_locked(n);
  }
  // `hold`, with `mutex` held by the caller.
  void hold_locked(int n);
  // True when a thread beside the search's is free (`mutex` held).
  [[nodiscard]] bool spare() const noexcept { return held < threads - 1; }
  // Holds `n` threads for its life.
  struct Held {
    ThreadShare& share;
    int n;
    Held(ThreadShare& s, int count) : share(s), n(count) { share.hold(n); }
    ~Held() { share.hold(-n); }
    Held(const Held&) = delete;
    Held& operator=(const Held&) = delete;
  };
};

// The verification's replays begun before the search ends (`Job::placement` with K > 0 and two
// threads or more). The search tells of every plan it keeps (`placer::search`'s
// `SearchHooks::kept`, its thread); the plans ever kept, distinct as the search counts them,
// ordered by (estimate, first kept), stand for the candidates so far, and
// `placer::replay_selection` of them is the set worth replaying. A thread of its own replays the
// first plan of that set not yet replayed, one at a time, and only while a thread beside the
// search's is free (`ThreadShare::spare`: the baselines' queue goes first), so the search keeps its
// core. A plan that leaves the set stops its replay (`net::Stopped`) and never returns to it:
// adding a plan to the set's input can only push others out (an order's displaced best joins the
// rest, which then has no more room than before). When the search is over, `settle` names the final
// candidates: what is not one is stopped, nothing new begins, and the verification takes the
// replays of the others (their times, errors and, with `keep_runs`, records are those of a replay
// at the end: the same plan, options and oracle answers) and replays the rest itself. So the
// choice, the times and the run kept are the verification's without it; only the work is done
// earlier, on a core the search leaves idle (GPT-3 175B on 16,384 rail GPUs, --verify 4: the 19 s
// replay of the tp-pp-dp candidate, kept 17 s before the search's end).
class EarlyReplays {
 public:
  using Replay = std::function<replay::RunRecord(const placer::Plan&, const std::atomic<bool>&)>;
  // Adds the busiest links' series to a plan's kept replay (`replay::add_busiest_series` with the
  // verification's options and their `utilization_links`).
  using AddSeries =
      std::function<void(replay::RunRecord&, const placer::Plan&, const std::atomic<bool>&)>;
  struct Outcome {
    Time time;
    double seconds = 0;
    std::optional<replay::RunRecord> run;  // with `keep_runs`
    int series = 0;  // `run` holds the series of its `series` busiest links (`add_series`)
    std::exception_ptr error;
  };

  // `series_links` > 0 (with `keep_runs`): once every plan of the set has been replayed and the
  // thread is still free, `add_series` adds the series of the `series_links` busiest links to
  // the replay of the least time so far (ties: the better estimate), the run `nest run` writes if
  // that plan is chosen (`Placement::replay_series`).
  EarlyReplays(ThreadShare& share, std::size_t k, replay::PlanReplayOptions options, bool keep_runs,
               Replay replay, int series_links = 0, AddSeries add_series = {});
  ~EarlyReplays();
  EarlyReplays(const EarlyReplays&) = delete;
  EarlyReplays& operator=(const EarlyReplays&) = delete;

  // Whether these are the replays of a verification with `options` (keeping runs or not).
  [[nodiscard]] bool replays(const replay::PlanReplayOptions& options, bool keep_runs) const {
    return options == options_ && keep_runs == keep_runs_;
  }

  // A plan the search keeps (its thread).
  void kept(const placer::Plan& plan);

  // The search is over and `finals` are the candidates: other replays stop, none begins.
  void settle(std::span<const placer::Plan* const> finals);

  // The outcome of `plan`'s replay ahead, waiting while it runs; nullopt when there is none (not
  // begun, or stopped). After `settle`, for a final candidate.
  std::optional<Outcome> take(const placer::Plan& plan);

  // After `settle`, on a thread that would only wait for a replay still running: adds the busiest
  // links' series to the replay of the least time so far, as the replays' thread does once free
  // (`series_links`; the same series, sooner). Nothing when no replay runs or none is to take
  // (after `lend`'s work, nothing runs). A bet: when the running replay ends up least, this
  // pass was spent on another run and the job adds the chosen run's series afterwards.
  void series_meanwhile();

  // True when `plan`'s replay ahead has run or runs (after `settle`: `take` then has it).
  [[nodiscard]] bool owns(const placer::Plan& plan);

  // Replays begun so far, and of those the ones stopped or dropped (their plan left the set).
  [[nodiscard]] std::pair<int, int> counts() {
    const std::lock_guard lock(share_.mutex);
    return {begun_, wasted_};
  }

  // After `settle`: when a replay still runs, its thread runs `work` (the verification's queue)
  // once it ends, from now on at the lowest priority (`kLentNice`), and this returns true (then
  // `wait_lent` waits for `work`); false when none runs.
  [[nodiscard]] bool lend(std::function<void()> work);
  void wait_lent();

 private:
  // kSeries: done, its series being added (the thread holds its run).
  enum class State { kWaiting, kRunning, kDone, kSeries, kStopped, kTaken };
  struct Entry {
    bool selected = false;
    State state = State::kWaiting;
    std::atomic<bool> stop{false};
    Outcome outcome;
    bool series_tried = false;  // the series pass took it (once)
  };

  // Marks `e` in or out of the set (`share_.mutex` held): out, its replay stops or is dropped.
  void select(Entry& e, bool in);

  void work();
  // The index of `plan` in `plans_` (equal field for field), if kept (`share_.mutex` held).
  [[nodiscard]] std::optional<std::size_t> index_of(const placer::Plan& plan) const;
  // Runs `run(plan)` (which must not throw) on a copy of `plans_[j]` with `lock` released and
  // a thread held; false, and nothing run, when the copy cannot be made.
  template <class Run>
  bool run_apart(std::unique_lock<std::mutex>& lock, std::size_t j, Run run);
  // The entry whose replay the series pass should take next, if any (`share_.mutex` held).
  [[nodiscard]] std::optional<std::size_t> series_next() const;
  // Runs `add_series_` on entry `j` (`lock` held on entry and exit, released meanwhile).
  void add_series(std::unique_lock<std::mutex>& lock, std::size_t j);

  ThreadShare& share_;
  std::size_t k_;
  replay::PlanReplayOptions options_;
  bool keep_runs_;
  Replay replay_;
  int series_links_;
  AddSeries add_series_;
  // Every distinct plan kept so far, by (estimate, first kept), and its replay's state; guarded
  // by `share_.mutex`, whose condition variable tells of every change.
  std::vector<placer::Plan> plans_;
  std::vector<std::unique_ptr<Entry>> entries_;
  bool settled_ = false;
  bool closing_ = false;
  std::function<void()> lent_;  // `lend`
  // The worker's thread id (Linux), for `lend` to lower its priority; the nice value it gets.
  std::atomic<pid_t> worker_tid_{0};
  static constexpr int kLentNice = 19;
  bool lent_done_ = true;
  int begun_ = 0;
  int wasted_ = 0;
  std::thread worker_;
};

}  // namespace nest::job::detail
