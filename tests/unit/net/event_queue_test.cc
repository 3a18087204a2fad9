#include "nest/net/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/rng.h"

namespace nest::net {
namespace {

Time ps(std::int64_t n) { return Time::picoseconds(n); }

std::vector<std::uint32_t> drain(EventQueue& q) {
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().target);
  return order;
}

TEST(EventQueue, PopsByTimeThenPriorityThenInsertionOrder) {
  EventQueue q;
  q.push(ps(20), 0, 0, 1, 0);
  q.push(ps(10), 5, 0, 2, 0);
  q.push(ps(10), -1, 0, 3, 0);
  q.push(ps(10), 5, 0, 4, 0);
  q.push(ps(30), -9, 0, 5, 0);
  q.push(ps(10), 0, 0, 6, 0);
  EXPECT_EQ(q.size(), 6U);
  EXPECT_EQ(q.next_time(), ps(10));
  EXPECT_EQ(drain(q), (std::vector<std::uint32_t>{3, 6, 2, 4, 1, 5}));
  EXPECT_EQ(q.size(), 0U);
}

TEST(EventQueue, SameKeyEventsShareOneHeapRecord) {
  EventQueue q;
  for (std::uint32_t i = 0; i < 1000; ++i) q.push(ps(7), 0, 0, i, 0);
  q.push(ps(3), 0, 0, 5000, 0);
  EXPECT_EQ(q.size(), 1001U);
  EXPECT_EQ(q.runs(), 2U);
  const auto order = drain(q);
  ASSERT_EQ(order.size(), 1001U);
  EXPECT_EQ(order[0], 5000U);
  for (std::uint32_t i = 0; i < 1000; ++i) EXPECT_EQ(order[i + 1], i);
}

// `pop(soon)` names the runs its moves bring to the base or into a bucket of the lowest digit
// (within 255 ps of the new base), by hand, from base 0: 300 and 301 share the bucket of digit
// position 1, value 1; 555 has value 2; 100,000 and 100,300 share position 2, value 1. The
// first pop moves that bucket in its order (301 was pushed first): 301 to position 0 and 300 to
// the base, both named. Then 301 reaches the base
// (named again) and 555. Moving position 2's bucket brings 100,000 to the base (named) but
// 100,300 only to position 1 (100,300 ^ 100,000 = 0x16C): named when it reaches the base. The
// events pop in the same order as with `pop()`, each with its kind.
TEST(EventQueue, PopNamesTheRunsItBringsWithin255Picoseconds) {
  EventQueue q;
  const std::vector<std::int64_t> times{100'300, 555, 301, 100'000, 300};
  for (std::size_t i = 0; i < times.size(); ++i) {
    q.push(ps(times[i]), 0, static_cast<std::uint8_t>(i + 1), static_cast<std::uint32_t>(i), 0);
  }
  std::vector<std::uint32_t> named;
  std::vector<std::uint32_t> popped;
  while (!q.empty()) {
    const QueuedEvent e = q.pop([&](std::uint32_t target, std::uint8_t kind) {
      EXPECT_EQ(kind, target + 1);
      named.push_back(target);
    });
    EXPECT_EQ(e.kind, e.target + 1);
    popped.push_back(e.target);
  }
  EXPECT_EQ(popped, (std::vector<std::uint32_t>{4, 2, 1, 3, 0}));
  EXPECT_EQ(named, (std::vector<std::uint32_t>{2, 4, 2, 1, 3, 0}));
}

TEST(EventQueue, EventsPushedWhilePoppingKeepTheOrder) {
  // While the run at (10, 0) is being consumed, an event at (10, -1) must come next, and one at
  // (10, 0) after the rest of the run.
  EventQueue q;
  q.push(ps(10), 0, 0, 1, 0);
  q.push(ps(10), 0, 0, 2, 0);
  q.push(ps(10), 0, 0, 3, 0);
  std::vector<std::uint32_t> order{q.pop().target};
  q.push(ps(10), -1, 0, 9, 0);
  q.push(ps(10), 0, 0, 4, 0);
  const auto rest = drain(q);
  order.insert(order.end(), rest.begin(), rest.end());
  EXPECT_EQ(order, (std::vector<std::uint32_t>{1, 9, 2, 3, 4}));
  // A run emptied by pop is closed: a later same-key event opens a new one.
  q.push(ps(10), 0, 0, 7, 0);
  EXPECT_EQ(q.runs(), 1U);
  EXPECT_EQ(q.pop().target, 7U);
}

TEST(EventQueue, MatchesSortedOrderUnderRandomInterleaving) {
  // Oracle: a stable sort of all pushes by (time, priority); few distinct keys so that runs
  // form, more keys than the run cache holds so that it misses too.
  Rng rng(5);
  EventQueue q;
  std::vector<std::tuple<std::int64_t, int, std::uint32_t>> pushed;
  std::vector<std::uint32_t> popped;
  std::int64_t now = 0;
  for (std::uint32_t i = 0; i < 20'000; ++i) {
    const auto time = now + static_cast<std::int64_t>(rng.below(6));
    const auto priority = static_cast<int>(rng.below(3)) - 1;
    q.push(ps(time), priority, 0, i, 0);
    pushed.emplace_back(time, priority, i);
    if (rng.below(3) == 0) {
      const QueuedEvent e = q.pop();
      now = e.time.ps();
      popped.push_back(e.target);
    }
  }
  while (!q.empty()) popped.push_back(q.pop().target);
  // Replay the same interleaving against the oracle.
  Rng again(5);
  std::vector<std::tuple<std::int64_t, int, std::uint32_t>> pending;
  std::vector<std::uint32_t> expected;
  now = 0;
  auto pop_oracle = [&] {
    const auto it = std::min_element(pending.begin(), pending.end());
    expected.push_back(std::get<2>(*it));
    now = std::get<0>(*it);
    pending.erase(it);
  };
  for (std::uint32_t i = 0; i < 20'000; ++i) {
    const auto time = now + static_cast<std::int64_t>(again.below(6));
    const auto priority = static_cast<int>(again.below(3)) - 1;
    pending.emplace_back(time, priority, i);
    if (again.below(3) == 0) pop_oracle();
  }
  while (!pending.empty()) pop_oracle();
  EXPECT_EQ(popped, expected);
}

// A reserved position pops where an event pushed at `reserve()` would have, although pushed
// later: 3 (reserved between 1 and 2, all at 10 ps) pops between them, and the run that 1 opened
// does not take 2 (it would pop 2 before 3).
TEST(EventQueue, AReservedEventPopsWhereItWasReserved) {
  EventQueue q;
  q.push(ps(10), 0, 0, 1, 0);
  const std::uint64_t position = q.reserve();
  q.push(ps(10), 0, 0, 2, 0);
  q.push(ps(5), 0, 0, 4, 0);
  EXPECT_EQ(q.pop().target, 4U);
  q.push_reserved(ps(10), 0, 0, 3, 7, position);
  EXPECT_EQ(q.size(), 3U);
  EXPECT_EQ(q.runs(), 3U);
  EXPECT_EQ(q.peek().target, 1U);
  EXPECT_EQ(q.pop().target, 1U);
  const QueuedEvent reserved = q.pop();
  EXPECT_EQ(reserved.target, 3U);
  EXPECT_EQ(reserved.stamp, 7U);
  EXPECT_EQ(reserved.time, ps(10));
  EXPECT_EQ(q.pop().target, 2U);
  EXPECT_TRUE(q.empty());
  try {
    q.push_reserved(ps(9), 0, 0, 5, 0, q.reserve());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "internal error: event queue: event at 9 ps pushed before the last popped "
                 "event (10 ps)");
  }
}

// What the simulator does with a drain end that moves later: it reserves a position and pushes
// the event there once an earlier event comes up. Oracle: every event ordered by (time,
// priority, the step at which it was pushed or reserved), under random interleaving with few
// distinct keys (runs form, and reserved events land among them).
TEST(EventQueue, ReservedEventsMatchTheOrderOfTheirReservations) {
  Rng rng(11);
  EventQueue q;
  using Key = std::tuple<std::int64_t, int, std::uint64_t, std::uint32_t>;
  std::vector<Key> pending;  // the oracle: (time, priority, step, target)
  struct Reserved {
    std::uint64_t position;
    std::uint64_t step;
    std::uint32_t target;
  };
  std::vector<Reserved> reserved;
  std::uint64_t step = 0;
  std::int64_t now = 0;
  std::size_t popped = 0;
  for (std::uint32_t i = 0; i < 20'000; ++i) {
    const auto time = now + static_cast<std::int64_t>(rng.below(6));
    const auto priority = static_cast<int>(rng.below(2));
    switch (rng.below(4)) {
      case 0:  // reserve now, push later
        reserved.push_back({q.reserve(), step++, i});
        break;
      case 1:  // push an event reserved earlier
        if (!reserved.empty()) {
          const std::size_t k = rng.below(reserved.size());
          const Reserved r = reserved[k];
          reserved.erase(reserved.begin() + static_cast<std::ptrdiff_t>(k));
          q.push_reserved(ps(time), priority, 0, r.target, 0, r.position);
          pending.emplace_back(time, priority, r.step, r.target);
        }
        break;
      default:
        q.push(ps(time), priority, 0, i, 0);
        pending.emplace_back(time, priority, step++, i);
    }
    if (!pending.empty() && rng.below(3) == 0) {
      const auto it = std::min_element(pending.begin(), pending.end());
      const QueuedEvent e = q.pop();
      ASSERT_EQ(e.target, std::get<3>(*it)) << "pop " << popped;
      ASSERT_EQ(e.time, ps(std::get<0>(*it)));
      now = std::get<0>(*it);
      pending.erase(it);
      ++popped;
    }
  }
  while (!pending.empty()) {
    const auto it = std::min_element(pending.begin(), pending.end());
    ASSERT_EQ(q.pop().target, std::get<3>(*it));
    pending.erase(it);
    ++popped;
  }
  EXPECT_TRUE(q.empty());
  EXPECT_GT(popped, 12'000U);
}

TEST(EventQueue, EraseIfDropsStaleEventsAndKeepsOrder) {
  EventQueue q;
  for (std::uint32_t i = 0; i < 100; ++i) {
    q.push(ps(1000 - static_cast<std::int64_t>(i / 10)), 0, 0, i, i % 3);  // 10 runs of 10
  }
  const auto removed = q.erase_if([](const QueuedEvent& e) { return e.stamp == 1; });
  EXPECT_EQ(removed, 33U);
  EXPECT_EQ(q.size(), 67U);
  // Runs whose events were all stale are gone; the others still take appends at their tail.
  EXPECT_EQ(q.erase_if([](const QueuedEvent& e) { return e.time == ps(991); }), 7U);
  EXPECT_EQ(q.runs(), 9U);
  std::vector<QueuedEvent> popped;
  while (!q.empty()) popped.push_back(q.pop());
  ASSERT_EQ(popped.size(), 60U);
  for (std::size_t i = 1; i < popped.size(); ++i) {
    EXPECT_NE(popped[i].stamp, 1U);
    const bool ordered =
        popped[i - 1].time < popped[i].time ||
        (popped[i - 1].time == popped[i].time && popped[i - 1].target < popped[i].target);
    EXPECT_TRUE(ordered) << i;
  }
}

// Oracle for the tests below: the pending events in (time, priority, insertion) order.
struct Pending {
  std::int64_t time;
  int priority;
  std::uint32_t id;
  auto operator<=>(const Pending&) const = default;
};

// Delays from 0 to 2^44 ps, so that events sit in many radix buckets and move between them,
// and runs of equal keys (a few times repeat); a peek before every pop must name the event
// popped; stale events are erased now and then.
void expect_oracle_order() {
  Rng rng(11);
  EventQueue q;
  std::vector<Pending> pending;
  std::int64_t now = 0;
  std::uint32_t id = 0;
  std::size_t popped = 0;
  for (int round = 0; round < 60'000; ++round) {
    const std::uint64_t scale = std::uint64_t{1} << rng.below(45);
    // One push in four repeats a recent time, so that runs of equal keys form.
    const auto time = rng.below(4) == 0 && !pending.empty()
                          ? std::max(now, pending.back().time)
                          : now + static_cast<std::int64_t>(rng.below(scale));
    const int priority = static_cast<int>(rng.below(4)) - 2;
    q.push(ps(time), priority, 1, id, id % 5);
    pending.push_back({time, priority, id});
    ++id;
    while (!pending.empty() && rng.below(5) < 2) {
      const auto it = std::min_element(pending.begin(), pending.end());
      ASSERT_EQ(q.next_time(), ps(it->time));
      ASSERT_EQ(q.peek().target, it->id);
      const QueuedEvent e = q.pop();
      ASSERT_EQ(e.target, it->id);
      ASSERT_EQ(e.time, ps(it->time));
      ASSERT_EQ(e.priority, it->priority);
      ASSERT_EQ(e.kind, 1U);
      ASSERT_EQ(e.stamp, it->id % 5);
      now = it->time;
      pending.erase(it);
      ++popped;
    }
    if (round % 9'999 == 0) {
      const auto stale = [](const QueuedEvent& e) { return e.stamp == 3; };
      const std::size_t expected = static_cast<std::size_t>(std::count_if(
          pending.begin(), pending.end(), [](const Pending& p) { return p.id % 5 == 3; }));
      ASSERT_EQ(q.erase_if(stale), expected);
      std::erase_if(pending, [](const Pending& p) { return p.id % 5 == 3; });
    }
    ASSERT_EQ(q.size(), pending.size());
  }
  std::sort(pending.begin(), pending.end());
  for (const Pending& p : pending) ASSERT_EQ(q.pop().target, p.id);
  EXPECT_TRUE(q.empty());
  EXPECT_GT(popped, 30'000U);
}

TEST(EventQueue, MatchesTheOracleOverWideTimeSpansWithPeeksAndErasures) { expect_oracle_order(); }

TEST(EventQueue, SameTimeEventsOutOfOrderAtTheBaseKeepPriorityThenInsertion) {
  // Events reach the base (the time being popped) from a redistributed bucket and from pushes
  // made while it is being consumed, with falling priorities: the FIFO and the heap must merge.
  EventQueue q;
  q.push(ps(1 << 20), 2, 0, 1, 0);
  q.push(ps(1 << 20), 0, 0, 2, 0);
  q.push(ps(5), 0, 0, 0, 0);
  q.push(ps(1 << 20), 1, 0, 3, 0);
  EXPECT_EQ(q.pop().target, 0U);
  EXPECT_EQ(q.pop().target, 2U);  // (2^20, 0)
  q.push(ps(1 << 20), -1, 0, 4, 0);
  q.push(ps(1 << 20), 1, 0, 5, 0);
  q.push(ps(1 << 20), 3, 0, 6, 0);
  EXPECT_EQ(drain(q), (std::vector<std::uint32_t>{4, 3, 5, 1, 6}));
}

TEST(EventQueue, HandlesTimesNearTheHorizon) {
  EventQueue q;
  const std::int64_t far = std::int64_t{1} << 62;
  q.push(ps(far - 1), 0, 0, 1, 0);
  q.push(ps(far - 2), 0, 0, 2, 0);
  q.push(ps(0), 0, 0, 3, 0);
  q.push(ps(std::numeric_limits<std::int64_t>::max()), 0, 0, 4, 0);
  EXPECT_EQ(drain(q), (std::vector<std::uint32_t>{3, 2, 1, 4}));
}

TEST(EventQueue, RejectsEventsBeforeTheLastPoppedOne) {
  EventQueue q;
  q.push(ps(100), 0, 0, 1, 0);
  q.push(ps(200), 0, 0, 2, 0);
  EXPECT_EQ(q.pop().target, 1U);
  q.push(ps(100), 0, 0, 3, 0);  // the same time is fine
  try {
    q.push(ps(99), 0, 0, 4, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "internal error: event queue: event at 99 ps pushed before the last popped "
                 "event (100 ps)");
  }
  EXPECT_THROW(q.push(ps(-1), 0, 0, 5, 0), Error);
  EXPECT_EQ(drain(q), (std::vector<std::uint32_t>{3, 2}));
}

TEST(EventQueue, ClearForgetsEventsAndTheLastPoppedTime) {
  EventQueue q;
  q.push(ps(500), 0, 0, 1, 0);
  q.push(ps(900), 0, 0, 2, 0);
  EXPECT_EQ(q.pop().target, 1U);
  q.clear();
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.size(), 0U);
  q.push(ps(10), 0, 0, 3, 0);  // before 500: allowed after clear
  q.push(ps(10), -1, 0, 4, 0);
  EXPECT_EQ(drain(q), (std::vector<std::uint32_t>{4, 3}));
}

}  // namespace
}  // namespace nest::net
