#pragma once
// The event simulation of rings whose senders share no link, without the simulator's max-min
// machinery.
//
// A ring that forwards on arrival (NCCL's) sends its next piece as soon as it arrives, so a
// rank's pieces can queue behind one another on its own route when the hop into it is faster
// than the hop out (an NVLink hop into an InfiniBand one): the contention-free evaluation
// (coll/uncontended.h) steps aside, and every flow went through the simulator (a 1,024-rank
// two-channel all-gather of 1 GiB on 4,096 rail GPUs: 4.2 M events, ~0.8 s). When no two
// senders (group, channel, rank) have a link in common, every link of a sender's route carries
// exactly that sender's flows, and the max-min rates are those of one *bundle* per sender: its
// k flows in flight share its route, so each gets c / k with c its route's smallest capacity
// (see `PrivateRingSimulator::run` for why the simulator computes exactly that, in every path).
// The run is then the simulator's, event for event, with a plain event list and O(1) work per
// event: the same drain ends and deliveries to the picosecond, the same events counted, the
// same link statistics.

#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <vector>

#include "coll/uncontended.h"
#include "nest/coll/simulate.h"
#include "nest/core/units.h"
#include "nest/topo/router.h"
#include "nest/topo/topology.h"

namespace nest::coll::detail {

/// What the event simulation of the rings reported, up to where it stopped.
struct PrivateRingRun {
  bool finished = false;        // every group's last transfer arrived
  std::vector<Time> durations;  // per group, its last arrival (when finished)
  std::uint64_t events = 0;     // events processed, as `net::Simulator::events_processed`
  std::vector<LinkUse> links;   // every link a flow crossed, by increasing id (when finished)
  std::size_t senders = 0;      // senders of the rings (group, channel, rank)
  std::size_t simulated = 0;    // of them simulated: one period of each ring (see `run`)
};

/// The event simulation of rings whose senders share no link. Reusable, one per thread (e.g.
/// per oracle engine): it keeps a per-link table sized at construction, so a call costs nothing
/// per link of the topology.
class PrivateRingSimulator {
 public:
  explicit PrivateRingSimulator(const topo::Topology& topology);
  ~PrivateRingSimulator();
  PrivateRingSimulator(const PrivateRingSimulator&) = delete;
  PrivateRingSimulator& operator=(const PrivateRingSimulator&) = delete;

  /// The event simulation of `groups` (all starting at time zero, routed by `router` with flow
  /// keys salted by `salt`, as `Execution` routes them), when every group is a uniform ring
  /// (`Program::uniform_ring`) that forwards on arrival with one phase per channel (consecutive
  /// phases of the same piece and successors count as one), no two senders share a link, and
  /// every route has a positive latency and no link without bandwidth; nullopt otherwise (the
  /// simulator runs them). Stops as `net::Simulator::run_within(max_events, until)` does:
  /// after the last timestamp at or before `until`, or after the timestamp at which the events
  /// processed reach `max_events`. Throws as the simulator does past its horizon. `router` must
  /// route the topology given at construction.
  ///
  /// A ring whose senders repeat with a period along it (every sender's route of the same
  /// capacity and latency as the one P places further, P dividing the ring's n ranks: rail
  /// fabrics' leaves and node orders) is simulated over one period, its last sender feeding its
  /// first; the run is the same (proof at `reduce`), each of its events counted n / P times.
  [[nodiscard]] std::optional<PrivateRingRun> run(
      topo::Router& router, std::span<const GroupProgram> groups, std::uint64_t salt,
      Time until = Time::max(),
      std::uint64_t max_events = std::numeric_limits<std::uint64_t>::max());

 private:
  struct Sender;
  // The groups' senders and their routes, or false when a condition fails.
  bool load(topo::Router& router, std::span<const GroupProgram> groups, std::uint64_t salt);
  // One period of every ring (`simulated_`, `of_`), from `senders_` and `rings_`.
  void reduce(std::span<const GroupProgram> groups);

  const topo::Topology* topology_;
  std::vector<std::uint32_t> owner_;  // per link: the sender routed over it, or max; reset
  std::vector<Sender> senders_;       // of the last `run`
  struct Ring {
    std::uint32_t first = 0;  // its senders: senders_[first, first + n), by rank
    std::uint32_t n = 0;
  };
  std::vector<Ring> rings_;  // one per group and channel
  // One period of each ring in order along it (a ring of several cycles whole, by rank).
  std::vector<Sender> simulated_;
  std::vector<std::uint32_t> of_;              // per sender: the one of `simulated_` it repeats
  std::vector<std::uint64_t> simulated_left_;  // per group: `simulated_`'s transfers not arrived
  std::vector<topo::LinkId> routes_;           // their routes, one after another
  std::vector<std::uint64_t> left_;            // per group: its program's transfers
  std::vector<topo::LinkId> route_;            // scratch
};

}  // namespace nest::coll::detail
