#include "job/early_replays.h"

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
                           bool keep_runs, Replay replay)
    : share_(share),
      k_(k),
      options_(std::move(options)),
      keep_runs_(keep_runs),
      replay_(std::move(replay)) {
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
  const auto same = [&](const placer::Plan& p) {
    placer::PlanChoice c = p.choice;
    c.zero_stage = plan.choice.zero_stage;
    return c == plan.choice && (p.iteration_time == plan.iteration_time || p.choice == plan.choice);
  };
  if (std::any_of(plans_.begin(), plans_.end(), same)) return;
  const auto at =
      std::upper_bound(plans_.begin(), plans_.end(), plan.iteration_time,
                       [](Time t, const placer::Plan& p) { return t < p.iteration_time; });
  const auto i = static_cast<std::size_t>(at - plans_.begin());
  plans_.insert(at, plan);
  entries_.insert(entries_.begin() + static_cast<std::ptrdiff_t>(i), std::make_unique<Entry>());
  const std::vector<bool> take = placer::replay_selection(plans_, k_);
  for (std::size_t j = 0; j < entries_.size(); ++j) select(*entries_[j], take[j]);
  share_.changed.notify_all();
}

void EarlyReplays::settle(std::span<const placer::Plan* const> finals) {
  const std::lock_guard lock(share_.mutex);
  settled_ = true;
  for (std::size_t j = 0; j < plans_.size(); ++j) {
    const bool final = std::any_of(finals.begin(), finals.end(), [&](const placer::Plan* p) {
      return p->choice == plans_[j].choice && p->iteration_time == plans_[j].iteration_time;
    });
    select(*entries_[j], final);
  }
  share_.changed.notify_all();
}

std::optional<EarlyReplays::Outcome> EarlyReplays::take(const placer::Plan& plan) {
  std::unique_lock lock(share_.mutex);
  for (std::size_t j = 0; j < plans_.size(); ++j) {
    if (plans_[j].choice != plan.choice || plans_[j].iteration_time != plan.iteration_time) {
      continue;
    }
    Entry& e = *entries_[j];
    share_.changed.wait(lock, [&] { return e.state != State::kRunning; });
    if (e.state != State::kDone) return std::nullopt;
    e.state = State::kTaken;
    return std::move(e.outcome);
  }
  return std::nullopt;
}

bool EarlyReplays::owns(const placer::Plan& plan) {
  const std::lock_guard lock(share_.mutex);
  for (std::size_t j = 0; j < plans_.size(); ++j) {
    if (plans_[j].choice != plan.choice || plans_[j].iteration_time != plan.iteration_time) {
      continue;
    }
    return entries_[j]->state == State::kRunning || entries_[j]->state == State::kDone;
  }
  return false;
}

void EarlyReplays::select(Entry& e, bool in) {
  e.selected = in;
  if (in) return;
  if (e.state == State::kRunning) e.stop = true;
  if (e.state == State::kDone) {
    e.outcome = {};
    e.state = State::kStopped;
    ++wasted_;
  }
}

void EarlyReplays::work() {
  std::unique_lock lock(share_.mutex);
  for (;;) {
    std::size_t j = 0;
    share_.changed.wait(lock, [&] {
      if (closing_ || settled_) return true;
      if (!share_.spare()) return false;
      for (j = 0; j < entries_.size(); ++j) {
        if (entries_[j]->selected && entries_[j]->state == State::kWaiting) return true;
      }
      return false;
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
      }
      return;
    }
    Entry& e = *entries_[j];
    e.state = State::kRunning;
    ++begun_;
    const placer::Plan plan = plans_[j];
    share_.hold_locked(1);
    lock.unlock();
    Outcome out;
    bool stopped = false;
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
    lock.lock();
    share_.hold_locked(-1);  // notifies
    if (stopped || !e.selected) {
      e.state = State::kStopped;
      ++wasted_;
    } else {
      e.outcome = std::move(out);
      e.state = State::kDone;
    }
  }
}

bool EarlyReplays::lend(std::function<void()> work) {
  const std::lock_guard lock(share_.mutex);
  if (!settled_ || closing_) return false;
  const bool replaying = std::any_of(entries_.begin(), entries_.end(),
                                     [](const auto& e) { return e->state == State::kRunning; });
  if (!replaying) return false;
  lent_ = std::move(work);
  lent_done_ = false;
  return true;
}

void EarlyReplays::wait_lent() {
  std::unique_lock lock(share_.mutex);
  share_.changed.wait(lock, [&] { return lent_done_; });
}

}  // namespace nest::job::detail
