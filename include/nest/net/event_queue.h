#pragma once
/// \file
/// The event list of one simulation: a binary min-heap ordered by (time, priority, sequence).
/// The sequence number is the insertion order, so the order is total and every run is
/// bit-for-bit reproducible; same-time, same-priority events pop in insertion order.
///
/// Runs: collectives make many events with the same timestamp (a step of a symmetric
/// collective ends everywhere at once). Events with equal (time, priority) are chained in a
/// *run* behind one heap record, so only the first of them pays a heap insertion and the others
/// an O(1) append. The order is unchanged: a new event joins the latest run of its
/// (time, priority) — every earlier event with that key is in that run or in an older one, so
/// the event still comes after all of them, as its sequence number says. Runs are found through a
/// small cache of recently opened ones; a miss only costs a new heap record.
///
/// The queue stores no callbacks. An event names a `target` (an index into its owner's table)
/// with a `kind` and a `stamp`; the owner decides what they mean. Cancellation and rescheduling
/// are done by the owner with lazy deletion: it bumps the target's stamp, and the superseded
/// record is dropped when it is popped (or by `erase_if` when stale records pile up).
///
/// | operation             | cost                                     | notes                    |
/// |-----------------------|------------------------------------------|--------------------------|
/// | `push`                | O(1) joining a cached run, else O(log r) | r = runs held            |
/// | `next_time`, `peek`   | O(1)                                     |                          |
/// | `pop`                 | O(1) within a run, O(log r) at its end   |                          |
/// | cancel (by the owner) | O(1)                                     | stamp bump, record stays |
/// | `erase_if`            | O(n + r)                                 | drops stale records      |
/// | memory                | 16 bytes per event + 48 per run          | stale ones included      |
///
/// Storage is pooled: after warm-up, push and pop allocate nothing. Not thread-safe; one queue
/// per simulation object.

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

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

/// Binary min-heap of runs of events, by (time, priority, sequence).
class EventQueue {
 public:
  /// Inserts an event after every queued event with an earlier or equal (time, priority).
  void push(Time time, int priority, std::uint8_t kind, std::uint32_t target, std::uint32_t stamp) {
    const std::uint32_t node = new_node(target, stamp, kind);
    for (const std::uint32_t r : open_) {
      if (r == kNone) continue;
      Run& run = runs_[r];
      if (run.time == time && run.priority == priority) {
        nodes_[run.tail].next = node;
        run.tail = node;
        ++size_;
        return;
      }
    }
    const std::uint32_t r = new_run(time, priority, node);
    open_[next_open_] = r;
    next_open_ = (next_open_ + 1) % kOpenRuns;
    heap_.push_back(Record{time, priority, r, next_sequence_++});
    std::push_heap(heap_.begin(), heap_.end(), Later{});
    ++size_;
  }

  /// True when no event (stale or not) is held.
  [[nodiscard]] bool empty() const noexcept { return heap_.empty(); }
  /// Events held, stale ones included.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Heap records (runs) held.
  [[nodiscard]] std::size_t runs() const noexcept { return heap_.size(); }
  /// Time of the earliest event. Precondition: not empty.
  [[nodiscard]] Time next_time() const noexcept { return heap_.front().time; }

  /// The earliest event, left in place. Precondition: not empty.
  [[nodiscard]] QueuedEvent peek() const noexcept {
    const Record& top = heap_.front();
    const Node& node = nodes_[runs_[top.run].head];
    return QueuedEvent{top.time, top.priority, node.target, node.stamp, node.kind};
  }

  /// Removes and returns the earliest event. Precondition: not empty.
  QueuedEvent pop() {
    const Record& top = heap_.front();
    Run& run = runs_[top.run];
    const Node node = nodes_[run.head];
    const QueuedEvent event{top.time, top.priority, node.target, node.stamp, node.kind};
    free_node(run.head);
    --size_;
    if (node.next != kNone) {
      run.head = node.next;
      return event;
    }
    free_run(top.run);
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    heap_.pop_back();
    return event;
  }

  /// Removes every event for which `stale(event)` is true. O(events + runs). The order of the
  /// others does not change.
  template <class Predicate>
  std::size_t erase_if(Predicate stale) {
    std::size_t removed = 0;
    std::size_t kept_records = 0;
    for (const Record& record : heap_) {
      Run& run = runs_[record.run];
      std::uint32_t* link = &run.head;
      run.tail = kNone;
      while (*link != kNone) {
        const std::uint32_t n = *link;
        const Node& node = nodes_[n];
        if (stale(QueuedEvent{record.time, record.priority, node.target, node.stamp, node.kind})) {
          *link = node.next;
          free_node(n);
          ++removed;
        } else {
          run.tail = n;
          link = &nodes_[n].next;
        }
      }
      if (run.head == kNone) {
        free_run(record.run);
      } else {
        heap_[kept_records++] = record;
      }
    }
    heap_.resize(kept_records);
    std::make_heap(heap_.begin(), heap_.end(), Later{});
    size_ -= removed;
    return removed;
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::size_t kOpenRuns = 4;

  struct Node {
    std::uint32_t target;
    std::uint32_t stamp;
    std::uint32_t next;
    std::uint8_t kind;
  };
  struct Run {
    Time time;
    int priority = 0;
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
  };
  struct Record {
    Time time;
    int priority;
    std::uint32_t run;
    std::uint64_t sequence;  // of the run's first event; orders runs of equal (time, priority)
  };
  // A function object (not a function pointer) so that the heap algorithms inline it.
  struct Later {
    bool operator()(const Record& a, const Record& b) const noexcept {
      if (a.time != b.time) return a.time > b.time;
      if (a.priority != b.priority) return a.priority > b.priority;
      return a.sequence > b.sequence;
    }
  };

  std::uint32_t new_node(std::uint32_t target, std::uint32_t stamp, std::uint8_t kind) {
    if (free_nodes_ == kNone) {
      nodes_.push_back(Node{target, stamp, kNone, kind});
      return static_cast<std::uint32_t>(nodes_.size() - 1);
    }
    const std::uint32_t n = free_nodes_;
    free_nodes_ = nodes_[n].next;
    nodes_[n] = Node{target, stamp, kNone, kind};
    return n;
  }
  void free_node(std::uint32_t n) noexcept {
    nodes_[n].next = free_nodes_;
    free_nodes_ = n;
  }
  std::uint32_t new_run(Time time, int priority, std::uint32_t node) {
    std::uint32_t r = 0;
    if (free_runs_.empty()) {
      runs_.emplace_back();
      r = static_cast<std::uint32_t>(runs_.size() - 1);
    } else {
      r = free_runs_.back();
      free_runs_.pop_back();
    }
    runs_[r] = Run{time, priority, node, node};
    return r;
  }
  // A finished run leaves the cache so that no event joins it after its record is gone.
  void free_run(std::uint32_t r) {
    for (std::uint32_t& open : open_) {
      if (open == r) open = kNone;
    }
    free_runs_.push_back(r);
  }

  std::vector<Record> heap_;
  std::vector<Run> runs_;
  std::vector<std::uint32_t> free_runs_;
  std::vector<Node> nodes_;
  std::uint32_t free_nodes_ = kNone;
  std::array<std::uint32_t, kOpenRuns> open_{kNone, kNone, kNone, kNone};
  std::size_t next_open_ = 0;
  std::uint64_t next_sequence_ = 1;
  std::size_t size_ = 0;
};

}  // namespace nest::net
