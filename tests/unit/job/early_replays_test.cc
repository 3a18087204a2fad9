#include "job/early_replays.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "nest/core/error.h"
#include "nest/net/simulator.h"

namespace nest::job::detail {
namespace {

using placer::PlacementOrder;

// A kept plan: `stages` stages of one layer each (distinct choices by depth), `ms` estimate.
placer::Plan plan(int stages, int ms, PlacementOrder order = PlacementOrder::kTensorDataPipeline,
                  int zero = 1) {
  placer::Plan p;
  for (int s = 0; s <= stages; ++s) p.choice.boundaries.push_back(static_cast<std::size_t>(s));
  p.choice.order = order;
  p.choice.zero_stage = zero;
  p.iteration_time = Time::milliseconds(ms);
  return p;
}

// The replays the worker runs, one at a time: each waits until the test lets it end (`finish`)
// or its stop flag is raised (then it throws `net::Stopped`, as a stopped simulator does). Its
// record's time is the plan's estimate plus 1 ms; a plan of 13 stages throws an input error.
class Replays {
 public:
  EarlyReplays::Replay replay() {
    return [this](const placer::Plan& p, const std::atomic<bool>& stop) {
      const int depth = p.choice.stages();
      {
        std::unique_lock lock(mutex_);
        begun_.push_back(depth);
        changed_.notify_all();
        while (!finished_.contains(depth)) {
          if (stop) {
            stopped_.push_back(depth);
            changed_.notify_all();
            throw net::Stopped{};
          }
          changed_.wait_for(lock, std::chrono::milliseconds(1));
        }
      }
      if (depth == 13) throw Error::input("thirteen stages");
      replay::RunRecord r;
      r.summary.iteration_time = p.iteration_time + Time::milliseconds(1);
      return r;
    };
  }
  // Adds one series (of link 7) to a run and records the plan's depth.
  EarlyReplays::AddSeries add_series() {
    return [this](replay::RunRecord& run, const placer::Plan& p, const std::atomic<bool>&) {
      run.link_series.emplace_back().link = 7;
      const std::lock_guard lock(mutex_);
      series_.push_back(p.choice.stages());
      series_threads_.push_back(std::this_thread::get_id());
      changed_.notify_all();
    };
  }
  // Waits until `n` series passes have run; their plans' depths in order.
  std::vector<int> series(std::size_t n) {
    std::unique_lock lock(mutex_);
    wait(lock, [&] { return series_.size() >= n; });
    return series_;
  }
  // The threads the series passes ran on, in order.
  std::vector<std::thread::id> series_threads() {
    const std::lock_guard lock(mutex_);
    return series_threads_;
  }
  // Lets the replay of the plan of `depth` stages end.
  void finish(int depth) {
    const std::lock_guard lock(mutex_);
    finished_.insert(depth);
    changed_.notify_all();
  }
  // Waits until `n` replays have begun; their depths in order.
  std::vector<int> begun(std::size_t n) {
    std::unique_lock lock(mutex_);
    wait(lock, [&] { return begun_.size() >= n; });
    return begun_;
  }
  // Waits until `n` replays have been stopped; their depths in order.
  std::vector<int> stopped(std::size_t n) {
    std::unique_lock lock(mutex_);
    wait(lock, [&] { return stopped_.size() >= n; });
    return stopped_;
  }

 private:
  // Waits for `done`, failing the test after 60 s (a bug shows as a failure, not a hang).
  template <class Done>
  void wait(std::unique_lock<std::mutex>& lock, Done done) {
    if (!changed_.wait_for(lock, std::chrono::seconds(60), done)) {
      ADD_FAILURE() << "timed out";
    }
  }
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<int> begun_;
  std::vector<int> stopped_;
  std::vector<int> series_;
  std::vector<std::thread::id> series_threads_;
  std::set<int> finished_;
};

// The job's threads when it has two: the search's and one beside it.
struct TwoThreads : ThreadShare {
  TwoThreads() { threads = 2; }
};

// K = 1 keeps the best plan of each order: a better plan of the same order displaces the one
// being replayed, whose replay stops; the verification then takes the finished replay.
TEST(EarlyReplays, APlanThatLeavesTheCandidatesStopsItsReplay) {
  TwoThreads share;
  Replays fake;
  EarlyReplays early(share, 1, {}, true, fake.replay());
  early.kept(plan(4, 100));
  EXPECT_EQ(fake.begun(1), std::vector<int>{4});
  early.kept(plan(8, 90));  // better: the 4-stage plan leaves the set
  EXPECT_EQ(fake.stopped(1), std::vector<int>{4});
  EXPECT_EQ(fake.begun(2), (std::vector<int>{4, 8}));
  fake.finish(8);
  const placer::Plan best = plan(8, 90);
  early.settle(std::vector<const placer::Plan*>{&best});
  EXPECT_TRUE(early.owns(best));
  EXPECT_FALSE(early.owns(plan(4, 100)));
  const std::optional<EarlyReplays::Outcome> out = early.take(best);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->time, Time::milliseconds(91));
  ASSERT_TRUE(out->run.has_value());
  EXPECT_EQ(out->run->summary.iteration_time, Time::milliseconds(91));
  EXPECT_FALSE(out->error);
  EXPECT_EQ(early.counts(), std::make_pair(2, 1));
  EXPECT_FALSE(early.take(best).has_value());  // taken once
}

// Each order's best is a candidate (K = 2 with two orders); the worker replays the set's plans
// by estimate. After `settle`, a final candidate not yet begun is not begun (the verification
// replays it), a running non-final one stops, and a running final one is waited for.
TEST(EarlyReplays, SettleKeepsTheFinalCandidatesAndStopsTheRest) {
  TwoThreads share;
  Replays fake;
  EarlyReplays early(share, 2, {}, false, fake.replay());
  const placer::Plan a = plan(4, 100, PlacementOrder::kTensorDataPipeline);
  const placer::Plan b = plan(6, 120, PlacementOrder::kTensorPipelineData);
  early.kept(b);
  EXPECT_EQ(fake.begun(1), std::vector<int>{6});
  early.kept(a);  // a second order: both are candidates, b keeps running
  fake.finish(6);
  EXPECT_EQ(fake.begun(2), (std::vector<int>{6, 4}));
  const placer::Plan c = plan(5, 110, PlacementOrder::kTensorDataPipeline);
  early.kept(c);  // a's order's second: out of the set of 2 (one per order)
  // The search ends with b and c (say): a, running, stops; c was never begun.
  early.settle(std::vector<const placer::Plan*>{&b, &c});
  EXPECT_EQ(fake.stopped(1), std::vector<int>{4});
  EXPECT_TRUE(early.owns(b));
  EXPECT_FALSE(early.owns(c));
  const auto out = early.take(b);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->time, Time::milliseconds(121));
  EXPECT_FALSE(out->run.has_value());  // keep_runs false
  EXPECT_FALSE(early.take(c).has_value());
  EXPECT_FALSE(early.take(a).has_value());  // waits for its stop
  EXPECT_FALSE(early.owns(a));
  EXPECT_EQ(early.counts(), std::make_pair(2, 1));
}

// The worker waits for a thread beside the search's (the baselines' queue holds the only one),
// counts plans that differ only in their ZeRO stage at the same price once (so that the second
// candidate of K = 2 is the 60 ms plan, not the ZeRO-2 copy), and keeps a replay's error for the
// verification to throw.
TEST(EarlyReplays, WaitsForASpareThreadCountsPlansOnceAndKeepsErrors) {
  TwoThreads share;
  share.hold(1);  // the baselines' queue
  Replays fake;
  EarlyReplays early(share, 2, {}, false, fake.replay());
  const placer::Plan p = plan(13, 50);
  const placer::Plan q = plan(7, 60);
  early.kept(p);
  early.kept(plan(13, 50, PlacementOrder::kTensorDataPipeline, 2));  // p again, ZeRO-2
  early.kept(q);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(early.counts(), std::make_pair(0, 0));
  share.hold(-1);  // the queue is done
  EXPECT_EQ(fake.begun(1), std::vector<int>{13});
  fake.finish(13);
  EXPECT_EQ(fake.begun(2), (std::vector<int>{13, 7}));
  fake.finish(7);
  early.settle(std::vector<const placer::Plan*>{&p, &q});
  const auto out = early.take(p);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(out->error);
  EXPECT_THROW(std::rethrow_exception(out->error), Error);
  const auto second = early.take(q);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->time, Time::milliseconds(61));
  EXPECT_EQ(early.counts(), std::make_pair(2, 0));
  // The replays held the spare thread while they ran, and gave it back.
  const std::lock_guard lock(share.mutex);
  EXPECT_EQ(share.held, 0);
}

// After `settle`, the thread of a replay still running takes the verification's queue once that
// replay ends (`lend`), at the lowest priority; with no replay running there is no thread to lend.
TEST(EarlyReplays, ARunningReplaysThreadTakesTheVerificationsQueueAfterIt) {
  TwoThreads share;
  Replays fake;
  EarlyReplays early(share, 1, {}, false, fake.replay());
  const placer::Plan p = plan(4, 100);
  early.kept(p);
  EXPECT_EQ(fake.begun(1), std::vector<int>{4});
  early.settle(std::vector<const placer::Plan*>{&p});
  std::atomic<bool> ran{false};
  std::thread::id on;
  int nice = 0;
  ASSERT_TRUE(early.lend([&] {
    on = std::this_thread::get_id();
    nice = getpriority(PRIO_PROCESS, 0);  // Linux: the calling thread's
    ran = true;
  }));
  EXPECT_FALSE(ran);  // not before the replay has ended
  fake.finish(4);
  early.wait_lent();
  EXPECT_TRUE(ran);
  EXPECT_NE(on, std::this_thread::get_id());
  EXPECT_EQ(nice, 19);  // the verification's own threads keep the cores
  const auto out = early.take(p);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->time, Time::milliseconds(101));
  EXPECT_FALSE(early.lend([] {}));
}

// Two plans kept for K = 2 with runs and series of 8 links, p (100 ms) replayed, q's (120 ms)
// replay begun and running until the test finishes it.
struct TwoKept {
  TwoThreads share;
  Replays fake;
  EarlyReplays early{share, 2, {}, true, fake.replay(), 8, fake.add_series()};
  const placer::Plan p = plan(4, 100);
  const placer::Plan q = plan(6, 120);
  TwoKept() {
    early.kept(p);
    early.kept(q);
    fake.finish(4);
    EXPECT_EQ(fake.begun(2), (std::vector<int>{4, 6}));  // q before any series
  }
};

// Once every plan of the set has been replayed, the free thread adds the busiest links' series
// to the replay of the least time (for `nest run`), once; the verification takes it with them.
TEST(EarlyReplays, TheLeastReplayGetsItsSeriesOnceEveryPlanIsReplayed) {
  TwoKept two;
  auto& [share, fake, early, p, q] = two;
  fake.finish(6);
  EXPECT_EQ(fake.series(1), std::vector<int>{4});
  early.settle(std::vector<const placer::Plan*>{&p, &q});
  const auto best = early.take(p);
  ASSERT_TRUE(best.has_value() && best->run.has_value());
  EXPECT_EQ(best->series, 8);
  ASSERT_EQ(best->run->link_series.size(), 1u);
  EXPECT_EQ(best->run->link_series[0].link, 7u);
  const auto other = early.take(q);
  ASSERT_TRUE(other.has_value() && other->run.has_value());
  EXPECT_EQ(other->series, 0);
  EXPECT_TRUE(other->run->link_series.empty());
  EXPECT_EQ(fake.series(1).size(), 1u);
}

// After `settle` the lent thread, once the verification's queue is empty, adds the series to
// the least replay of the final candidates, though a final one is left for the verification.
TEST(EarlyReplays, TheLentThreadAddsTheSeriesAfterTheQueue) {
  TwoThreads share;
  Replays fake;
  EarlyReplays early(share, 3, {}, true, fake.replay(), 8, fake.add_series());
  const placer::Plan p = plan(4, 100);
  const placer::Plan q = plan(6, 120);
  const placer::Plan r = plan(8, 130);
  early.kept(p);
  early.kept(q);
  early.kept(r);
  fake.finish(4);
  EXPECT_EQ(fake.begun(2), (std::vector<int>{4, 6}));
  early.settle(std::vector<const placer::Plan*>{&p, &q, &r});
  ASSERT_TRUE(early.lend([] {}));
  fake.finish(6);
  early.wait_lent();
  const auto best = early.take(p);  // waits for the series
  ASSERT_TRUE(best.has_value());
  EXPECT_EQ(best->series, 8);
  EXPECT_EQ(fake.series(1), std::vector<int>{4});
  const auto second = early.take(q);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->series, 0);
  EXPECT_FALSE(early.take(r).has_value());  // never begun: the verification replays it
  EXPECT_EQ(fake.begun(2).size(), 2u);
}

// After `settle`, a thread that would only wait for a replay still running (the
// verification's) adds the series of the least replay so far itself, once: the replays' thread
// is busy with the other (`series_meanwhile`, as `nest run` calls it before taking the replays).
TEST(EarlyReplays, TheWaitingThreadAddsTheSeriesWhileAReplayRuns) {
  TwoKept two;
  auto& [share, fake, early, p, q] = two;
  early.settle(std::vector<const placer::Plan*>{&p, &q});
  early.series_meanwhile();
  EXPECT_EQ(fake.series_threads(), std::vector<std::thread::id>{std::this_thread::get_id()});
  EXPECT_EQ(fake.series(1), std::vector<int>{4});
  early.series_meanwhile();  // p's series are taken: nothing more
  fake.finish(6);
  const auto best = early.take(p);
  ASSERT_TRUE(best.has_value() && best->run.has_value());
  EXPECT_EQ(best->series, 8);
  ASSERT_EQ(best->run->link_series.size(), 1u);
  const auto other = early.take(q);
  ASSERT_TRUE(other.has_value() && other->run.has_value());
  EXPECT_EQ(other->series, 0);
  EXPECT_EQ(fake.series_threads().size(), 1u);
}

// Dropping the replays while one runs stops it (the job's destructor, or an error in the
// search): no thread is left behind.
TEST(EarlyReplays, DroppedWhileReplayingStopsTheReplay) {
  TwoThreads share;
  Replays fake;
  {
    EarlyReplays early(share, 1, {}, false, fake.replay());
    early.kept(plan(3, 10));
    EXPECT_EQ(fake.begun(1), std::vector<int>{3});
  }
  EXPECT_EQ(fake.stopped(1), std::vector<int>{3});
  const std::lock_guard lock(share.mutex);
  EXPECT_EQ(share.held, 0);
}

}  // namespace
}  // namespace nest::job::detail
