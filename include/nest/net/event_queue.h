#pragma once
/// \file
/// The event list of one simulation: a binary min-heap of small records ordered by
/// (time, priority, sequence). The sequence number is assigned at insertion and unique, so the
/// order is total and every run is bit-for-bit reproducible; same-time, same-priority events pop
/// in insertion order.
///
/// The queue stores no callbacks. An event names a `target` (an index into its owner's table)
/// with a `kind` and a `stamp`; the owner decides what they mean. Cancellation and rescheduling
/// are done by the owner with lazy deletion: it bumps the target's stamp, and the superseded
/// record is dropped when it reaches the top (or by `erase_if` when stale records pile up).
///
/// | operation               | cost                | notes                                    |
/// |-------------------------|---------------------|------------------------------------------|
/// | `push`                  | O(log n)            | amortized O(1) allocation (vector growth) |
/// | `top`                   | O(1)                |                                          |
/// | `pop`                   | O(log n)            |                                          |
/// | cancel (by the owner)   | O(1)                | stamp bump; the stale record stays       |
/// | `erase_if`              | O(n)                | removes stale records, rebuilds the heap |
/// | memory                  | 32 bytes per record | stale records included until removed     |
///
/// n counts stale records too. Not thread-safe; one queue per simulation object.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "nest/core/units.h"

namespace nest::net {

/// One queued event. The queue reads only `time`, `priority` and `sequence`.
struct QueuedEvent {
  Time time;                   ///< when it runs, picoseconds
  std::uint64_t sequence = 0;  ///< insertion order, unique within a queue, starts at 1
  int priority = 0;            ///< among same-time events, lower runs first
  std::uint32_t target = 0;    ///< owner's index (an action slot, a flow slot, ...)
  std::uint32_t stamp = 0;     ///< owner's generation of `target` when pushed
  std::uint8_t kind = 0;       ///< owner's event type
};

/// Binary min-heap of `QueuedEvent` by (time, priority, sequence).
class EventQueue {
 public:
  /// Inserts an event and returns its sequence number. O(log n).
  std::uint64_t push(Time time, int priority, std::uint8_t kind, std::uint32_t target,
                     std::uint32_t stamp) {
    const std::uint64_t sequence = next_sequence_++;
    heap_.push_back(QueuedEvent{time, sequence, priority, target, stamp, kind});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    return sequence;
  }

  /// The earliest event. Precondition: not empty.
  [[nodiscard]] const QueuedEvent& top() const noexcept { return heap_.front(); }

  /// Removes and returns the earliest event. Precondition: not empty. O(log n).
  QueuedEvent pop() {
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    const QueuedEvent event = heap_.back();
    heap_.pop_back();
    return event;
  }

  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  /// Records held, stale ones included.
  [[nodiscard]] std::size_t size() const noexcept { return heap_.size(); }
  /// Reserves room for `n` records.
  void reserve(std::size_t n) { heap_.reserve(n); }

  /// Removes every record for which `stale(record)` is true and restores the heap. O(n).
  /// Sequence numbers are kept, so the order of the remaining records does not change.
  template <class Predicate>
  std::size_t erase_if(Predicate stale) {
    const auto removed = std::erase_if(heap_, stale);
    std::make_heap(heap_.begin(), heap_.end(), Later{});
    return removed;
  }

  /// True when `a` runs after `b`: the heap comparator that puts the earliest event on top.
  [[nodiscard]] static bool later(const QueuedEvent& a, const QueuedEvent& b) noexcept {
    if (a.time != b.time) return a.time > b.time;
    if (a.priority != b.priority) return a.priority > b.priority;
    return a.sequence > b.sequence;
  }

 private:
  // A function object (not a function pointer) so that the heap algorithms inline it.
  struct Later {
    bool operator()(const QueuedEvent& a, const QueuedEvent& b) const noexcept {
      return later(a, b);
    }
  };

  std::vector<QueuedEvent> heap_;
  std::uint64_t next_sequence_ = 1;
};

}  // namespace nest::net
