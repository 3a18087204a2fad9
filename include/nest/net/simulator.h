#pragma once
/// \file
/// The flow-level network simulator: a discrete-event engine whose resources are the directed
/// links of a `topo::Topology`. Transfers are flows over routes; bandwidth is shared by max-min
/// fairness among the flows active on each link, recomputed only for the flows transitively
/// sharing links with a flow that starts or ends. A flow completes at its start + the latency of
/// its route + the time to drain its bytes at its (changing) fair rate.
///
/// One simulator owns its event queue and all its state: two simulators in one process (in two
/// threads) never interact.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::net {

/// A scheduled event; lets its owner cancel it.
struct EventHandle {
  std::uint64_t id = 0;  ///< 0 never names an event
};

using FlowId = std::uint32_t;

/// Statistics of one directed link over a run.
struct LinkStats {
  double bytes = 0;              ///< bytes carried
  Time busy;                     ///< time with at least one active flow
  std::uint32_t peak_flows = 0;  ///< most flows active at once
};

/// One point of a link's utilization series: from `at` on, the link carried `rate`.
struct UtilizationSample {
  Time at;
  Bandwidth rate;
};

class Simulator {
 public:
  /// `topology` must outlive the simulator.
  explicit Simulator(const topo::Topology& topology);
  ~Simulator();
  Simulator(Simulator&&) noexcept;
  Simulator& operator=(Simulator&&) noexcept;

  /// Current simulated time.
  [[nodiscard]] Time now() const noexcept;

  /// Runs `action` at `at` (>= now). Same-time events run by (priority, insertion order), lower
  /// priority first.
  EventHandle schedule(Time at, std::function<void()> action, int priority = 0);
  /// Cancels a pending event; cancelling one that ran or was cancelled is a no-op.
  void cancel(EventHandle handle);

  /// Starts a flow of `size` bytes now along `route` (directed links, path order; may be empty
  /// for a local copy, which completes at once). `on_done(flow, now)` runs when the last byte
  /// arrives. The route span must stay valid until the flow completes.
  FlowId start_flow(std::span<const topo::LinkId> route, Bytes size,
                    std::function<void(FlowId, Time)> on_done);

  /// Runs events until none are left.
  void run();
  /// Runs events with time <= `until`, then sets now() to `until`.
  void run_until(Time until);

  /// Records each link's rate changes (off by default; costs memory per change).
  void record_utilization(bool on);
  [[nodiscard]] const LinkStats& link_stats(topo::LinkId link) const;
  [[nodiscard]] std::span<const UtilizationSample> utilization(topo::LinkId link) const;
  /// Events executed so far (for benchmarks).
  [[nodiscard]] std::uint64_t events_processed() const noexcept;
  [[nodiscard]] const topo::Topology& topology() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::net
