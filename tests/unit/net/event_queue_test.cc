#include "nest/net/event_queue.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace nest::net {
namespace {

Time ps(std::int64_t n) { return Time::picoseconds(n); }

TEST(EventQueue, PopsByTimeThenPriorityThenInsertionOrder) {
  EventQueue q;
  q.push(ps(20), 0, 0, 1, 0);
  q.push(ps(10), 5, 0, 2, 0);
  q.push(ps(10), -1, 0, 3, 0);
  q.push(ps(10), 5, 0, 4, 0);
  q.push(ps(30), -9, 0, 5, 0);
  q.push(ps(10), 0, 0, 6, 0);
  std::vector<std::uint32_t> order;
  while (!q.empty()) order.push_back(q.pop().target);
  EXPECT_EQ(order, (std::vector<std::uint32_t>{3, 6, 2, 4, 1, 5}));
}

TEST(EventQueue, SequenceNumbersStartAtOneAndIncrease) {
  EventQueue q;
  EXPECT_EQ(q.push(ps(5), 0, 0, 0, 0), 1U);
  EXPECT_EQ(q.push(ps(1), 0, 0, 0, 0), 2U);
  EXPECT_EQ(q.top().sequence, 2U);
  EXPECT_EQ(q.size(), 2U);
}

TEST(EventQueue, EraseIfDropsStaleRecordsAndKeepsOrder) {
  EventQueue q;
  for (std::uint32_t i = 0; i < 100; ++i) {
    q.push(ps(1000 - static_cast<std::int64_t>(i % 10)), 0, 0, i, i % 3);
  }
  const auto removed = q.erase_if([](const QueuedEvent& e) { return e.stamp == 1; });
  EXPECT_EQ(removed, 33U);
  EXPECT_EQ(q.size(), 67U);
  QueuedEvent previous = q.pop();
  EXPECT_NE(previous.stamp, 1U);
  while (!q.empty()) {
    const QueuedEvent next = q.pop();
    EXPECT_NE(next.stamp, 1U);
    EXPECT_TRUE(EventQueue::later(next, previous));
    previous = next;
  }
}

}  // namespace
}  // namespace nest::net
