#include "nest/net/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <tuple>
#include <vector>

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

}  // namespace
}  // namespace nest::net
