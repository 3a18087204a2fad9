#include "nest/net/simulator.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "nest/core/error.h"
#include "nest/net/event_queue.h"

namespace nest::net {
namespace {

enum EventKind : std::uint8_t { kUserEvent, kDrainEvent, kDeliverEvent };

enum class FlowState : std::uint8_t { kFree, kDraining, kDelivering };

constexpr double kPsPerSecond = 1e12;
// Floating rounding allowances: a drain time within this of a whole picosecond is that
// picosecond; remaining bytes within this fraction of the size are zero.
constexpr double kAbsoluteTolerancePs = 1e-6;
constexpr double kRelativeTolerance = 1e-12;
constexpr std::uint32_t kInlineHops = 8;
// Hops whose sharing a flow's `shared_hops` records.
constexpr std::uint32_t kMaskedHops = 32;
// Relative margin below the smallest departed rate under which flows keep their rates.
constexpr double kLevelMargin = 1e-9;
constexpr double kNoDeparture = std::numeric_limits<double>::infinity();
// A flow's `deferred_end` when its pending drain event is at its drain end.
constexpr Time kNotDeferred = Time::max();
// A flow without a cap (see `Flow::cap_link`).
constexpr topo::LinkId kNoCap = std::numeric_limits<topo::LinkId>::max();
// Components with at most this many loaded links find each bottleneck by a linear scan, which
// beats a heap at that size.
constexpr std::size_t kScanLimit = 48;
// `fill_by_heap`'s first candidates are radix sorted from this many on (else `std::sort`).
constexpr std::size_t kRadixSortFrom = 256;
// 16 below, not 8: the pieces of a double binary tree's ranks arrive in the same picosecond, and
// refilling their whole component took 65% of a 192-GPU tree's simulation and 74% of 17 trees
// sharing spines (results/coll_bench.md, 2026-12-03). From 24 on, the random small fabrics of
// the simulator's tests re-rate more flows than the kept-level component refilling would.
// The verified refilling (`refill_verified`) leaves a timestamp to the component refilling when
// more than this many flows may have lost their bottleneck (many arrivals at once: the checks
// would take several rounds)...
constexpr std::size_t kVerifiedStart = 16;
// ... and gives up for it once the flows it re-rates exceed this many or it has expanded this
// many times...
constexpr std::size_t kVerifiedFlowLimit = 48;
constexpr int kVerifiedRounds = 6;
// ... or when the links it would check carry more flows than this (long lists, as on the host
// links of a direct all-to-all, make the check cost more than the component refilling).
constexpr std::size_t kVerifiedScanLimit = 1024;
// Relative slack of its checks, for rates equal in exact arithmetic that differ in the last bits
// (a sum of a few dozen rates stays well within it). It is kept small: a real violation inside
// the slack would be accepted (1e-9 let rates 5e-10 apart through, found in review), while a
// false alarm only costs another round.
constexpr double kCheckMargin = 1e-12;
// Epoch counters (component searches, freeze rounds) are 32 bits and run on across resets; past
// this value every mark is cleared and they restart from zero, so that no stale mark can equal
// or exceed a new epoch.
constexpr std::uint32_t kEpochRenewal = 0xF000'0000U;
// Events queued above which the run loop prefetches the next event's slot (below, the slots
// are in cache and the peek would only cost).
constexpr std::size_t kPrefetchAbove = 1 << 12;
static_assert(kPrefetchAbove >= 1, "run_events peeks after a pop when more than this many wait");
// Stale heap records are purged when they outnumber live ones and exceed this many.
constexpr std::size_t kCompactionThreshold = 1 << 14;

/// A user action waiting in the queue. `generation` stamps its queue record and its handle.
/// One cache line per action: the staleness check and the call read one line (a 40-byte
/// action straddled two for half the slots: two cache misses per event with 2^20 pending).
struct alignas(64) Action {
  std::function<void()> fn;
  std::uint32_t generation = 0;
};

/// A flow's place in a link's list: which flow, which hop of its route the link is, and a copy
/// of its rate (0 until rated) so that scans of a long list need not visit every flow.
struct FlowRef {
  std::uint32_t slot;
  std::uint32_t hop;
  double rate;
};

/// A link's draining flows in order, `std::vector`'s interface as far as the simulator uses it:
/// while it holds at most one flow that flow lives in the list itself (in the link's cache
/// line), else they all live on the heap. Most lists hold one flow (a host's cable: nest
/// simulate of GPT-3 on 16,384 rail GPUs removed 28.2 M flows from lists of one and 3.2 M from
/// longer ones), and a separate buffer cost a cache miss on every start and drain. Positions
/// never move when it switches between the two: the flow at index 0 stays at index 0.
class FlowList {
 public:
  FlowList() noexcept : one_{} {}
  FlowList(const FlowList&) = delete;
  FlowList& operator=(const FlowList&) = delete;
  FlowList(FlowList&& o) noexcept : one_{} { take(o); }
  FlowList& operator=(FlowList&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  ~FlowList() { release(); }

  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] FlowRef* begin() noexcept { return capacity_ == 0 ? &one_ : many_; }
  [[nodiscard]] const FlowRef* begin() const noexcept { return capacity_ == 0 ? &one_ : many_; }
  [[nodiscard]] FlowRef* end() noexcept { return begin() + size_; }
  [[nodiscard]] const FlowRef* end() const noexcept { return begin() + size_; }
  [[nodiscard]] FlowRef& operator[](std::size_t i) noexcept { return begin()[i]; }
  [[nodiscard]] const FlowRef& front() const noexcept { return begin()[0]; }
  [[nodiscard]] const FlowRef& back() const noexcept { return begin()[size_ - 1]; }

  void push_back(FlowRef ref) {  // by value: `ref` may be one of the list's own flows
    if (capacity_ == 0 && size_ == 0) {
      one_ = ref;
      size_ = 1;
      return;
    }
    if (size_ == capacity_ || capacity_ == 0) grow();
    many_[size_++] = ref;
  }
  void pop_back() noexcept {
    --size_;
    if (size_ == 1 && capacity_ > 0) {  // back in the link's line
      const FlowRef only = many_[0];
      release();
      one_ = only;
      size_ = 1;
    }
  }
  void clear() noexcept {
    release();
    size_ = 0;
  }

 private:
  void grow() {
    const std::uint32_t capacity = capacity_ == 0 ? 4 : capacity_ * 2;
    auto* next = new FlowRef[capacity];
    std::copy(begin(), end(), next);
    const std::uint32_t size = size_;
    release();
    many_ = next;
    capacity_ = capacity;
    size_ = size;
  }
  void release() noexcept {
    if (capacity_ > 0) delete[] many_;
    capacity_ = 0;
    one_ = FlowRef{};
  }
  // Moves `o`'s flows here (this one holds none) and leaves `o` empty.
  void take(FlowList& o) noexcept {
    size_ = o.size_;
    capacity_ = o.capacity_;
    if (capacity_ == 0) {
      one_ = o.one_;
    } else {
      many_ = o.many_;
      o.capacity_ = 0;
    }
    o.size_ = 0;
    o.one_ = FlowRef{};
  }

  union {
    FlowRef one_;    // capacity_ 0: the one flow, if size_ is 1
    FlowRef* many_;  // capacity_ > 0: the heap array
  };
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = 0;  // 0: at most one flow, held in `one_`
};
static_assert(sizeof(FlowList) == 24);

/// One hop of a flow's route: the link, and the flow's index in that link's list.
struct Hop {
  topo::LinkId link;
  std::uint32_t position;
};

// The fields the searches and fillings read come first, then the route (not line-aligned: at
// 200 bytes instead of 256, a direct all-to-all with all 261,632 flows in flight was faster;
// 224 since the deferred drain ends).
struct Flow {
  std::uint32_t hops = 0;
  std::uint32_t frozen = 0;  // progressive-filling epoch
  // Scratch of the filling: its private link of smallest capacity (ties: lowest id) when that
  // capacity is below each of its shared links' capacities, else kNoCap (see `join_component`).
  topo::LinkId cap_link = kNoCap;
  std::uint32_t version = 0;  // stamps the pending drain event; bumped on every reschedule
  // Scratch of a rate computation: the link the flow froze at, committed to
  // `FlowMarks::bottleneck` by `apply_rates`.
  topo::LinkId new_bottleneck = kNoCap;
  FlowId id = 0;
  // Next to `version`: the queue's staleness check of a drain event reads both.
  FlowState state = FlowState::kFree;
  // Scratch of a rate computation: bit h set when hop h's link carries other flows (hops from
  // kMaskedHops on are not told apart), as `add_links_of` found; `freeze_flow` then reads only
  // those links and the cap.
  std::uint32_t shared_hops = 0;
  double rate = 0;      // bytes per second; 0 until the first rate computation
  double new_rate = 0;  // scratch of the filling
  double size = 0;
  double remaining = 0;  // bytes not yet drained as of `settled`
  // The route, copied at the start (so the caller's span need not outlive the call): inline for
  // routes of up to kInlineHops links, which are nearly all, next to the fields above, so that
  // the searches read a flow's links without a pointer chase.
  std::array<Hop, kInlineHops> inline_hops{};
  Time settled;
  Time latency;
  // The time of the flow's pending drain event, and, when a rate change moved the drain end
  // later, that end (else `kNotDeferred`) and the queue position reserved for it: the pending
  // event is kept and, when it comes up, pushed again there (`apply_rates`).
  Time queued;
  Time deferred_end = kNotDeferred;
  std::uint64_t deferred_sequence = 0;
  std::vector<Hop> long_hops;
  std::function<void(FlowId, Time)> on_done;

  [[nodiscard]] Hop* path() noexcept {
    return hops <= kInlineHops ? inline_hops.data() : long_hops.data();
  }
  [[nodiscard]] const Hop* path() const noexcept {
    return hops <= kInlineHops ? inline_hops.data() : long_hops.data();
  }
};

// What the scans of a link's flow list read of each flow, by slot, in a dense array apart from
// `Flow`: a scan over a link's list (the seeds of a verified refilling, `load_set`, `verify`,
// `freeze`, the component searches) reads 8 bytes per flow, eight flows per cache line, and
// touches a flow's 200-byte state only for the flows it re-rates. At 2,048 devices the scans
// read ~70 flows per flow started, most of them of other flows.
struct FlowMarks {
  std::uint32_t visited = 0;  // component-search epoch
  // A link where the flow is a max-min bottleneck flow (full, and no flow on it is faster): the
  // one it froze at in its last rate computation.
  topo::LinkId bottleneck = kNoCap;
};
static_assert(sizeof(FlowMarks) == 8);

// What the rate computation reads: one cache line per link (the statistics live apart, in
// `LinkTally`, so that the searches and fillings touch half the memory).
struct alignas(64) LinkState {
  double capacity = 0;
  FlowList flows;  // draining flows
  // Scratch of one rate computation.
  double spare = 0;  // capacity not yet given to frozen flows
  double key = 0;    // share of the link's live heap candidate (<= its current share)
  std::uint32_t visited = 0;
  std::uint32_t touched = 0;
  std::uint32_t unfrozen = 0;
  std::uint32_t version = 0;
};
static_assert(sizeof(LinkState) == 64);

// A link's statistics of what has finished; partial in-flight amounts are added by
// `publish_stats`.
struct LinkTally {
  double bytes_done = 0;
  Time busy_done;
  Time busy_since;
  std::uint32_t peak = 0;
};

/// A candidate bottleneck in the progressive filling: fair share `share` of link `link` as of
/// its `version`, packed so that candidates compare as two unsigned integers (the bits of a
/// non-negative double order as the double does).
struct Candidate {
  std::uint64_t share_bits;
  std::uint64_t link_version;  // link << 32 | version

  Candidate() = default;
  Candidate(double share, topo::LinkId link, std::uint32_t version) noexcept
      : share_bits(std::bit_cast<std::uint64_t>(share)),
        link_version(static_cast<std::uint64_t>(link) << 32 | version) {}
  [[nodiscard]] double share() const noexcept { return std::bit_cast<double>(share_bits); }
  [[nodiscard]] topo::LinkId link() const noexcept {
    return static_cast<topo::LinkId>(link_version >> 32);
  }
  [[nodiscard]] std::uint32_t version() const noexcept {
    return static_cast<std::uint32_t>(link_version);
  }
};

/// Heap order of candidates: the smallest share (then the lowest link id) on top. A function
/// object so that the heap algorithms inline it.
struct WorseCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const noexcept {
    return a.share_bits != b.share_bits ? a.share_bits > b.share_bits
                                        : a.link_version > b.link_version;
  }
};

// Sorts `items` from best to worst candidate (ascending (share, link, version), the reverse of
// `WorseCandidate`): a least-significant-digit radix sort over the 16 bytes, skipping the bytes
// in which every candidate agrees (the versions, zero for first candidates; the shares' sign and
// exponent, mostly). Every key is distinct (one candidate per link), so the order is the one
// `std::sort` gives, byte for byte; a filling's first candidates are thousands at a time in a
// large component, where comparisons cost more than a few counting passes. `scratch` is reused.
void sort_candidates(std::vector<Candidate>& items, std::vector<Candidate>& scratch) {
  if (items.size() < kRadixSortFrom) {
    std::sort(items.begin(), items.end(),
              [](const Candidate& a, const Candidate& b) { return WorseCandidate{}(b, a); });
    return;
  }
  constexpr std::size_t kBytes = 16;
  std::array<std::array<std::uint32_t, 256>, kBytes> counts{};
  const auto byte_of = [](const Candidate& c, std::size_t b) -> std::uint8_t {
    const std::uint64_t word = b < 8 ? c.link_version : c.share_bits;
    return static_cast<std::uint8_t>(word >> (8 * (b % 8)));
  };
  for (const Candidate& c : items) {
    for (std::size_t b = 0; b < kBytes; ++b) ++counts[b][byte_of(c, b)];
  }
  scratch.resize(items.size());
  for (std::size_t b = 0; b < kBytes; ++b) {
    std::array<std::uint32_t, 256>& count = counts[b];
    if (count[byte_of(items.front(), b)] == items.size()) continue;  // all agree
    std::uint32_t at = 0;
    for (std::uint32_t& n : count) {
      const std::uint32_t here = n;
      n = at;
      at += here;
    }
    for (const Candidate& c : items) scratch[count[byte_of(c, b)]++] = c;
    items.swap(scratch);
  }
}

}  // namespace

void throw_out_of_range() {
  throw Error::input("simulated time out of range",
                     {.expected = "events within 2^62 ps (4.6e6 s) of simulated time: a smaller "
                                  "size or faster links"});
}

namespace {

/// Whole picoseconds to drain `remaining` bytes at `rate` bytes/s, rounded up (within the
/// rounding allowance of a whole picosecond counts as that picosecond).
std::int64_t drain_ps(double remaining, double rate) {
  const double exact = remaining * kPsPerSecond / rate;
  if (!(exact < static_cast<double>(kHorizon.ps()))) throw_out_of_range();
  const double rounded = std::ceil(exact - (kAbsoluteTolerancePs + exact * kRelativeTolerance));
  return std::max<std::int64_t>(0, static_cast<std::int64_t>(rounded));
}

}  // namespace

struct Simulator::Impl {
  explicit Impl(const topo::Topology& t) : topology(&t) {
    const auto all = t.links();
    links.resize(all.size());
    ends.reserve(all.size());
    for (const topo::Link& link : all) ends.push_back({link.src, link.dst, link.latency});
    tallies.resize(all.size());
    freeze_marks.resize(all.size());
    stats.resize(all.size());
    series.resize(all.size());
    for (std::size_t i = 0; i < all.size(); ++i) links[i].capacity = all[i].bandwidth.bytes_per_s();
  }

  const topo::Topology* topology;
  EventQueue queue;
  Time now;
  std::uint64_t events = 0;
  const std::atomic<bool>* stop_flag = nullptr;  // `stop_when`
  std::uint64_t next_stop_check = 0;             // events at which it is read next
  std::uint64_t updates = 0;
  std::uint64_t rated = 0;   // flows rated, summed over components
  std::size_t stale = 0;     // superseded records still in the queue
  std::size_t deferred = 0;  // flows whose queued drain event comes before their drain end

  std::vector<Action> actions;
  std::vector<std::uint32_t> free_actions;

  std::vector<Flow> flows;
  std::vector<FlowMarks> marks;  // by flow slot, as `flows`
  std::vector<std::uint32_t> free_flows;
  FlowId next_flow_id = 0;
  std::size_t live_flows = 0;

  std::vector<LinkState> links;
  std::vector<LinkTally> tallies;  // per link, apart from `links`
  // Per link, what `start_flow` checks and sums: 16 bytes instead of the topology's links.
  struct LinkEnds {
    topo::NodeId src;
    topo::NodeId dst;
    Time latency;
  };
  std::vector<LinkEnds> ends;
  // Per link, for `verify`: the largest rate the current filling gave a flow that froze there.
  struct FreezeMark {
    double share = 0;
    std::uint32_t epoch = 0;
  };
  std::vector<FreezeMark> freeze_marks;
  std::vector<std::uint32_t> violators;  // fixed flows that failed `verify`
  std::vector<LinkStats> stats;
  std::vector<topo::LinkId> used_links;  // links that carried a flow since construction or reset
  std::vector<std::vector<UtilizationSample>> series;
  bool recording = false;
  // With `record_utilization(links)`: 1 for the links whose series are kept (empty: all).
  std::vector<std::uint8_t> recorded;
  bool reuse_levels = true;
  bool verified_refills = true;
  bool verifying = false;  // a filling of `refill_verified` is running

  // Rate computation: seeds and scratch, reused across calls.
  std::vector<topo::LinkId> dirty;
  std::vector<topo::LinkId> component_links;
  std::vector<std::uint32_t> component_flows;
  std::vector<Candidate> candidates;  // `fill_by_heap`'s heap of re-keyed candidates
  std::vector<Candidate> sorted;      // `fill_by_heap`'s first candidates, in pop order
  std::vector<Candidate> sort_scratch;
  std::vector<topo::LinkId> scan;  // links with unfrozen flows
  std::vector<topo::LinkId> touched;
  // Smallest rate among the flows that drained at this timestamp (+inf when none).
  double departed_min = kNoDeparture;
  // Flows started at this timestamp (slots), for their lower bounds in `update_rates`.
  std::vector<std::uint32_t> arrivals;
  std::uint32_t epoch = 0;         // one per component rated
  std::uint32_t touch_round = 0;   // one per bottleneck of the filling, never reset
  std::size_t unfrozen_flows = 0;  // flows of the current filling not yet frozen
  std::size_t shared_links = 0;    // links of the current filling with >= 2 unfrozen flows

  void run_events(Time until, std::uint64_t max_events = std::numeric_limits<std::uint64_t>::max());
  void dispatch(const QueuedEvent& event);
  void finish_draining(std::uint32_t slot);
  // The queued drain event of flow `slot`, come up before its drain end: pushed again there.
  void push_deferred(std::uint32_t slot) {
    Flow& flow = flows[slot];
    queue.push_reserved(flow.deferred_end, 0, kDrainEvent, slot, flow.version,
                        flow.deferred_sequence);
    flow.queued = flow.deferred_end;
    flow.deferred_end = kNotDeferred;
    --deferred;
  }
  void deliver(std::uint32_t slot);
  void remove_from_link(topo::LinkId link, std::uint32_t position);
  void update_rates();
  void collect_component(topo::LinkId seed);
  void collect_upper_component(topo::LinkId seed, double keep_below);
  void join_component(std::uint32_t slot);
  void add_links_of(Flow& flow);
  bool refill_verified();
  void load_set();
  bool verify();
  void renew_epochs();
  // Only `verify` reads the marks: the other fillings skip them.
  void mark_freeze(topo::LinkId link, double share) {
    if (!verifying || link == kNoCap) return;  // kNoCap: links of unbounded rate only
    FreezeMark& mark = freeze_marks[link];
    if (mark.epoch != epoch) mark = FreezeMark{share, epoch};
    mark.share = std::max(mark.share, share);
  }
  [[nodiscard]] bool is_private(topo::LinkId link) const noexcept {
    return links[link].flows.size() == 1;
  }
  [[nodiscard]] double arrival_floor(std::uint32_t slot) const noexcept;
  void fill();
  void fill_loaded();
  void fill_by_scan();
  void fill_by_heap();
  void rekey_touched();
  void freeze_unshared();
  void freeze(topo::LinkId bottleneck, double share);
  void freeze_flow(std::uint32_t slot, double share, topo::LinkId bottleneck);
  void apply_rates();
  void record_series();
  void record_verified();
  void record_link_series(topo::LinkId link);
  void compact_queue();
  [[nodiscard]] bool is_stale(const QueuedEvent& event) const noexcept;
  void prefetch_target(std::uint32_t target, std::uint8_t kind) const noexcept {
    if (kind == kUserEvent) {
      __builtin_prefetch(&actions[target]);
    } else {
      __builtin_prefetch(&flows[target]);
    }
  }
  void prefetch_target(const QueuedEvent& event) const noexcept {
    prefetch_target(event.target, event.kind);
  }
  void publish_stats();
  void reset();
  std::uint32_t allocate_flow();
};

void Simulator::Impl::run_events(Time until, std::uint64_t max_events) {
  for (;;) {
    if (!dirty.empty()) update_rates();
    // Superseded records must not move the clock: now() is the time of the last real event.
    // Nor must a drain event that comes up before its flow's drain end (deferred: it is pushed
    // again there). `stale` and `deferred` count them exactly (a cancel, or a drain end
    // rescheduled earlier; a drain end moved later), so with none queued the head is live and
    // its record is not read here (at 2^20 pending events that read was a cache miss per event,
    // the one `dispatch` then repeats; in a contended run some flow is nearly always deferred,
    // and the read is made here instead). Records past `until` stay: popping them would forbid
    // events before them after a `run_until`.
    while ((stale > 0 || deferred > 0) && !queue.empty() && queue.next_time() <= until) {
      const QueuedEvent head = queue.peek();
      if (is_stale(head)) {
        queue.pop();
        --stale;
      } else if (head.kind == kDrainEvent && flows[head.target].deferred_end != kNotDeferred) {
        queue.pop();
        push_deferred(head.target);
      } else {
        break;
      }
    }
    if (queue.empty() || queue.next_time() > until || events >= max_events) break;
    now = queue.next_time();
    do {
      // With many events pending, an event's slot is rarely still in cache when it comes up:
      // the next one's is fetched while this one runs, and the slots of the events that the
      // queue brings within 255 ps of the clock as it moves its records, a few hundred events
      // ahead.
      const bool many = queue.size() > kPrefetchAbove;
      const QueuedEvent event = many ? queue.pop([this](std::uint32_t target, std::uint8_t kind) {
        prefetch_target(target, kind);
      })
                                     : queue.pop();
      if (many) prefetch_target(queue.peek());
      dispatch(event);
    } while (!queue.empty() && queue.next_time() == now);
    if (stale > kCompactionThreshold && stale * 2 > queue.size()) compact_queue();
    if (stop_flag != nullptr && events >= next_stop_check) {
      next_stop_check = events + kStopCheckEvents;
      if (stop_flag->load(std::memory_order_relaxed)) throw Stopped{};
    }
  }
}

void Simulator::Impl::dispatch(const QueuedEvent& event) {
  switch (event.kind) {
    case kUserEvent: {
      if (is_stale(event)) {
        --stale;
        return;
      }
      Action& action = actions[event.target];
      auto fn = std::move(action.fn);
      action.fn = nullptr;
      ++action.generation;
      free_actions.push_back(event.target);
      ++events;
      fn();
      return;
    }
    case kDrainEvent:
      if (is_stale(event)) {
        --stale;
        return;
      }
      if (flows[event.target].deferred_end != kNotDeferred) {
        push_deferred(event.target);
        return;
      }
      ++events;
      finish_draining(event.target);
      return;
    case kDeliverEvent:
      ++events;
      deliver(event.target);
      return;
    default:
      throw Error::internal("unknown event kind " + std::to_string(event.kind));
  }
}

void Simulator::Impl::remove_from_link(topo::LinkId link, std::uint32_t position) {
  auto& list = links[link].flows;
  const FlowRef last = list.back();
  list[position] = last;
  flows[last.slot].path()[last.hop].position = position;
  list.pop_back();
}

void Simulator::Impl::finish_draining(std::uint32_t slot) {
  Flow& flow = flows[slot];
  const Hop* path = flow.path();
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    const topo::LinkId link = path[h].link;
    remove_from_link(link, path[h].position);
    LinkTally& tally = tallies[link];
    tally.bytes_done += flow.size;
    if (links[link].flows.empty()) tally.busy_done += now - tally.busy_since;
    dirty.push_back(link);
  }
  departed_min = std::min(departed_min, flow.rate);
  flow.state = FlowState::kDelivering;
  flow.remaining = 0;
  flow.rate = 0;
  flow.settled = now;
  queue.push(later(now, flow.latency), 0, kDeliverEvent, slot, flow.version);
}

void Simulator::Impl::deliver(std::uint32_t slot) {
  Flow& flow = flows[slot];
  auto on_done = std::move(flow.on_done);
  flow.on_done = nullptr;
  const FlowId id = flow.id;
  flow.state = FlowState::kFree;
  free_flows.push_back(slot);
  --live_flows;
  // `flow` may dangle from here: the callback may start flows and grow `flows`.
  if (on_done) on_done(id, now);
}

std::uint32_t Simulator::Impl::allocate_flow() {
  if (!free_flows.empty()) {
    const std::uint32_t slot = free_flows.back();
    free_flows.pop_back();
    return slot;
  }
  flows.emplace_back();
  marks.emplace_back();
  return static_cast<std::uint32_t>(flows.size() - 1);
}

// Each connected component that holds a dirty link is rated on its own: a smaller working set
// than their union, and a one-flow component (common in contention-free collectives) needs no
// filling at all.
void Simulator::Impl::update_rates() {
  ++updates;
  if (epoch > kEpochRenewal || touch_round > kEpochRenewal) renew_epochs();
  // First the verified refilling (`refill_verified`); when it declines, each component that
  // holds a changed link is refilled. The kept levels: below the smallest departed rate and below
  // every arrival's lower bound (see `arrival_floor`). Rates equal in exact arithmetic may differ
  // in their last bits: the margin keeps flows tied with the level out of the kept set.
  double level = departed_min;
  for (const std::uint32_t slot : arrivals) {
    if (flows[slot].state == FlowState::kDraining) level = std::min(level, arrival_floor(slot));
  }
  arrivals.clear();
  const double keep_below = level * (1 - kLevelMargin);
  const bool reuse = reuse_levels && level < kNoDeparture;
  if (reuse && verified_refills && (!recording || !recorded.empty()) && refill_verified()) {
    if (recording) record_verified();
    dirty.clear();
    departed_min = kNoDeparture;
    return;
  }
  const std::uint32_t first = epoch + 1;  // components of this update get epochs >= first
  for (const topo::LinkId seed : dirty) {
    if (links[seed].visited >= first) continue;
    // A link that a drain left empty has nothing to rate (only its series to close).
    if (links[seed].flows.empty() && !recording) continue;
    ++epoch;
    if (reuse) {
      collect_upper_component(seed, keep_below);
      rated += component_flows.size();
      fill_loaded();
    } else {
      ++epoch;
      collect_component(seed);
      rated += component_flows.size();
      fill();
    }
    apply_rates();
    if (recording) record_series();
  }
  dirty.clear();
  departed_min = kNoDeparture;
}

// Verified refilling. Max-min fair rates are the feasible rates under which every flow has a
// bottleneck: a full link on which no flow is faster (Bertsekas and Gallager, Data Networks,
// 6.5.2). After a timestamp's starts and drains, only flows near the changes can lose theirs.
// This re-rates a small set F (the arrivals and the flows whose bottleneck is a changed link),
// holding every other flow at its rate, and checks the condition on every link that F crosses
// or a drain left: a link where an F flow froze carries no fixed flow faster than it, and each
// fixed flow whose bottleneck is such a link still has it full and is not slower than another
// flow there. Links elsewhere did not change, so their flows keep their bottlenecks. Flows that
// fail join F and F is re-rated, up to a few times and a few dozen flows; then the component
// refilling below takes over. When the check passes, the rates are max-min fair, which is
// unique, so they are what the component refilling computes (up to floating rounding). It pays
// where big components change in a few flows per event (results/net_bench.md, step 10). Off
// while every link's utilization is recorded (whose rounding then stays the component
// refilling's, as before); with chosen links (`recorded`), `record_verified` records what changed.
bool Simulator::Impl::refill_verified() {
  // No shortcut for changes that leave every changed link with one flow at most: that flow may
  // cross shared links, and then its upper component holds every flow it meets (a drain in one
  // of several trees or rings whose spine up-links ECMP shares: every flow of all of them).
  std::size_t seeded = 0;
  for (const topo::LinkId seed : dirty) seeded += links[seed].flows.size();
  if (seeded > kVerifiedScanLimit) return false;
  ++epoch;
  component_flows.clear();
  for (const topo::LinkId seed : dirty) {
    for (const FlowRef ref : links[seed].flows) {
      FlowMarks& mark = marks[ref.slot];
      if (mark.visited == epoch) continue;
      if (ref.rate == 0 || mark.bottleneck == seed) {
        mark.visited = epoch;
        component_flows.push_back(ref.slot);
      }
    }
  }
  if (component_flows.size() > kVerifiedStart) return false;
  for (int round = 0; round < kVerifiedRounds; ++round) {
    if (component_flows.empty()) return true;  // no flow lost its bottleneck
    load_set();
    std::size_t scanned = seeded;
    for (const topo::LinkId id : component_links) scanned += links[id].flows.size();
    if (scanned > kVerifiedScanLimit) return false;
    rated += component_flows.size();
    verifying = true;
    fill_loaded();
    verifying = false;
    if (verify()) {
      apply_rates();
      return true;
    }
    if (component_flows.size() + violators.size() > kVerifiedFlowLimit) return false;
    // The set grows: new marks for it and its links.
    ++epoch;
    for (const std::uint32_t slot : component_flows) marks[slot].visited = epoch;
    for (const std::uint32_t slot : violators) {
      if (marks[slot].visited == epoch) continue;
      marks[slot].visited = epoch;
      component_flows.push_back(slot);
    }
  }
  return false;
}

// The links of the set F (flows marked with the current epoch): each gets the capacity the
// fixed flows leave and its number of F flows; private links become caps (`join_component`).
void Simulator::Impl::load_set() {
  component_links.clear();
  for (const std::uint32_t slot : component_flows) add_links_of(flows[slot]);
  for (const topo::LinkId id : component_links) {
    LinkState& link = links[id];
    link.spare = link.capacity;
    link.unfrozen = 0;
    link.version = 0;
    for (const FlowRef ref : link.flows) {
      if (marks[ref.slot].visited == epoch) {
        ++link.unfrozen;
      } else {
        link.spare -= ref.rate;
      }
    }
    link.spare = std::max(0.0, link.spare);
  }
}

// The bottleneck condition on the links F crosses and on the links a drain left; collects the
// fixed flows that fail it in `violators`.
bool Simulator::Impl::verify() {
  violators.clear();
  const auto check = [this](topo::LinkId id) {
    const LinkState& link = links[id];
    if (link.flows.size() < 2) return;  // private or empty: nothing fixed can fail here
    double total = 0;
    double fastest = 0;
    for (const FlowRef ref : link.flows) {
      const double rate = marks[ref.slot].visited == epoch ? flows[ref.slot].new_rate : ref.rate;
      total += rate;
      fastest = std::max(fastest, rate);
    }
    const FreezeMark& mark = freeze_marks[id];
    const double limit = mark.epoch == epoch ? mark.share * (1 + kCheckMargin)
                                             : std::numeric_limits<double>::infinity();
    const bool full = total >= link.capacity * (1 - kCheckMargin);
    for (const FlowRef ref : link.flows) {
      const FlowMarks& flow = marks[ref.slot];
      if (flow.visited == epoch) continue;
      const bool faster_than_frozen = ref.rate > limit;
      const bool lost_bottleneck =
          flow.bottleneck == id && (!full || ref.rate < fastest * (1 - kCheckMargin));
      if (faster_than_frozen || lost_bottleneck) violators.push_back(ref.slot);
    }
  };
  for (const topo::LinkId id : component_links) check(id);
  for (const topo::LinkId id : dirty) {
    if (links[id].visited != epoch) check(id);
  }
  return violators.empty();
}

// Component searches. A link that carries one flow (a *private* link: a host's cable, most often)
// joins no two flows and gives its flow only a cap, its capacity: the searches leave it out of
// `component_links` and record the smallest such capacity in the flow's `cap`. The filling
// treats the cap as the flow's own link.

// Adds flow `slot` to the component: its shared links to the search, its private ones to its
// cap. The cap is kept only when below the capacity of each of the flow's component links: a
// component link's share never exceeds its capacity, so otherwise that link freezes the flow no
// later than the cap would (at an equal share, at the same rate).
void Simulator::Impl::join_component(std::uint32_t slot) {
  marks[slot].visited = epoch;
  component_flows.push_back(slot);
  add_links_of(flows[slot]);
}

// Appends `flow`'s shared links not yet marked to `component_links` (marking them) and sets its
// cap. Private links are marked too: a dirty one must not seed another search.
void Simulator::Impl::add_links_of(Flow& flow) {
  topo::LinkId cap = kNoCap;
  double cap_capacity = std::numeric_limits<double>::infinity();
  double shared = std::numeric_limits<double>::infinity();
  std::uint32_t shared_hops = 0;
  const Hop* path = flow.path();
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    const topo::LinkId id = path[h].link;
    LinkState& next = links[id];
    if (next.flows.size() == 1) {
      if (next.capacity < cap_capacity || (next.capacity == cap_capacity && id < cap)) {
        cap = id;
        cap_capacity = next.capacity;
      }
      next.visited = epoch;
      continue;
    }
    if (h < kMaskedHops) shared_hops |= std::uint32_t{1} << h;
    shared = std::min(shared, next.capacity);
    if (next.visited == epoch) continue;
    next.visited = epoch;
    component_links.push_back(id);
  }
  flow.cap_link = cap_capacity < shared ? cap : kNoCap;
  flow.shared_hops = shared_hops;
}

// Breadth-first search from `seed` over link -> draining flows -> their links.
void Simulator::Impl::collect_component(topo::LinkId seed) {
  component_links.clear();
  component_flows.clear();
  links[seed].visited = epoch;
  if (is_private(seed)) {
    join_component(links[seed].flows.front().slot);
  } else {
    component_links.push_back(seed);
  }
  for (std::size_t i = 0; i < component_links.size(); ++i) {
    for (const FlowRef ref : links[component_links[i]].flows) {
      if (marks[ref.slot].visited != epoch) join_component(ref.slot);
    }
  }
}

// Max-min levels. When flows leave, every flow whose rate is below the smallest departed rate
// keeps it exactly: no departed flow crosses a bottleneck of those lower levels, so progressive
// filling would repeat them step for step. When a flow f arrives, every level below f's new
// rate r_f is repeated too: until the filling reaches r_f no link of f's route saturates (f
// freezes at the first that does), so the filling elsewhere runs as before, and a link of f's
// route that saturated below r_f before would saturate even earlier with f. r_f is not known
// before the filling, but `arrival_floor` bounds it from below. The upper levels are then a
// progressive filling of the upper flows (and the arrivals) on what the lower ones leave of each
// link, and that filling splits into components joined by upper flows only; those without a
// departed or arrived flow's link keep their rates too. So the search from a changed link
// follows upper flows and arrivals (rate 0) only, and counts the lower flows on each link it
// reaches as fixed load.
void Simulator::Impl::collect_upper_component(topo::LinkId seed, double keep_below) {
  component_links.clear();
  component_flows.clear();
  links[seed].visited = epoch;
  if (is_private(seed)) {
    const FlowRef only = links[seed].flows.front();
    if (only.rate < keep_below && only.rate != 0) {  // a lower flow keeps its rate
      if (recording) record_link_series(seed);       // but the link lost the departed ones
      return;
    }
    join_component(only.slot);
  } else {
    component_links.push_back(seed);
  }
  for (std::size_t i = 0; i < component_links.size(); ++i) {
    LinkState& link = links[component_links[i]];
    link.spare = link.capacity;
    link.unfrozen = 0;
    link.version = 0;
    for (const FlowRef ref : link.flows) {
      if (ref.rate < keep_below && ref.rate != 0) {
        link.spare -= ref.rate;  // a lower flow: fixed load (`freeze` skips it)
        continue;
      }
      ++link.unfrozen;
      if (marks[ref.slot].visited != epoch) join_component(ref.slot);
    }
    link.spare = std::max(0.0, link.spare);
  }
}

// A lower bound of the max-min rate of flow `slot` after this timestamp's changes: the smallest
// equal share capacity / flows over its links. At its bottleneck a flow has the largest rate
// and the link is full, so its rate is at least that link's equal share.
double Simulator::Impl::arrival_floor(std::uint32_t slot) const noexcept {
  const Flow& flow = flows[slot];
  double floor = kNoDeparture;
  const Hop* path = flow.path();
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    const LinkState& link = links[path[h].link];
    floor = std::min(floor, link.capacity / static_cast<double>(link.flows.size()));
  }
  return floor;
}

// Progressive filling: repeatedly take the link whose spare capacity divided by its unfrozen
// flows is smallest (ties: lowest link id), give that share to its unfrozen flows and freeze
// them. Small components scan their links for the minimum; large ones keep a heap of
// candidates. Shares of the other links never decrease, so superseded heap candidates are
// skipped by version. Both pick the same bottlenecks in the same order, so they give the same
// rates to the last bit.
void Simulator::Impl::fill() {
  if (component_flows.size() == 1) {
    // What the filling gives a lone flow: its slowest link.
    Flow& flow = flows[component_flows.front()];
    const Hop* path = flow.path();
    flow.new_bottleneck = path[0].link;
    for (std::uint32_t h = 1; h < flow.hops; ++h) {
      if (links[path[h].link].capacity < links[flow.new_bottleneck].capacity) {
        flow.new_bottleneck = path[h].link;
      }
    }
    flow.new_rate = links[flow.new_bottleneck].capacity;
    return;
  }
  for (const topo::LinkId link : component_links) {
    LinkState& state = links[link];
    state.spare = state.capacity;
    state.unfrozen = static_cast<std::uint32_t>(state.flows.size());
    state.version = 0;
  }
  fill_loaded();
}

// The filling proper, once each component link has its `spare` and `unfrozen` set.
void Simulator::Impl::fill_loaded() {
  if (component_flows.size() == 1) {
    freeze_unshared();  // what the filling gives a lone flow: its smallest spare
    return;
  }
  scan.clear();
  for (const topo::LinkId link : component_links) {
    if (links[link].unfrozen > 0) scan.push_back(link);
  }
  unfrozen_flows = component_flows.size();
  shared_links = 0;
  for (const topo::LinkId link : scan) shared_links += links[link].unfrozen > 1 ? 1 : 0;
  // A flow's cap is a candidate too: its private link, set up as a component link with the one
  // unfrozen flow (the same candidate, share and tie order as when private links were part of
  // the filling; `freeze_flow` retires it).
  for (const std::uint32_t slot : component_flows) {
    const topo::LinkId cap = flows[slot].cap_link;
    if (cap == kNoCap) continue;
    LinkState& state = links[cap];
    state.spare = state.capacity;
    state.unfrozen = 1;
    state.version = 0;
    scan.push_back(cap);
  }
  if (scan.size() <= kScanLimit) {
    fill_by_scan();
  } else {
    fill_by_heap();
  }
}

// Once no link has two unfrozen flows, the filling gives each unfrozen flow the smallest spare
// capacity over its links (its links' shares are their spares, and freezing one flow changes no
// other unfrozen flow's links), in one pass.
void Simulator::Impl::freeze_unshared() {
  for (const std::uint32_t slot : component_flows) {
    Flow& flow = flows[slot];
    if (flow.frozen == epoch) continue;
    flow.frozen = epoch;
    double rate = flow.cap_link == kNoCap ? std::numeric_limits<double>::infinity()
                                          : links[flow.cap_link].capacity;
    flow.new_bottleneck = flow.cap_link;
    const Hop* path = flow.path();
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      const LinkState& link = links[path[h].link];
      if (link.flows.size() != 1 && link.spare < rate) {
        rate = link.spare;
        flow.new_bottleneck = path[h].link;
      }
    }
    flow.new_rate = rate;
    mark_freeze(flow.new_bottleneck, rate);
  }
  unfrozen_flows = 0;
}

void Simulator::Impl::fill_by_scan() {
  while (!scan.empty()) {
    if (shared_links == 0) {
      freeze_unshared();
      return;
    }
    std::size_t best = 0;
    double best_share = links[scan[0]].spare / links[scan[0]].unfrozen;
    for (std::size_t i = 1; i < scan.size(); ++i) {
      const LinkState& state = links[scan[i]];
      const double share = state.spare / state.unfrozen;
      if (share < best_share || (share == best_share && scan[i] < scan[best])) {
        best = i;
        best_share = share;
      }
    }
    freeze(scan[best], best_share);
    std::erase_if(scan, [this](topo::LinkId link) { return links[link].unfrozen == 0; });
  }
}

// The queue holds one live candidate per link with unfrozen flows, keyed at most at the link's
// current share. A freeze raises the shares of the links it touches (in exact arithmetic), so
// their candidates stay valid lower keys and are re-keyed only when they reach the top; a share
// that floating rounding lowered is pushed at once. So the top, once its key equals its current
// share, is the link of smallest share (ties: lowest id), as with a heap kept exact.
//
// The queue is two parts: the first candidates, sorted once (`sorted`, taken from `head` on),
// and a binary heap of the re-keyed ones (`candidates`); the top is the smaller of their two
// heads. `WorseCandidate` orders every bit of a candidate and keys are distinct (a re-key bumps
// the link's version), so this pops the candidates in the order one heap of them all does, and
// every filling is the same to the bit. Most candidates are never re-keyed (the 17 trees of
// `BM_ConcurrentTreesOnRail65536`: 1.88 M first candidates, 0.37 M re-keyed), and a sorted run
// pops them in O(1) each where the heap's pop sifts through ~log2(links) levels.
void Simulator::Impl::fill_by_heap() {
  candidates.clear();
  sorted.clear();
  for (const topo::LinkId link : scan) {
    LinkState& state = links[link];
    state.key = state.spare / state.unfrozen;
    sorted.emplace_back(state.key, link, state.version);
  }
  sort_candidates(sorted, sort_scratch);
  std::size_t head = 0;
  // Once every flow is frozen the remaining candidates could only be skipped.
  while (unfrozen_flows > 0 && (head < sorted.size() || !candidates.empty())) {
    if (shared_links == 0) {
      freeze_unshared();
      return;
    }
    const bool from_sorted =
        head < sorted.size() &&
        (candidates.empty() || WorseCandidate{}(candidates.front(), sorted[head]));
    if (!from_sorted) std::pop_heap(candidates.begin(), candidates.end(), WorseCandidate{});
    const Candidate best = from_sorted ? sorted[head++] : candidates.back();
    if (!from_sorted) candidates.pop_back();
    LinkState& bottleneck = links[best.link()];
    if (bottleneck.version != best.version() || bottleneck.unfrozen == 0) continue;
    const double share = bottleneck.spare / bottleneck.unfrozen;
    if (share != best.share()) {
      bottleneck.key = share;
      candidates.emplace_back(share, best.link(), ++bottleneck.version);
      std::push_heap(candidates.begin(), candidates.end(), WorseCandidate{});
      continue;
    }
    freeze(best.link(), share);
    rekey_touched();
  }
}

// After a freeze: pushes the links whose share floating rounding lowered below their key.
void Simulator::Impl::rekey_touched() {
  for (const topo::LinkId link : touched) {
    LinkState& other = links[link];
    if (other.unfrozen == 0) continue;
    const double current = other.spare / other.unfrozen;
    if (!(current < other.key)) continue;
    other.key = current;
    candidates.emplace_back(current, link, ++other.version);
    std::push_heap(candidates.begin(), candidates.end(), WorseCandidate{});
  }
}

// Gives `share` to the unfrozen flows of `bottleneck`, freezes them and takes their share from
// every link they cross; `touched` lists those links.
void Simulator::Impl::freeze(topo::LinkId bottleneck, double share) {
  touched.clear();
  for (const FlowRef ref : links[bottleneck].flows) {
    if (marks[ref.slot].visited != epoch) continue;  // fixed load
    if (flows[ref.slot].frozen == epoch) continue;   // frozen
    freeze_flow(ref.slot, share, bottleneck);
  }
  mark_freeze(bottleneck, share);
}

// Gives `share` to unfrozen flow `slot` and takes it from its component links (appended to
// `touched` once per round: a round starts where `touched` was cleared).
void Simulator::Impl::freeze_flow(std::uint32_t slot, double share, topo::LinkId bottleneck) {
  if (touched.empty()) ++touch_round;
  Flow& flow = flows[slot];
  flow.frozen = epoch;
  flow.new_rate = share;
  flow.new_bottleneck = bottleneck;
  --unfrozen_flows;
  const Hop* path = flow.path();
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    if (h < kMaskedHops && (flow.shared_hops >> h & 1U) == 0) {
      // Private (`add_links_of` read it in this computation): at most the cap candidate, now
      // retired. Other private links are no candidates: their state is not read.
      if (path[h].link == flow.cap_link) links[path[h].link].unfrozen = 0;
      continue;
    }
    LinkState& other = links[path[h].link];
    if (other.flows.size() == 1) {  // private: at most the flow's cap candidate, now retired
      other.unfrozen = 0;
      continue;
    }
    other.spare = std::max(0.0, other.spare - share);
    if (--other.unfrozen == 1) --shared_links;
    if (other.touched != touch_round) {
      other.touched = touch_round;
      touched.push_back(path[h].link);
    }
  }
}

// Moves each flow whose rate changed to its new rate: settles the bytes drained at the old rate
// and reschedules its drain end. Flows whose rate did not change keep their pending event.
void Simulator::Impl::apply_rates() {
  for (const std::uint32_t slot : component_flows) {
    Flow& flow = flows[slot];
    marks[slot].bottleneck = flow.new_bottleneck;
    if (flow.new_rate == flow.rate) continue;
    if (flow.new_rate <= 0) {
      throw Error::internal("flow " + std::to_string(flow.id) + " got no bandwidth");
    }
    const bool pending = flow.rate > 0;  // a drain event is queued
    flow.remaining =
        detail::settled_remaining(flow.remaining, flow.rate, now - flow.settled, flow.size);
    flow.settled = now;
    flow.rate = flow.new_rate;
    const Hop* path = flow.path();
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      links[path[h].link].flows[path[h].position].rate = flow.rate;
    }
    const Time end = later(now, detail::drain_time_of(flow.remaining, flow.rate));
    if (pending && end >= flow.queued) {
      // The drain end moved later (or stayed): the queued event comes up first and is pushed
      // again then, at the position a push now would take (`reserve`), so every event pops
      // where it would have had this pushed a new one.
      if (flow.deferred_end == kNotDeferred) ++deferred;
      flow.deferred_end = end;
      flow.deferred_sequence = queue.reserve();
      continue;
    }
    if (pending) ++stale;  // the pending drain event is superseded
    if (flow.deferred_end != kNotDeferred) --deferred;
    flow.deferred_end = kNotDeferred;
    ++flow.version;
    flow.queued = end;
    queue.push(end, 0, kDrainEvent, slot, flow.version);
  }
}

void Simulator::Impl::record_series() {
  for (const std::uint32_t slot : component_flows) {
    const Flow& flow = flows[slot];
    const Hop* path = flow.path();
    for (std::uint32_t h = 0; h < flow.hops; ++h) {
      if (is_private(path[h].link)) record_link_series(path[h].link);
    }
  }
  for (const topo::LinkId link : component_links) record_link_series(link);
}

// After a verified refilling: the links whose total rate may have changed, those that gained or
// lost flows and those of the re-rated set (every other flow kept its rate).
void Simulator::Impl::record_verified() {
  for (const topo::LinkId link : dirty) record_link_series(link);
  for (const std::uint32_t slot : component_flows) {
    const Flow& flow = flows[slot];
    const Hop* path = flow.path();
    for (std::uint32_t h = 0; h < flow.hops; ++h) record_link_series(path[h].link);
  }
}

// Appends `link`'s current total rate to its series (one sample per timestamp and change).
void Simulator::Impl::record_link_series(topo::LinkId link) {
  if (!recorded.empty() && recorded[link] == 0) return;
  double rate = 0;
  for (const FlowRef ref : links[link].flows) rate += ref.rate;
  auto& samples = series[link];
  if (!samples.empty() && samples.back().at == now) {
    samples.back().rate = Bandwidth::bytes_per_second(rate);
    if (samples.size() >= 2 && samples[samples.size() - 2].rate.bytes_per_s() == rate) {
      samples.pop_back();
    }
    return;
  }
  const double last = samples.empty() ? 0.0 : samples.back().rate.bytes_per_s();
  if (rate != last) samples.push_back({now, Bandwidth::bytes_per_second(rate)});
}

// A cancelled action or a superseded drain end. Deliveries are never stale.
bool Simulator::Impl::is_stale(const QueuedEvent& e) const noexcept {
  switch (e.kind) {
    case kUserEvent:
      return actions[e.target].generation != e.stamp;
    case kDrainEvent:
      return flows[e.target].state != FlowState::kDraining || flows[e.target].version != e.stamp;
    default:
      return false;
  }
}

void Simulator::Impl::compact_queue() {
  queue.erase_if([this](const QueuedEvent& e) { return is_stale(e); });
  stale = 0;
}

// Links never used keep their zero statistics.
void Simulator::Impl::publish_stats() {
  for (const topo::LinkId i : used_links) {
    const LinkTally& tally = tallies[i];
    LinkStats& out = stats[i];
    out.bytes = tally.bytes_done;
    out.busy = tally.busy_done + (links[i].flows.empty() ? Time::zero() : now - tally.busy_since);
    out.peak_flows = tally.peak;
  }
  for (const Flow& flow : flows) {
    if (flow.state != FlowState::kDraining) continue;
    const double drained_now =
        flow.rate * static_cast<double>((now - flow.settled).ps()) / kPsPerSecond;
    const double sent = std::clamp(flow.size - flow.remaining + drained_now, 0.0, flow.size);
    const Hop* path = flow.path();
    for (std::uint32_t h = 0; h < flow.hops; ++h) stats[path[h].link].bytes += sent;
  }
}

Time drain_time(Bytes size, Bandwidth rate) {
  return Time::picoseconds(drain_ps(size.as_double(), rate.bytes_per_s()));
}

namespace detail {

Time drain_time_of(double remaining, double rate) {
  return Time::picoseconds(drain_ps(remaining, rate));
}

// A flow not yet rated (rate 0) keeps what it has: 0 * elapsed subtracts nothing.
double settled_remaining(double remaining, double rate, Time elapsed, double size) {
  if (rate > 0) remaining -= rate * static_cast<double>(elapsed.ps()) / kPsPerSecond;
  return remaining <= size * kRelativeTolerance ? 0 : remaining;
}

}  // namespace detail

// Epoch counters keep running: marks left in link states stay below every future epoch (see
// `renew_epochs` for the wrap).
void Simulator::Impl::reset() {
  queue.clear();
  now = Time::zero();
  events = 0;
  next_stop_check = 0;
  updates = 0;
  rated = 0;
  stale = 0;
  deferred = 0;
  // Action slots stay, with new generations, so that no handle from before cancels an event
  // scheduled after.
  free_actions.clear();
  for (std::uint32_t slot = 0; slot < actions.size(); ++slot) {
    if (actions[slot].fn) {
      actions[slot].fn = nullptr;
      ++actions[slot].generation;
    }
    free_actions.push_back(slot);
  }
  flows.clear();
  marks.clear();
  free_flows.clear();
  next_flow_id = 0;
  live_flows = 0;
  for (const topo::LinkId link : used_links) {
    links[link].flows.clear();
    tallies[link] = LinkTally{};
    stats[link] = LinkStats{};
    series[link].clear();
  }
  used_links.clear();
  dirty.clear();
  arrivals.clear();
  departed_min = kNoDeparture;
}

void Simulator::Impl::renew_epochs() {
  for (LinkState& link : links) {
    link.visited = 0;
    link.touched = 0;
  }
  for (FlowMarks& mark : marks) mark.visited = 0;
  for (Flow& flow : flows) flow.frozen = 0;
  std::fill(freeze_marks.begin(), freeze_marks.end(), FreezeMark{});
  epoch = 0;
  touch_round = 0;
}

Simulator::Simulator(const topo::Topology& topology) : impl_(std::make_unique<Impl>(topology)) {}
Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&& other) noexcept = default;
Simulator& Simulator::operator=(Simulator&& other) noexcept = default;

Time Simulator::now() const noexcept { return impl_->now; }

EventHandle Simulator::schedule(Time at, std::function<void()> action, int priority) {
  Impl& s = *impl_;
  if (at < s.now) {
    throw Error::internal("event scheduled at " + std::to_string(at.ps()) +
                          " ps, before the current time " + std::to_string(s.now.ps()) + " ps");
  }
  std::uint32_t slot = 0;
  if (!s.free_actions.empty()) {
    slot = s.free_actions.back();
    s.free_actions.pop_back();
  } else {
    s.actions.emplace_back();
    slot = static_cast<std::uint32_t>(s.actions.size() - 1);
  }
  Action& a = s.actions[slot];
  a.fn = std::move(action);
  s.queue.push(at, priority, kUserEvent, slot, a.generation);
  return EventHandle{(static_cast<std::uint64_t>(a.generation) << 32) | (slot + 1ULL)};
}

void Simulator::cancel(EventHandle handle) {
  Impl& s = *impl_;
  const std::uint64_t low = handle.id & 0xffffffffULL;
  if (low == 0 || low > s.actions.size()) return;
  const auto slot = static_cast<std::uint32_t>(low - 1);
  Action& a = s.actions[slot];
  if (a.generation != static_cast<std::uint32_t>(handle.id >> 32) || !a.fn) return;
  a.fn = nullptr;
  ++a.generation;
  s.free_actions.push_back(slot);
  ++s.stale;
}

FlowId Simulator::start_flow(std::span<const topo::LinkId> route, Bytes size,
                             std::function<void(FlowId, Time)> on_done) {
  Impl& s = *impl_;
  if (size.count() < 0) {
    throw Error::internal("flow of negative size " + std::to_string(size.count()) + " bytes");
  }
  Time latency;
  for (std::size_t h = 0; h < route.size(); ++h) {
    const topo::LinkId link = route[h];
    if (link >= s.ends.size()) {
      throw Error::internal("route names link " + std::to_string(link) + " but topology " +
                            s.topology->name() + " has " + std::to_string(s.ends.size()));
    }
    if (h > 0 && s.ends[route[h - 1]].dst != s.ends[link].src) {
      throw Error::internal("route hop " + std::to_string(h) + " (link " + std::to_string(link) +
                            ") does not start where the previous link ends");
    }
    // The link's capacity is its bandwidth in bytes per second.
    if (!(s.links[link].capacity > 0)) {
      throw Error::input("route crosses a link without bandwidth",
                         {.key = "link " + std::to_string(link),
                          .value = fmt::format("{} B/s", s.links[link].capacity),
                          .expected = "a bandwidth > 0"});
    }
    latency += s.ends[link].latency;
  }

  const std::uint32_t slot = s.allocate_flow();
  if (s.next_flow_id == std::numeric_limits<FlowId>::max()) {
    throw Error::internal("more than 2^32 - 1 flows in one simulation");
  }
  const FlowId id = s.next_flow_id++;
  ++s.live_flows;
  Flow& flow = s.flows[slot];
  flow.hops = static_cast<std::uint32_t>(route.size());
  flow.id = id;
  ++flow.version;                    // no record stamped for the slot's previous flow can match
  flow.deferred_end = kNotDeferred;  // (the previous flow drained at its end: none left)
  flow.size = size.as_double();
  flow.remaining = flow.size;
  flow.rate = 0;
  flow.settled = s.now;
  flow.latency = latency;
  flow.on_done = std::move(on_done);
  if (size.count() == 0 || route.empty()) {
    flow.state = FlowState::kDelivering;
    s.queue.push(later(s.now, latency), 0, kDeliverEvent, slot, flow.version);
    return id;
  }
  flow.state = FlowState::kDraining;
  if (flow.hops > kInlineHops) flow.long_hops.resize(flow.hops);
  Hop* path = flow.path();
  for (std::uint32_t h = 0; h < flow.hops; ++h) {
    LinkState& link = s.links[route[h]];
    LinkTally& tally = s.tallies[route[h]];
    if (tally.peak == 0) s.used_links.push_back(route[h]);
    if (link.flows.empty()) tally.busy_since = s.now;
    path[h] = Hop{route[h], static_cast<std::uint32_t>(link.flows.size())};
    link.flows.push_back({slot, h, 0.0});
    tally.peak = std::max(tally.peak, static_cast<std::uint32_t>(link.flows.size()));
    s.dirty.push_back(route[h]);
  }
  s.arrivals.push_back(slot);
  return id;
}

void Simulator::run() {
  impl_->run_events(Time::max());
  impl_->publish_stats();
}

bool Simulator::run_within(std::uint64_t max_events) {
  impl_->run_events(Time::max(), max_events);
  impl_->publish_stats();
  return impl_->queue.empty();
}

bool Simulator::run_within(std::uint64_t max_events, Time until) {
  impl_->run_events(until, max_events);
  impl_->publish_stats();
  return impl_->queue.empty();
}

void Simulator::run_until(Time until) {
  if (until < impl_->now) {
    throw Error::internal("run_until " + std::to_string(until.ps()) +
                          " ps is before the current time " + std::to_string(impl_->now.ps()) +
                          " ps");
  }
  impl_->run_events(until);
  impl_->now = until;
  impl_->publish_stats();
}

void Simulator::stop_when(const std::atomic<bool>* flag) noexcept {
  impl_->stop_flag = flag;
  impl_->next_stop_check = impl_->events;
}

const char* Stopped::what() const noexcept { return "simulation stopped by its caller"; }

void Simulator::reset() { impl_->reset(); }

void Simulator::record_utilization(bool on) {
  impl_->recording = on;
  impl_->recorded.clear();
}

void Simulator::record_utilization(std::span<const topo::LinkId> links) {
  for (const topo::LinkId link : links) {
    if (link >= impl_->links.size()) {
      throw Error::internal("no link " + std::to_string(link) + " in topology " +
                            impl_->topology->name());
    }
  }
  impl_->recording = !links.empty();
  impl_->recorded.assign(links.empty() ? 0 : impl_->links.size(), 0);
  for (const topo::LinkId link : links) impl_->recorded[link] = 1;
}

void Simulator::reuse_lower_levels(bool on) { impl_->reuse_levels = on; }

void Simulator::verified_refills(bool on) { impl_->verified_refills = on; }

bool Simulator::link_idle(topo::LinkId link) const {
  if (link >= impl_->links.size()) {
    throw Error::internal("no link " + std::to_string(link) + " in topology " +
                          impl_->topology->name());
  }
  return impl_->links[link].flows.empty();
}

void Simulator::add_link_use(topo::LinkId link, double bytes, Time busy, std::uint32_t peak_flows) {
  Impl& s = *impl_;
  if (!link_idle(link)) {
    throw Error::internal("link " + std::to_string(link) + " credited while a flow drains on it");
  }
  if (s.recording && (s.recorded.empty() || s.recorded[link] != 0)) {
    throw Error::internal("link " + std::to_string(link) +
                          " credited while its utilization is recorded");
  }
  if (bytes < 0 || busy < Time::zero()) {
    throw Error::internal("link " + std::to_string(link) + " credited a negative use");
  }
  LinkTally& tally = s.tallies[link];
  // Listed when first used, so that `publish_stats` and `reset` see it; a tally with a peak
  // is listed already.
  if (tally.peak == 0) {
    if (peak_flows == 0) {
      throw Error::internal("link " + std::to_string(link) + " credited without a flow");
    }
    s.used_links.push_back(link);
  }
  tally.bytes_done += bytes;
  tally.busy_done += busy;
  tally.peak = std::max(tally.peak, peak_flows);
}

const LinkStats& Simulator::link_stats(topo::LinkId link) const {
  if (link >= impl_->stats.size()) {
    throw Error::internal("no link " + std::to_string(link) + " in topology " +
                          impl_->topology->name());
  }
  return impl_->stats[link];
}

std::span<const UtilizationSample> Simulator::utilization(topo::LinkId link) const {
  if (link >= impl_->series.size()) {
    throw Error::internal("no link " + std::to_string(link) + " in topology " +
                          impl_->topology->name());
  }
  return impl_->series[link];
}

std::uint64_t Simulator::events_processed() const noexcept { return impl_->events; }

const topo::Topology& Simulator::topology() const noexcept { return *impl_->topology; }

Bandwidth Simulator::flow_rate(FlowId flow) const {
  const Impl& s = *impl_;
  for (const Flow& f : s.flows) {
    if (f.state == FlowState::kDraining && f.id == flow) return Bandwidth::bytes_per_second(f.rate);
  }
  return Bandwidth{};
}

std::size_t Simulator::active_flows() const noexcept { return impl_->live_flows; }

std::uint64_t Simulator::rate_updates() const noexcept { return impl_->updates; }

std::uint64_t Simulator::flows_rated() const noexcept { return impl_->rated; }

}  // namespace nest::net
