#pragma once
/// \file
/// The event list of one simulation: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster
/// algorithms for the shortest path problem", JACM 1990) on the time, ordered by (time, priority,
/// sequence). The sequence number is the insertion order, so the order is total and every run
/// is bit-for-bit reproducible; same-time, same-priority events pop in insertion order.
///
/// Simulated time never goes back: every event is pushed at or after the time of the last one
/// popped (`push` throws otherwise), and a radix heap uses that. Let the *base* be the time of
/// the last event popped. Events at the base are kept apart; every other event sits in the
/// bucket of the highest 8-bit digit in which its time differs from the base (8 digit positions
/// x 256 values), so that every time in a bucket is smaller than every time in a higher one.
/// A push appends to its bucket in O(1). Once the events at the base are gone, `pop` takes the
/// lowest non-empty bucket, makes its earliest time the new base and moves its events, each to
/// a bucket of a lower digit position (at most 8 moves per event in all, about 2 in practice),
/// every move a sequential append. So the cost per event does not grow with the number pending
/// the way a binary heap's cache misses do (results/net_bench.md: the binary heap of runs this
/// replaced ran the queue-only hold model at 27 M events/s with 2^10 pending and 2.4 M/s with
/// 2^20; this one at 40-49 M/s and 19-23 M/s).
///
/// The events at the base keep (priority, sequence) order: those that arrive in that order (the
/// usual case: same-time events pushed one after another) are appended to a FIFO, the others go
/// to a small binary heap, and `pop` takes the smaller of the two heads. Each bucket remembers
/// its earliest event, so `peek` and `next_time` are O(1).
///
/// The queue stores no callbacks. An event names a `target` (an index into its owner's table)
/// with a `kind` and a `stamp`; the owner decides what they mean. Cancellation and rescheduling
/// are done by the owner with lazy deletion: it bumps the target's stamp, and the superseded
/// record is dropped when it is popped (or by `erase_if` when stale records pile up).
///
/// | operation             | cost                                         | notes |
/// |-----------------------|----------------------------------------------|------------------------|
/// | `push`                | O(1); O(log m) when out of order at the base | m = events at the base
/// | | `next_time`, `peek`   | O(1)                                         | | | `pop` | O(1)
/// amortized: <= 8 moves per event         |                        | | cancel (by the owner) |
/// O(1)                                         | stamp bump, record stays| | `erase_if`, `clear`
/// | O(n + 2048)                                  | drops stale records    | | memory | 32 bytes
/// per event + 56 KiB of buckets       | stale ones included    |
///
/// Storage is pooled: after warm-up, push and pop allocate nothing. Not thread-safe; one queue
/// per simulation object.

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/units.h"

namespace nest::net {

/// One event as popped. The queue orders by `time` and `priority` (then insertion); `target`,
/// `stamp` and `kind` are the owner's.
struct QueuedEvent {
  Time time;                 ///< when it runs, picoseconds
  int priority = 0;          ///< among same-time events, lower runs first
  std::uint32_t target = 0;  ///< owner's index (an action slot, a flow slot, ...)
  std::uint32_t stamp = 0;   ///< owner's generation of `target` when pushed
  std::uint8_t kind = 0;     ///< owner's event type
};

/// Radix heap of events by (time, priority, sequence).
class EventQueue {
 public:
  /// Inserts an event after every queued event with an earlier or equal (time, priority).
  /// `time` must be >= 0 and >= the time of the last event popped (simulated time does not go
  /// back), else throws `Error` (internal). O(1).
  void push(Time time, int priority, std::uint8_t kind, std::uint32_t target, std::uint32_t stamp) {
    if (time.ps() < 0 || static_cast<std::uint64_t>(time.ps()) < base_) throw_before_base(time);
    ++size_;
    place(Item{static_cast<std::uint64_t>(time.ps()), next_sequence_++, priority, target, stamp,
               kind});
  }

  /// True when no event (stale or not) is held.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Events held, stale ones included.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Time of the earliest event. Precondition: not empty. O(1).
  [[nodiscard]] Time next_time() const noexcept { return to_time(front().time); }

  /// The earliest event, left in place. Precondition: not empty. O(1).
  [[nodiscard]] QueuedEvent peek() const noexcept { return to_event(front()); }

  /// Removes and returns the earliest event. Precondition: not empty.
  QueuedEvent pop() {
    if (base_size() == 0) advance_base();
    --size_;
    if (fifo_head_ < fifo_.size() && (heap_.empty() || earlier(fifo_[fifo_head_], heap_.front()))) {
      const Item item = fifo_[fifo_head_++];
      if (fifo_head_ == fifo_.size()) {
        fifo_.clear();
        fifo_head_ = 0;
      }
      return to_event(item);
    }
    const Item item = heap_.front();
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    heap_.pop_back();
    return to_event(item);
  }

  /// Removes every event for which `stale(event)` is true. O(events). The order of the others
  /// does not change.
  template <class Predicate>
  std::size_t erase_if(Predicate stale) {
    const auto drop = [&](const Item& item) { return stale(to_event(item)); };
    std::size_t removed = 0;
    // The base: what is left of the FIFO and the heap, merged back into one sorted FIFO.
    std::vector<Item> base(fifo_.begin() + static_cast<std::ptrdiff_t>(fifo_head_), fifo_.end());
    base.insert(base.end(), heap_.begin(), heap_.end());
    const std::size_t before = base.size();
    std::erase_if(base, drop);
    removed += before - base.size();
    std::sort(base.begin(), base.end(), [](const Item& a, const Item& b) { return earlier(a, b); });
    fifo_ = std::move(base);
    fifo_head_ = 0;
    heap_.clear();
    for (std::size_t b = 0; b < kBuckets; ++b) {
      std::vector<Item>& bucket = buckets_[b];
      if (bucket.empty()) continue;
      removed += std::erase_if(bucket, drop);
      if (bucket.empty()) {
        unmark(b);
        continue;
      }
      std::uint32_t best = 0;
      for (std::uint32_t i = 1; i < bucket.size(); ++i) {
        if (earlier(bucket[i], bucket[best])) best = i;
      }
      earliest_[b] = best;
    }
    size_ -= removed;
    return removed;
  }

  /// Removes every event and forgets the time of the last one popped: the queue is as new
  /// (its memory kept).
  void clear() noexcept {
    for (std::vector<Item>& bucket : buckets_) bucket.clear();
    fifo_.clear();
    fifo_head_ = 0;
    heap_.clear();
    occupied_ = {};
    summary_ = 0;
    base_ = 0;
    next_sequence_ = 0;
    size_ = 0;
  }

 private:
  // Buckets by (position, value) of the highest 8-bit digit in which a time differs from the
  // base: 8 positions x 256 values. The index position * 256 + value increases with the times a
  // bucket holds, so the lowest non-empty bucket holds the earliest events. (4- and 6-bit digits
  // were measured too: more moves per event, 2-3% more instructions in the all-to-all and up to
  // 2x slower hold models with 2^16 pending.)
  static constexpr int kDigitBits = 8;
  static constexpr std::size_t kDigits = std::size_t{1} << kDigitBits;
  static constexpr std::size_t kPositions = (64 + kDigitBits - 1) / kDigitBits;
  static constexpr std::size_t kBuckets = kPositions * kDigits;
  static constexpr std::size_t kWords = (kBuckets + 63) / 64;
  static_assert(kWords <= 64);

  struct Item {
    std::uint64_t time;
    std::uint64_t sequence;
    int priority;
    std::uint32_t target;
    std::uint32_t stamp;
    std::uint8_t kind;
  };
  static_assert(sizeof(Item) == 32);

  [[nodiscard]] static bool earlier(const Item& a, const Item& b) noexcept {
    if (a.time != b.time) return a.time < b.time;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.sequence < b.sequence;
  }
  // A function object (not a function pointer) so that the heap algorithms inline it.
  struct Later {
    bool operator()(const Item& a, const Item& b) const noexcept { return earlier(b, a); }
  };

  [[nodiscard]] static std::uint64_t bit(std::size_t b) noexcept {
    return std::uint64_t{1} << (b % 64);
  }
  [[nodiscard]] static Time to_time(std::uint64_t ps) noexcept {
    return Time::picoseconds(static_cast<std::int64_t>(ps));
  }
  [[nodiscard]] static QueuedEvent to_event(const Item& item) noexcept {
    return QueuedEvent{to_time(item.time), item.priority, item.target, item.stamp, item.kind};
  }
  [[nodiscard]] std::size_t base_size() const noexcept {
    return fifo_.size() - fifo_head_ + heap_.size();
  }
  // The lowest non-empty bucket. Precondition: one is.
  [[nodiscard]] std::size_t lowest_bucket() const noexcept {
    const auto w = static_cast<std::size_t>(std::countr_zero(summary_));
    return w * 64 + static_cast<std::size_t>(std::countr_zero(occupied_[w]));
  }
  void mark(std::size_t b) noexcept {
    occupied_[b / 64] |= bit(b);
    summary_ |= std::uint64_t{1} << (b / 64);
  }
  void unmark(std::size_t b) noexcept {
    occupied_[b / 64] &= ~bit(b);
    if (occupied_[b / 64] == 0) summary_ &= ~(std::uint64_t{1} << (b / 64));
  }
  // The earliest event. Precondition: not empty.
  [[nodiscard]] const Item& front() const noexcept {
    if (base_size() == 0) {
      const std::size_t b = lowest_bucket();
      return buckets_[b][earliest_[b]];
    }
    if (fifo_head_ == fifo_.size()) return heap_.front();
    if (heap_.empty() || earlier(fifo_[fifo_head_], heap_.front())) return fifo_[fifo_head_];
    return heap_.front();
  }

  // Files an event (time >= base) in the base or in its bucket.
  void place(const Item& item) {
    const std::uint64_t differ = item.time ^ base_;
    if (differ == 0) {
      // At the base: in order after the FIFO's last (the usual case), else into the heap.
      if (fifo_.size() == fifo_head_ || earlier(fifo_.back(), item)) {
        fifo_.push_back(item);
      } else {
        heap_.push_back(item);
        std::push_heap(heap_.begin(), heap_.end(), Later{});
      }
      return;
    }
    const int position = (63 - std::countl_zero(differ)) / kDigitBits;
    const std::size_t b = static_cast<std::size_t>(position) * kDigits +
                          ((item.time >> (position * kDigitBits)) & (kDigits - 1));
    std::vector<Item>& bucket = buckets_[b];
    if (bucket.empty()) {
      mark(b);
      earliest_[b] = 0;
    } else if (earlier(item, bucket[earliest_[b]])) {
      earliest_[b] = static_cast<std::uint32_t>(bucket.size());
    }
    bucket.push_back(item);
  }

  // The base is empty: the lowest bucket's earliest time becomes the base and its events move
  // to lower buckets (those at the new base to the base, in the bucket's order). Each event
  // moves to a lower digit position, so at most 8 times in all.
  void advance_base() {
    const std::size_t b = lowest_bucket();
    base_ = buckets_[b][earliest_[b]].time;
    unmark(b);
    spill_.swap(buckets_[b]);
    for (const Item& item : spill_) place(item);
    spill_.clear();
  }

  [[noreturn]] void throw_before_base(Time time) const {
    throw Error::internal("event queue: event at " + std::to_string(time.ps()) +
                          " ps pushed before the last popped event (" + std::to_string(base_) +
                          " ps)");
  }

  std::array<std::vector<Item>, kBuckets> buckets_;
  std::array<std::uint32_t, kBuckets> earliest_{};  // index of each bucket's earliest event
  std::array<std::uint64_t, kWords> occupied_{};    // bit b: bucket b is not empty
  std::uint64_t summary_ = 0;                       // bit w: occupied_[w] != 0
  std::vector<Item> fifo_;  // base events in (priority, sequence) order, from fifo_head_
  std::size_t fifo_head_ = 0;
  std::vector<Item> heap_;   // base events that came out of order
  std::vector<Item> spill_;  // scratch of advance_base
  std::uint64_t base_ = 0;   // time of the last popped event (0 before any)
  std::uint64_t next_sequence_ = 0;
  std::size_t size_ = 0;
};

}  // namespace nest::net
