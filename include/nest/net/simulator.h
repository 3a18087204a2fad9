#pragma once
/// \file
/// The flow-level network simulator: a discrete-event engine whose resources are the directed
/// links of a `topo::Topology`. Transfers are flows over routes; bandwidth is shared by max-min
/// fairness among the flows active on each link, recomputed only for the flows transitively
/// sharing links with a flow that starts or ends. A flow completes at its start + the latency of
/// its route + the time to drain its bytes at its (changing) fair rate.
///
/// The flow model, precisely:
/// - A flow started at time t0 *drains* from t0: it occupies every link of its route at once, at
///   one rate, until its last byte has left the source. Its rate is its max-min fair share
///   (progressive filling over the links of all active flows' routes; links have their
///   `Link::bandwidth`). Only draining flows count for sharing, busy time and peak flows.
/// - When it has drained (at t_d), the flow leaves its links and its last byte is *delivered*
///   after the route latency (the sum of its links' latencies, the first byte's propagation,
///   counted once): `on_done` runs at t_d + latency. A lone flow of S bytes over a route whose
///   slowest link has rate B therefore completes at exactly t0 + latency + S/B (rounded up to
///   whole picoseconds).
/// - Rates change only at events. All events of one timestamp run first (finishing and starting
///   any number of flows); then rates are recomputed once, for each connected component (flows
///   linked through shared links, transitively) that contains a link of a flow that started or
///   drained. Flows whose rate is below the smallest departed rate and below every arriving
///   flow's floor (the smallest capacity / flows over its links, a lower bound of its new rate)
///   keep it (max-min would repeat those levels), and only the flows joined to a changed link
///   through arrivals and flows at or above that level are refilled (see
///   `reuse_lower_levels`). Before that, a verified refilling re-rates only the arrivals and the
///   flows whose max-min bottleneck is a changed link and checks that every flow on the links
///   involved still has a bottleneck, growing the set when one does not (see
///   `verified_refills`). Links that carry a single flow only cap it and stay out of both. A
///   flow's drain end is rescheduled only when its rate changed; the old event is dropped
///   lazily (version stamp).
/// - Remaining bytes are doubles. A drain time is rounded up to whole picoseconds, except that a
///   value within floating rounding (1e-6 ps + 1e-12 relative) of a whole picosecond counts as
///   that picosecond; a flow whose remaining bytes are within 1e-12 of its size of zero has
///   drained. So a lone flow whose S/B is a whole number of picoseconds ends exactly on it.
/// - Zero-byte flows and flows with an empty route occupy no link; they are delivered after the
///   route latency (at once for an empty route), through an event, never inside `start_flow`.
///
/// Event order: (time, priority, insertion sequence); see event_queue.h. A flow's drain and
/// delivery events have priority 0.
///
/// One simulator owns its event queue and all its state: two simulators in one process (in two
/// threads) never interact. A simulator itself is not thread-safe.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>

#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::net {

/// Thrown by `Simulator::run`, `run_within` and `run_until` once the flag given to
/// `Simulator::stop_when` reads true: the run was abandoned part way.
struct Stopped : std::exception {
  [[nodiscard]] const char* what() const noexcept override;
};

/// A scheduled event; lets its owner cancel it.
struct EventHandle {
  std::uint64_t id = 0;  ///< 0 never names an event
};

/// Names a flow: unique among the flows one simulator started, numbered from 0 in start order.
using FlowId = std::uint32_t;

/// Statistics of one directed link over a run, as of the last return from `run`/`run_until`.
struct LinkStats {
  double bytes = 0;              ///< bytes carried (drained across the link), exact for
                                 ///< flows that finished draining
  Time busy;                     ///< time with at least one draining flow
  std::uint32_t peak_flows = 0;  ///< most flows draining at once
};

/// One point of a link's utilization series: from `at` on, the link carried `rate`.
struct UtilizationSample {
  Time at;         ///< when the link's total rate changed
  Bandwidth rate;  ///< sum of the rates of the flows draining over the link from `at` on
};

/// How long a flow of `size` bytes drains at a constant `rate` (> 0), rounded as the simulator
/// rounds drain ends: up to a whole picosecond, except that a value within floating rounding
/// (1e-6 ps + 1e-12 relative) of a whole picosecond counts as that picosecond. A flow alone on
/// its links from start to drain is delivered `drain_time(size, slowest link) + route latency`
/// after it starts. Throws `Error` (input) when the time reaches `kHorizon`.
[[nodiscard]] Time drain_time(Bytes size, Bandwidth rate);

namespace detail {

/// The simulator's own arithmetic on a flow's state (doubles, as it keeps them), for code that
/// must reproduce its runs to the picosecond (coll/private_rings.h). The drain of `remaining`
/// bytes at `rate` bytes/s, rounded as `drain_time`: the drain end the simulator schedules when
/// it gives a flow a new rate.
[[nodiscard]] Time drain_time_of(double remaining, double rate);

/// What a flow of `size` bytes with `remaining` left has left after draining at `rate` bytes/s
/// for `elapsed`, as the simulator settles it when its rate changes: zero within a relative
/// 1e-12 of `size`.
[[nodiscard]] double settled_remaining(double remaining, double rate, Time elapsed, double size);

}  // namespace detail

/// The end of simulated time: 2^62 ps, about 4.6e6 s (53 days). A drain end or delivery at or
/// past it throws `Error` (input, no key) "simulated time out of range", instead of overflowing
/// `Time`; callers name the input that caused it (e.g. `nest collective` names --size).
inline constexpr Time kHorizon = Time::picoseconds(std::int64_t{1} << 62);

/// Throws the "simulated time out of range" error.
[[noreturn]] void throw_out_of_range();

/// `now + delta` for `now` < `kHorizon` and `delta` >= 0; throws as above when the sum reaches
/// `kHorizon`.
[[nodiscard]] inline Time later(Time now, Time delta) {
  if (delta.ps() >= kHorizon.ps() - now.ps()) throw_out_of_range();
  return now + delta;
}

/// A flow-level simulation of one topology: owns its event queue, flows and link state.
/// Memory is O(links + flows in flight + pending events); nothing is kept per finished flow
/// except the link statistics (and the utilization series when recorded).
class Simulator {
 public:
  /// `topology` must outlive the simulator. O(number of links).
  explicit Simulator(const topo::Topology& topology);
  ~Simulator();
  /// Moves the whole simulation; `other` may only be destroyed or assigned afterwards.
  Simulator(Simulator&& other) noexcept;
  /// Moves the whole simulation; `other` may only be destroyed or assigned afterwards.
  Simulator& operator=(Simulator&& other) noexcept;

  /// Current simulated time.
  [[nodiscard]] Time now() const noexcept;

  /// Runs `action` at `at` (>= now). Same-time events run by (priority, insertion order), lower
  /// priority first. O(1) amortized (event_queue.h). Throws `Error` (internal) when `at` < now().
  EventHandle schedule(Time at, std::function<void()> action, int priority = 0);
  /// Cancels a pending event; cancelling one that ran or was cancelled is a no-op. O(1).
  void cancel(EventHandle handle);

  /// Starts a flow of `size` bytes now along `route` (directed links, path order; may be empty
  /// for a local copy, which completes at once). `on_done(flow, now)` runs when the last byte
  /// arrives. The route is copied (inline in the flow for up to 8 links), so the span need only
  /// be valid during the call. O(route length); the
  /// rate is set when the current timestamp's events are done. Throws `Error` (internal) for a
  /// negative size, an unknown link or a route whose links do not join, and (input) for a
  /// link without bandwidth.
  FlowId start_flow(std::span<const topo::LinkId> route, Bytes size,
                    std::function<void(FlowId, Time)> on_done);

  /// Runs events until none are left.
  void run();
  /// Runs events until none are left or `events_processed()` has reached `max_events` (checked
  /// between timestamps, so the last timestamp's events all run); true when none is left. The
  /// same inputs stop at the same event.
  [[nodiscard]] bool run_within(std::uint64_t max_events);
  /// `run_within(max_events)` that also leaves the events after `until` pending (as
  /// `run_until`, but now() stays at the last event run): true when none is left.
  [[nodiscard]] bool run_within(std::uint64_t max_events, Time until);
  /// Runs events with time <= `until`, then sets now() to `until`. Throws `Error` (internal)
  /// when `until` < now(). Besides the events, each call (and `run`) costs O(links + flows in
  /// flight) to bring the link statistics up to date.
  void run_until(Time until);
  /// From now on the runs above read `*flag` (relaxed) between timestamps, once per
  /// `kStopCheckEvents` events run, and throw `Stopped` when it is true; null: never (the
  /// default). For a caller on another thread that no longer needs the run (`Job::placement`'s
  /// replays ahead of the search's end); a run whose flag stays false is the run without it.
  /// After `Stopped` the simulator may only be reset or destroyed. `flag` must outlive its use.
  void stop_when(const std::atomic<bool>* flag) noexcept;
  static constexpr std::uint64_t kStopCheckEvents = std::uint64_t{1} << 16;

  /// Forgets every flow, pending event, statistic and utilization sample and sets now() to zero,
  /// keeping the settings and the memory of the link table and queues: what follows runs exactly
  /// as on a fresh simulator of the same topology. Handles from before name no event (cancelling
  /// one is a no-op), though new handles may differ from a fresh simulator's. O(links used since
  /// the last reset + pending events); a fresh simulator costs O(links) of allocation and clearing
  /// (megabytes on a 16,384-GPU fabric), which callers running thousands of short simulations save
  /// this way.
  void reset();

  /// Records each link's rate changes (off by default; costs memory per change).
  void record_utilization(bool on);
  /// Records the rate changes of `links` only (empty: off), without the other links' memory
  /// and appends. Unlike recording every link, it keeps the verified refilling on (it records
  /// the links of the flows that refilling re-rates and the links that gained or lost flows),
  /// so the run is exactly the one without recording. Throws `Error` (internal) for a link not
  /// in the topology.
  void record_utilization(std::span<const topo::LinkId> links);
  /// Keep the rates of the flows below the smallest departed rate and below each arrival's floor
  /// (its smallest capacity / flows over its links), less a 1e-9 relative margin, and refill
  /// only the flows reached from the changed links through arrivals and flows at or above that
  /// level: max-min gives the others the same rates. On by default; off refills whole
  /// components (the reference for tests; equal up to floating rounding).
  void reuse_lower_levels(bool on);
  /// With `reuse_lower_levels` on, first re-rate only the flows that may have lost their
  /// max-min bottleneck (the arrivals and the flows whose bottleneck link changed), holding the
  /// others, and check that every flow on the links involved still has a bottleneck (a full
  /// link on which no flow is faster); flows that fail are added and the set re-rated, and past
  /// a few rounds, a few dozen flows or long link lists the component refilling takes over. On
  /// by default, but not used while every link's utilization is recorded
  /// (`record_utilization(true)`); max-min rates are unique, so the result is the same up to
  /// floating rounding.
  void verified_refills(bool on);
  /// True when no flow drains over `link` now (a flow between its drain end and its delivery
  /// does not count). Throws `Error` (internal) for a link not in the topology.
  [[nodiscard]] bool link_idle(topo::LinkId link) const;
  /// Adds to `link`'s statistics what flows timed outside the simulator carried over it: `bytes`,
  /// `busy` time and at most `peak_flows` at once, as if they had drained here (seen by
  /// `link_stats` after the next `run`/`run_until`). For a caller that has shown that none of
  /// them shared the link with a simulated flow (the replay's reductions that run alone, see
  /// src/replay/plan_replay.cc). Throws `Error` (internal) for a link not in the topology, a link
  /// with a flow draining, one whose utilization is recorded (its series would miss them), a
  /// negative use, or a first use of a link with `peak_flows` 0.
  void add_link_use(topo::LinkId link, double bytes, Time busy, std::uint32_t peak_flows);
  /// Statistics of directed link `link` (< topology().num_links(), else `Error`, internal).
  [[nodiscard]] const LinkStats& link_stats(topo::LinkId link) const;
  /// Rate changes of `link` in time order (empty unless recording was on); consecutive samples
  /// differ in rate, and a link that falls idle gets a sample of rate 0.
  [[nodiscard]] std::span<const UtilizationSample> utilization(topo::LinkId link) const;
  /// Events executed so far (user actions, drain ends, deliveries; not dropped stale records).
  [[nodiscard]] std::uint64_t events_processed() const noexcept;
  /// The topology given at construction.
  [[nodiscard]] const topo::Topology& topology() const noexcept;

  /// Current fair rate of a draining flow; zero for a flow that is not draining (not yet rated,
  /// drained, delivered or unknown). O(flows in flight): for tests and diagnostics.
  [[nodiscard]] Bandwidth flow_rate(FlowId flow) const;
  /// Flows started and not yet delivered.
  [[nodiscard]] std::size_t active_flows() const noexcept;
  /// Rate recomputations done so far (one per timestamp with starts or drains; for benchmarks).
  [[nodiscard]] std::uint64_t rate_updates() const noexcept;
  /// Flows whose rate was computed, summed over all rate computations: the work of max-min
  /// sharing (for benchmarks; locality keeps it far below flows x updates).
  [[nodiscard]] std::uint64_t flows_rated() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::net
