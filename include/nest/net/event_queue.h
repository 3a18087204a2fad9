#pragma once
/// \file
/// The event list of one simulation: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster
/// algorithms for the shortest path problem", JACM 1990) of runs of events, ordered by (time,
/// priority, sequence). The sequence number is the insertion order, so the order is total and
/// every run is bit-for-bit reproducible; same-time, same-priority events pop in insertion order.
///
/// Runs: collectives make many events with the same timestamp (a step of a symmetric
/// collective ends everywhere at once). Events with equal (time, priority) are chained in a
/// *run* behind one heap record, so only the first of them pays a heap insertion and the others
/// an O(1) append. The order is unchanged: a new event joins the latest run of its
/// (time, priority) -- every earlier event with that key is in that run or in an older one, so
/// the event still comes after all of them, as its sequence number says. Runs are found through a
/// small cache of recently opened ones; a miss only costs a new record.
///
/// The radix heap: simulated time never goes back, so every event is pushed at or after the
/// time of the last one popped (`push` throws otherwise). Let the *base* be the time of the
/// last event popped. Records at the base are kept apart; every other record sits in the bucket
/// of the highest 8-bit digit in which its time differs from the base (8 digit positions x 256
/// values), so that every time in a bucket is smaller than every time in a higher one. A push
/// appends to its bucket in O(1). Once the records at the base are gone, `pop` takes the lowest
/// non-empty bucket, makes its earliest time the new base and moves its records, each to a
/// bucket of a lower digit position (at most 8 moves per record in all, about one per record
/// in the all-to-all of results/net_bench.md), every move a sequential append. So the cost
/// per event does not grow with the number pending the way a binary heap's cache misses do:
/// the binary heap of runs this replaced ran the queue-only hold model at 2.4 M events/s with
/// 2^20 pending, this one at ~20 M/s. Records at the base keep (priority, sequence) order:
/// those that arrive in that order (the usual case) are appended to a FIFO, the others go to a
/// small binary heap, and `pop` takes the smaller of the two heads. Each bucket remembers its
/// earliest record, so `peek` and `next_time` are O(1).
///
/// An owner that reschedules an event later may instead keep it and push it again when it comes
/// up: `reserve` gives the position a push would take now, `push_reserved` pushes there later,
/// and the event pops where the push would have (the simulator's drain ends that move later).
///
/// The queue stores no callbacks. An event names a `target` (an index into its owner's table)
/// with a `kind` and a `stamp`; the owner decides what they mean. Cancellation and rescheduling
/// are done by the owner with lazy deletion: it bumps the target's stamp, and the superseded
/// record is dropped when it is popped (or by `erase_if` when stale records pile up).
///
// clang-format off
/// | operation             | cost                                     | notes                     |
/// |-----------------------|------------------------------------------|---------------------------|
/// | `push`                | O(1): joins a cached run or opens one    | O(log m) out of order at  |
/// |                       |                                          | the base, m its runs      |
/// | `reserve`,            | O(1): a position now, the event later    | no run spans a reserved   |
/// | `push_reserved`       |                                          | position                  |
/// | `next_time`, `peek`   | O(1)                                     |                           |
/// | `pop`, `pop(soon)`    | O(1) amortized: <= 8 moves per run       |                           |
/// | cancel (by the owner) | O(1)                                     | stamp bump, record stays  |
/// | `erase_if`, `clear`   | O(events + runs + 2048)                  | drops stale records       |
/// | memory                | 16 B per event + 48 per run + 56 KiB     | stale ones included       |
// clang-format on
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

/// Radix heap of runs of events, by (time, priority, sequence).
class EventQueue {
 public:
  /// Inserts an event after every queued event with an earlier or equal (time, priority).
  /// `time` must be >= 0 and >= the time of the last event popped (simulated time does not go
  /// back), else throws `Error` (internal). O(1).
  void push(Time time, int priority, std::uint8_t kind, std::uint32_t target, std::uint32_t stamp) {
    if (time.ps() < 0 || static_cast<std::uint64_t>(time.ps()) < base_) throw_before_base(time);
    const auto t = static_cast<std::uint64_t>(time.ps());
    ++size_;
    for (const Open& open : open_) {
      if (open.bucket == kNone || open.time != t || open.priority != priority) continue;
      if (open.bucket == kFifo && open.index < fifo_head_) continue;  // popped since
      Record& record = open.bucket == kFifo ? fifo_[open.index] : buckets_[open.bucket][open.index];
      append(record, new_node(target, stamp, kind));
      return;
    }
    ++records_;
    const Record record{t, (next_sequence_++ << 8U) | kind, priority, target, stamp, kNone};
    const Place where = place(record);
    open_[next_open_] = Open{t, priority, where.bucket, where.index};
    next_open_ = (next_open_ + 1) % kOpenRuns;
  }

  /// The insertion position of an event to be pushed later with `push_reserved`: it will pop
  /// among the events of its (time, priority) as if pushed now, before every event pushed after
  /// this call. (So no run open now takes later events: a run's events must all come before or
  /// all after a reserved position.) O(1).
  [[nodiscard]] std::uint64_t reserve() noexcept {
    open_.fill(Open{});
    return next_sequence_++;
  }
  /// Pushes an event at the insertion position `sequence` from `reserve()`, at `time` >= the
  /// time of the last event popped (else throws, as `push`). The event opens no run (one joined
  /// later would pop at its reserved position). O(1).
  void push_reserved(Time time, int priority, std::uint8_t kind, std::uint32_t target,
                     std::uint32_t stamp, std::uint64_t sequence) {
    if (time.ps() < 0 || static_cast<std::uint64_t>(time.ps()) < base_) throw_before_base(time);
    ++size_;
    ++records_;
    place(Record{static_cast<std::uint64_t>(time.ps()), (sequence << 8U) | kind, priority, target,
                 stamp, kNone});
  }

  /// True when no event (stale or not) is held.
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  /// Events held, stale ones included.
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /// Runs (radix heap records) held.
  [[nodiscard]] std::size_t runs() const noexcept { return records_; }
  /// Time of the earliest event. Precondition: not empty. O(1).
  [[nodiscard]] Time next_time() const noexcept {
    // Runs at the base are all at the base time.
    if (base_size() > 0) return Time::picoseconds(static_cast<std::int64_t>(base_));
    const std::size_t b = lowest_bucket();
    return Time::picoseconds(static_cast<std::int64_t>(buckets_[b][earliest_[b]].time));
  }

  /// The earliest event, left in place. Precondition: not empty. O(1).
  [[nodiscard]] QueuedEvent peek() const noexcept { return to_event(front()); }

  /// Removes and returns the earliest event. Precondition: not empty.
  QueuedEvent pop() {
    return pop([](std::uint32_t, std::uint8_t) {});
  }
  /// `pop()`, telling `soon(target, kind)` of the first event of every run that moving the
  /// records brings to the base or to the lowest digit's buckets (at most 255 ps after it):
  /// those pop next, so the owner may fetch their state ahead (it changes nothing else).
  template <class Soon>
  QueuedEvent pop(Soon&& soon) {
    if (base_size() == 0) advance_base(soon);
    const bool from_fifo =
        fifo_head_ < fifo_.size() && (heap_.empty() || earlier(fifo_[fifo_head_], heap_.front()));
    Record& top = from_fifo ? fifo_[fifo_head_] : heap_.front();
    const QueuedEvent event = to_event(top);
    --size_;
    if (top.run != kNone) {
      // The run's next event takes the record's place; its (time, priority, sequence) key, the
      // run's, does not change.
      take_next(top);
      return event;
    }
    --records_;
    if (from_fifo) {
      if (++fifo_head_ == fifo_.size()) {
        fifo_.clear();
        fifo_head_ = 0;
        forget_open(kFifo);
      }
    } else {
      std::pop_heap(heap_.begin(), heap_.end(), Later{});
      heap_.pop_back();
    }
    return event;
  }

  /// Removes every event for which `stale(event)` is true. O(events + runs). The order of the
  /// others does not change.
  template <class Predicate>
  std::size_t erase_if(Predicate stale) {
    const std::size_t before = size_;
    // Drops the run's stale events; false when none is left.
    const auto keep = [&](Record& record) {
      std::uint32_t* link = &record.run;  // the run's extra events, after the record's own
      if (record.run != kNone) {
        Run& run = runs_[record.run];
        link = &run.head;
        run.tail = kNone;
        while (*link != kNone) {
          const std::uint32_t n = *link;
          const Node& node = nodes_[n];
          if (stale(to_event(record, node))) {
            *link = node.next;
            free_node(n);
            --size_;
          } else {
            run.tail = n;
            link = &nodes_[n].next;
          }
        }
        if (run.head == kNone) {
          free_runs_.push_back(record.run);
          record.run = kNone;
        }
      }
      if (!stale(to_event(record))) return true;
      --size_;
      if (record.run == kNone) {
        --records_;
        return false;
      }
      take_next(record);
      return true;
    };
    // The base: what is left of the FIFO and the heap, merged back into one sorted FIFO.
    std::vector<Record> base(fifo_.begin() + static_cast<std::ptrdiff_t>(fifo_head_), fifo_.end());
    base.insert(base.end(), heap_.begin(), heap_.end());
    std::erase_if(base, [&](Record& r) { return !keep(r); });
    std::sort(base.begin(), base.end(),
              [](const Record& a, const Record& b) { return earlier(a, b); });
    fifo_ = std::move(base);
    fifo_head_ = 0;
    heap_.clear();
    for (std::size_t b = 0; b < kBuckets; ++b) {
      std::vector<Record>& bucket = buckets_[b];
      if (bucket.empty()) continue;
      std::erase_if(bucket, [&](Record& r) { return !keep(r); });
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
    open_.fill(Open{});
    return before - size_;
  }

  /// Removes every event and forgets the time of the last one popped: the queue is as new
  /// (its memory kept).
  void clear() noexcept {
    for (std::vector<Record>& bucket : buckets_) bucket.clear();
    fifo_.clear();
    fifo_head_ = 0;
    heap_.clear();
    occupied_ = {};
    summary_ = 0;
    nodes_.clear();
    free_nodes_ = kNone;
    runs_.clear();
    free_runs_.clear();
    open_.fill(Open{});
    next_open_ = 0;
    base_ = 0;
    next_sequence_ = 0;
    size_ = 0;
    records_ = 0;
  }

 private:
  static constexpr std::uint32_t kNone = std::numeric_limits<std::uint32_t>::max();
  static constexpr std::uint32_t kFifo = kNone - 1;  // an `Open` in the base FIFO
  static constexpr std::size_t kOpenRuns = 4;
  // Buckets by (position, value) of the highest 8-bit digit in which a time differs from the
  // base: 8 positions x 256 values. The index position * 256 + value increases with the times
  // a bucket holds, so the lowest non-empty bucket holds the earliest runs. (4- and 6-bit
  // digits did no better: fewer buckets, more moves.)
  static constexpr int kDigitBits = 8;
  static constexpr std::size_t kDigits = std::size_t{1} << kDigitBits;
  static constexpr std::size_t kPositions = (64 + kDigitBits - 1) / kDigitBits;
  static constexpr std::size_t kBuckets = kPositions * kDigits;
  static constexpr std::size_t kWords = (kBuckets + 63) / 64;
  static_assert(kWords <= 64);

  // A run's record: its first pending event inline (so a run of one, the usual case when many
  // events are pending, costs no other memory), the rest in a list of nodes. `sequence_kind` is
  // the first event's sequence number << 8 | its kind; the sequence orders runs of equal (time,
  // priority), and the kind bits never decide (sequences are distinct).
  struct Record {
    std::uint64_t time;
    std::uint64_t sequence_kind;
    int priority;
    std::uint32_t target;
    std::uint32_t stamp;
    std::uint32_t run;  // the run's other events (index into runs_), or kNone
  };
  static_assert(sizeof(Record) == 32);
  struct Node {
    std::uint32_t target;
    std::uint32_t stamp;
    std::uint32_t next;
    std::uint8_t kind;
  };
  struct Run {
    std::uint32_t head = kNone;
    std::uint32_t tail = kNone;
  };
  // A recently opened run that same-key events join: its key and where its record is, valid
  // until records move (a spill, `erase_if`, the FIFO emptied). Runs at the base that came out
  // of order (in the small heap, which moves them) are not kept open.
  struct Open {
    std::uint64_t time = 0;
    int priority = 0;
    std::uint32_t bucket = kNone;  // kNone: unused; kFifo: fifo_[index]
    std::uint32_t index = 0;
  };
  struct Place {
    std::uint32_t bucket;
    std::uint32_t index;
  };

  [[nodiscard]] static bool earlier(const Record& a, const Record& b) noexcept {
    if (a.time != b.time) return a.time < b.time;
    if (a.priority != b.priority) return a.priority < b.priority;
    return a.sequence_kind < b.sequence_kind;
  }
  // A function object (not a function pointer) so that the heap algorithms inline it.
  struct Later {
    bool operator()(const Record& a, const Record& b) const noexcept { return earlier(b, a); }
  };

  [[nodiscard]] static std::uint64_t bit(std::size_t b) noexcept {
    return std::uint64_t{1} << (b % 64);
  }
  // The kind of a run's first event (the low byte of `sequence_kind`).
  [[nodiscard]] static std::uint8_t kind_of(const Record& record) noexcept {
    return static_cast<std::uint8_t>(record.sequence_kind & 0xFFU);
  }
  [[nodiscard]] static QueuedEvent to_event(const Record& record) noexcept {
    return QueuedEvent{Time::picoseconds(static_cast<std::int64_t>(record.time)), record.priority,
                       record.target, record.stamp, kind_of(record)};
  }
  [[nodiscard]] static QueuedEvent to_event(const Record& record, const Node& node) noexcept {
    return QueuedEvent{Time::picoseconds(static_cast<std::int64_t>(record.time)), record.priority,
                       node.target, node.stamp, node.kind};
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
  // The earliest run. Precondition: not empty.
  [[nodiscard]] const Record& front() const noexcept {
    if (base_size() == 0) {
      const std::size_t b = lowest_bucket();
      return buckets_[b][earliest_[b]];
    }
    if (fifo_head_ == fifo_.size()) return heap_.front();
    if (heap_.empty() || earlier(fifo_[fifo_head_], heap_.front())) return fifo_[fifo_head_];
    return heap_.front();
  }

  // Adds event `node` to the run of `record`.
  void append(Record& record, std::uint32_t node) {
    if (record.run == kNone) {
      record.run = new_run(node);
      return;
    }
    Run& run = runs_[record.run];
    nodes_[run.tail].next = node;
    run.tail = node;
  }
  // Moves the first of the run's other events into the record. Precondition: it has one.
  void take_next(Record& record) noexcept {
    Run& run = runs_[record.run];
    const std::uint32_t n = run.head;
    const Node node = nodes_[n];
    record.target = node.target;
    record.stamp = node.stamp;
    record.sequence_kind = (record.sequence_kind & ~std::uint64_t{0xFF}) | node.kind;
    free_node(n);
    if (node.next == kNone) {
      free_runs_.push_back(record.run);
      record.run = kNone;
    } else {
      run.head = node.next;
    }
  }

  // Files a run (time >= base) in the base or in its bucket; returns where, for `open_`
  // (bucket kNone: at the base but out of order, in the small heap).
  Place place(const Record& record) {
    const std::uint64_t differ = record.time ^ base_;
    if (differ == 0) {
      // At the base: in order after the FIFO's last (the usual case), else into the heap.
      if (fifo_.size() == fifo_head_ || earlier(fifo_.back(), record)) {
        fifo_.push_back(record);
        return Place{kFifo, static_cast<std::uint32_t>(fifo_.size() - 1)};
      }
      heap_.push_back(record);
      std::push_heap(heap_.begin(), heap_.end(), Later{});
      return Place{kNone, 0};
    }
    const int position = (63 - std::countl_zero(differ)) / kDigitBits;
    const std::size_t b = static_cast<std::size_t>(position) * kDigits +
                          ((record.time >> (position * kDigitBits)) & (kDigits - 1));
    std::vector<Record>& bucket = buckets_[b];
    if (bucket.empty()) {
      mark(b);
      earliest_[b] = 0;
    } else if (earlier(record, bucket[earliest_[b]])) {
      earliest_[b] = static_cast<std::uint32_t>(bucket.size());
    }
    bucket.push_back(record);
    return Place{static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(bucket.size() - 1)};
  }

  // The base is empty: the lowest bucket's earliest time becomes the base and its runs move
  // to lower buckets (those at the new base to the base, in the bucket's order). Each run
  // moves to a lower digit position, so at most 8 times in all. Records move: no run stays
  // open.
  // `soon` hears of every run moved to the base or to a bucket of the lowest digit (see `pop`).
  template <class Soon>
  void advance_base(Soon& soon) {
    const std::size_t b = lowest_bucket();
    base_ = buckets_[b][earliest_[b]].time;
    unmark(b);
    spill_.swap(buckets_[b]);
    for (const Record& record : spill_) {
      const Place where = place(record);
      const bool at_base = where.bucket == kFifo || where.bucket == kNone;
      if (at_base || where.bucket < kDigits) {
        soon(record.target, kind_of(record));
      }
    }
    spill_.clear();
    open_.fill(Open{});
  }

  // Closes the open runs whose record is in `bucket`.
  void forget_open(std::uint32_t bucket) noexcept {
    for (Open& open : open_) {
      if (open.bucket == bucket) open = Open{};
    }
  }

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
  std::uint32_t new_run(std::uint32_t node) {
    std::uint32_t r = 0;
    if (free_runs_.empty()) {
      runs_.emplace_back();
      r = static_cast<std::uint32_t>(runs_.size() - 1);
    } else {
      r = free_runs_.back();
      free_runs_.pop_back();
    }
    runs_[r] = Run{node, node};
    return r;
  }

  [[noreturn]] void throw_before_base(Time time) const {
    throw Error::internal("event queue: event at " + std::to_string(time.ps()) +
                          " ps pushed before the last popped event (" + std::to_string(base_) +
                          " ps)");
  }

  std::array<std::vector<Record>, kBuckets> buckets_;
  std::array<std::uint32_t, kBuckets> earliest_{};  // index of each bucket's earliest run
  std::array<std::uint64_t, kWords> occupied_{};    // bit b: bucket b is not empty
  std::uint64_t summary_ = 0;                       // bit w: occupied_[w] != 0
  std::vector<Record> fifo_;  // base runs in (priority, sequence) order, from fifo_head_
  std::size_t fifo_head_ = 0;
  std::vector<Record> heap_;   // base runs that came out of order
  std::vector<Record> spill_;  // scratch of advance_base
  std::vector<Run> runs_;
  std::vector<std::uint32_t> free_runs_;
  std::vector<Node> nodes_;
  std::uint32_t free_nodes_ = kNone;
  std::array<Open, kOpenRuns> open_{};
  std::size_t next_open_ = 0;
  std::uint64_t base_ = 0;  // time of the last popped event (0 before any)
  std::uint64_t next_sequence_ = 0;
  std::size_t size_ = 0;
  std::size_t records_ = 0;
};

}  // namespace nest::net
