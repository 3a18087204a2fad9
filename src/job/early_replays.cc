#include "job/early_replays.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "nest/coll/oracle.h"
#include "nest/net/simulator.h"
#include "nest/placer/search.h"

namespace nest::job::detail {
namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

void ThreadShare::hold_locked(int n) {
  held += n;
  if (oracle != nullptr) oracle->set_threads(std::max(1, threads - held));
  changed.notify_all();
}

EarlyReplays::EarlyReplays(ThreadShare& share, std::size_t k, replay::PlanReplayOptions options,
                           bool keep_runs, Replay replay, int series_links, AddSeries add_series)
    : share_(share),
      k_(k),
      options_(std::move(options)),
      keep_runs_(keep_runs),
      replay_(std::move(replay)),
      series_links_(keep_runs && add_series ? series_links : 0),
      add_series_(std::move(add_series)) {
  worker_ = std::thread([this] { work(); });
}

EarlyReplays::~EarlyReplays() {
  {
    const std::lock_guard lock(share_.mutex);
    closing_ = true;
    for (const auto& e : entries_) e->stop = true;
    share_.changed.notify_all();
  }
  worker_.join();
}

void EarlyReplays::kept(const placer::Plan& plan) {
  const std::lock_guard lock(share_.mutex);
  if (settled_ || closing_) return;
  if (std::any_of(plans_.begin(), plans_.end(),
                  [&](const placer::Plan& p) { return placer::same_candidate(p, plan); })) {
    return;
  }
  const auto at =
      std::upper_bound(plans_.begin(), plans_.end(), plan.iteration_time,
                       [](Time t, const placer::Plan& p) { return t < p.iteration_time; });
  const auto i = static_cast<std::ptrdiff_t>(at - plans_.begin());
  // Whatever throws, before both vectors grow alike.
  auto entry = std::make_unique<Entry>();
  entries_.reserve(entries_.size() + 1);
  plans_.insert(at, plan);
  entries_.insert(entries_.begin() + i, std::move(entry));
  const std::vector<bool> take = placer::replay_selection(plans_, k_);
  for (std::size_t j = 0; j < entries_.size(); ++j) select(*entries_[j], take[j]);
  share_.changed.notify_all();
}

void EarlyReplays::settle(std::span<const placer::Plan* const> finals) {
  const std::lock_guard lock(share_.mutex);
  settled_ = true;
  for (std::size_t j = 0; j < plans_.size(); ++j) {
    const bool final = std::any_of(finals.begin(), finals.end(),
                                   [&](const placer::Plan* p) { return *p == plans_[j]; });
    select(*entries_[j], final);
  }
  share_.changed.notify_all();
}

std::optional<EarlyReplays::Outcome> EarlyReplays::take(const placer::Plan& plan) {
  std::unique_lock lock(share_.mutex);
  const std::optional<std::size_t> j = index_of(plan);
  if (!j) return std::nullopt;
  Entry& e = *entries_[*j];
  share_.changed.wait(lock,
                      [&] { return e.state != State::kRunning && e.state != State::kSeries; });
  if (e.state != State::kDone) return std::nullopt;
  e.state = State::kTaken;
  return std::move(e.outcome);
}

void EarlyReplays::series_meanwhile() {
  std::unique_lock lock(share_.mutex);
  if (!settled_ || closing_) return;
  const bool running = std::any_of(entries_.begin(), entries_.end(), [](const auto& e) {
    return e->selected && e->state == State::kRunning;
  });
  if (!running) return;
  if (const std::optional<std::size_t> best = series_next()) add_series(lock, *best);
}

bool EarlyReplays::owns(const placer::Plan& plan) {
  const std::lock_guard lock(share_.mutex);
  const std::optional<std::size_t> j = index_of(plan);
  if (!j) return false;
  const State s = entries_[*j]->state;
  return s == State::kRunning || s == State::kSeries || s == State::kDone;
}

std::optional<std::size_t> EarlyReplays::index_of(const placer::Plan& plan) const {
  const auto at = std::find(plans_.begin(), plans_.end(), plan);
  if (at == plans_.end()) return std::nullopt;
  return static_cast<std::size_t>(at - plans_.begin());
}

template <class Run>
bool EarlyReplays::run_apart(std::unique_lock<std::mutex>& lock, std::size_t j, Run run) {
  std::optional<placer::Plan> plan;  // a copy: `plans_` may move while the lock is released
  try {
    plan.emplace(plans_[j]);
  } catch (...) {
    return false;
  }
  share_.hold_locked(1);
  lock.unlock();
  run(*plan);
  lock.lock();
  share_.hold_locked(-1);  // notifies
  return true;
}

void EarlyReplays::select(Entry& e, bool in) {
  e.selected = in;
  if (in) return;
  if (e.state == State::kRunning || e.state == State::kSeries) e.stop = true;
  if (e.state == State::kDone) {
    e.outcome = {};
    e.state = State::kStopped;
    ++wasted_;
  }
}

void EarlyReplays::work() {
  worker_tid_ = gettid();
  std::unique_lock lock(share_.mutex);
  for (;;) {
    std::size_t j = 0;
    std::optional<std::size_t> series;
    share_.changed.wait(lock, [&] {
      if (closing_ || settled_) return true;
      if (!share_.spare()) return false;
      for (j = 0; j < entries_.size(); ++j) {
        if (entries_[j]->selected && entries_[j]->state == State::kWaiting) return true;
      }
      series = series_next();
      return series.has_value();
    });
    if (closing_ || settled_) {
      if (!closing_ && lent_) {  // the verification's queue, after the replay it waited for
        const std::function<void()> lent = std::move(lent_);
        lent_ = nullptr;
        lock.unlock();
        lent();
        lock.lock();
        lent_done_ = true;
        share_.changed.notify_all();
        // Still one of the verification's threads: the series of the least replay so far, while
        // the others finish (the verification waits for them only to take that replay).
        if (const std::optional<std::size_t> best = series_next(); best && !closing_) {
          add_series(lock, *best);
        }
      }
      return;
    }
    if (series) {
      add_series(lock, *series);
      continue;
    }
    Entry& e = *entries_[j];
    e.state = State::kRunning;
    ++begun_;
    Outcome out;
    bool stopped = false;
    const bool ran = run_apart(lock, j, [&](const placer::Plan& plan) {
      const auto began = std::chrono::steady_clock::now();
      try {
        replay::RunRecord run = replay_(plan, e.stop);
        out.time = run.summary.iteration_time;
        if (keep_runs_) out.run = std::move(run);
      } catch (const net::Stopped&) {
        stopped = true;
      } catch (...) {
        out.error = std::current_exception();
      }
      out.seconds = seconds_since(began);
    });
    // Not run (out of memory for the copy): the verification replays it, if it is a candidate.
    if (!ran || stopped || !e.selected) {
      e.state = State::kStopped;
      ++wasted_;
    } else {
      e.outcome = std::move(out);
      e.state = State::kDone;
    }
  }
}

std::optional<std::size_t> EarlyReplays::series_next() const {
  if (series_links_ <= 0) return std::nullopt;
  std::optional<std::size_t> best;
  for (std::size_t j = 0; j < entries_.size(); ++j) {
    const Entry& e = *entries_[j];
    // Replays come first (after `settle` the verification's threads run those never begun).
    if (e.state == State::kWaiting && e.selected && !settled_) return std::nullopt;
    if (!e.selected || e.state != State::kDone || !e.outcome.run || e.outcome.error) continue;
    if (!best || e.outcome.time < entries_[*best]->outcome.time) best = j;
  }
  if (!best || entries_[*best]->series_tried) return std::nullopt;
  return best;
}

void EarlyReplays::add_series(std::unique_lock<std::mutex>& lock, std::size_t j) {
  Entry& e = *entries_[j];
  e.series_tried = true;
  e.state = State::kSeries;  // its run is this thread's meanwhile
  bool added = false;
  // Not added (stopped, failed, or no copy of the plan): `Job::simulate` adds them as it would.
  (void)run_apart(lock, j, [&](const placer::Plan& plan) {
    try {
      add_series_(*e.outcome.run, plan, e.stop);
      added = true;
    } catch (...) {
    }
  });
  e.state = State::kDone;
  e.outcome.series = added ? series_links_ : 0;
  if (!e.selected) select(e, false);
}

bool EarlyReplays::lend(std::function<void()> work) {
  const std::lock_guard lock(share_.mutex);
  if (!settled_ || closing_) return false;
  const bool replaying = std::any_of(entries_.begin(), entries_.end(), [](const auto& e) {
    return e->state == State::kRunning || e->state == State::kSeries;
  });
  if (!replaying) return false;
  lent_ = std::move(work);
  lent_done_ = false;
  // The verification's own threads keep the cores: this one finishes its replay, and takes from
  // the queue, on what they leave (Linux: a thread's own nice value; lowering needs no right).
  (void)setpriority(PRIO_PROCESS, static_cast<id_t>(worker_tid_.load()), kLentNice);
  return true;
}

void EarlyReplays::wait_lent() {
  std::unique_lock lock(share_.mutex);
  share_.changed.wait(lock, [&] { return lent_done_; });
}

}  // namespace nest::job::detail
