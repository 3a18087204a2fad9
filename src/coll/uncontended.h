#pragma once
// The contention-free evaluation of collectives (private to coll): the exact answer of the flow
// simulator for runs in which every link carries its flows one after another (each flow starts
// strictly after the previous one on the link has drained), computed without the simulator.
//
// Why it is exact: a flow alone on its links drains at its slowest link's rate from the moment
// it starts, so it arrives `net::drain_time(bytes, slowest) + route latency` after its gate
// opened, and a gate opens at the last arrival it waits for (the rule of nest/coll/schedule.h).
// Transfer ids are in step order and a gate waits only for transfers of earlier steps, so one
// pass in id order computes every time. The pass also checks the premise: each link keeps the
// drain end of the last flow it accepted, and a flow must start strictly after it on every link
// of its route. Accepted flows are thus, per link, in time order and disjoint, which is what the
// simulator would have seen; the first flow that fails the check abandons the evaluation, and
// the caller runs the event simulation instead. The check is conservative (a flow that does not
// overlap but starts before an earlier-visited one on its link abandons too), never wrong.
//
// Cost: O(transfers + route hops), no events, no rate computation; memory O(ranks + links).
// `lower_bound` keeps, between calls, the passes of a few programs (`GroupProgram::key`) whose
// routes are few against their transfers (a tree's, not an all-to-all's): a later group of one of
// them costs O(routes · hops) instead of its transfers (see `repeat_pass`).
//
// Uniform rings (`Program::uniform_ring`: every rank sends one piece per step to its successor
// of the phase, waiting for its predecessor's send of the step before and, in most rings, for
// its own) are derived from one step per phase instead when every group is such a ring, in
// O(phases · ranks · route hops): rings whose ranks wait for their own sends, and rings that
// forward on arrival (NCCL's) of one phase per channel in which no rank's send starts before its
// previous one drained (O(ranks) more for that check): see `evaluate_rings` for
// the conditions and the proof that the answer is the pass's. Flat forwarding rings whose
// buffer does not split evenly (chunks of two sizes a byte apart, each forwarded as received:
// `BoundingRingPhase::carried`) are derived too, in the same time, when a margin shows that no
// send starts before the previous one drained (`evaluate_carried_rings`). The bound's pass over a
// ring, whether ranks wait for their own sends or forward on arrival, is derived too
// (`bound_ring`), in O(phases · ranks · route hops): exactly for a uniform ring of one phase per
// channel; from each phase's least piece for a buffer that does not split evenly
// (`Program::bounding_ring`) and phase by phase for a hierarchical ring, at most the pass's
// arrivals (the same link sums and events).

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "nest/coll/program.h"
#include "nest/coll/simulate.h"
#include "nest/core/units.h"
#include "nest/topo/router.h"
#include "nest/topo/topology.h"

namespace nest::net {
class Simulator;
}  // namespace nest::net

namespace nest::coll::detail {

/// What a program is, for `UncontendedEvaluator::lower_bound` to take the pass of a group of
/// the same program as another's: the oracle's key of its lowered programs, the shape (a 64-bit
/// digest of the schedule in rank space) and the size in bytes. Programs of equal keys are taken
/// to be the same, as the oracle's caches of lowered programs take them.
struct ProgramKey {
  std::uint64_t shape = 0;
  std::uint64_t size = 0;
  friend bool operator==(const ProgramKey&, const ProgramKey&) = default;
};

/// One group's collective: its program and the device of each rank. With `key`, the group's
/// devices are distinct and every program at this address with this key is the same program
/// (`lower_bound` may reuse the pass of an earlier group of it).
struct GroupProgram {
  const Program* program = nullptr;
  std::span<const topo::DeviceId> group;
  std::optional<ProgramKey> key;
};

/// What the simulator would have reported for a contention-free run started at time zero.
struct UncontendedRun {
  std::vector<Time> durations;  // per group: its last arrival
  std::uint64_t events = 0;     // the simulator's count: 2 per flow, 1 per zero-byte transfer,
                                // 1 per group without transfers
  std::vector<LinkUse> links;   // every link a flow drained over, by increasing id
};

/// A lower bound of what the event simulation reports for a run, and its event count.
struct RunBound {
  Time slowest;              // <= the last arrival of any group in the event simulation
  std::uint64_t events = 0;  // the simulator's count, as `UncontendedRun::events`
};

/// What every flow of a run puts over one link (`UncontendedEvaluator::lower_bound`): the
/// bytes all of them drain across it and the shortest route latency among them.
struct LinkLoad {
  topo::LinkId link = 0;
  double bytes = 0;
  Time min_latency;
};

/// `program`'s uniform rings (`Program::uniform_ring`) over `n` >= 2 ranks with one phase per
/// channel, a channel's consecutive phases of the same piece and successors merged into one (a
/// flat ring's reduce-scatter and all-gather); empty when the program is not such a ring, a
/// phase is malformed (successors not for every rank, an empty piece, no steps) or the phases do
/// not cover its transfers.
[[nodiscard]] std::vector<UniformRingPhase> one_phase_per_channel(const Program& program,
                                                                  std::size_t n);

/// `program` over `n` >= 2 ranks as ring phases for the event-free bound:
/// `Program::bounding_ring`, else `Program::uniform_ring` (each rank sending steps · piece),
/// with a channel's consecutive phases of the same successors merged into one (a flat ring's
/// reduce-scatter and all-gather); empty when it is neither, a phase is malformed (successors or
/// sums not for every rank, an empty least piece, no steps), a channel's phases are not listed
/// together or do not cover the program's steps, or the phases do not cover its transfers.
[[nodiscard]] std::vector<BoundingRingPhase> bounding_phases(const Program& program, std::size_t n);

/// A lower bound of the last delivery of a simulation on `sim` whose flows all started at or
/// after time zero and put `loads` over their links (`UncontendedEvaluator::lower_bound` of the
/// same groups and salt), from its state at `sim.now()` (link statistics as `run_within`
/// leaves them): over every link, now plus the bytes still to drain across it over its
/// bandwidth plus its shortest route latency, less `margin` and a relative 1e-6 for
/// rounding (see the definition). As the run goes on it rises no faster than the clock, and
/// where links sit idle it passes a time to beat well before the run's clock does.
[[nodiscard]] Time progress_bound(const net::Simulator& sim, std::span<const LinkLoad> loads,
                                  Time margin);

/// Reusable buffers for `evaluate`: one per thread (e.g. per oracle).
class UncontendedEvaluator {
 public:
  /// `derive_rings`: derive uniform rings from one step per phase (see `evaluate_rings`) and
  /// the bounds of rings from their ranks (`bound_ring`); false visits every transfer (the
  /// tests compare both).
  explicit UncontendedEvaluator(const topo::Topology& topology, bool derive_rings = true);

  /// All `groups` started together at time zero, routed by `router` with flow keys salted by
  /// `salt` (as `Execution` does). nullopt when a flow would start on a link before the previous
  /// one there has drained, or in the same picosecond (or a route has a
  /// link without bandwidth): the event simulation must answer then.
  [[nodiscard]] std::optional<UncontendedRun> evaluate(topo::Router& router,
                                                       std::span<const GroupProgram> groups,
                                                       std::uint64_t salt);

  /// A lower bound of the event simulation's slowest group for `groups` started together at
  /// time zero, whether or not their flows contend, in O(transfers + route hops): the larger of
  /// (a) every group's last arrival in the transfer-by-transfer pass with every flow alone on
  /// its links (no admission check; for a ring derived phase by phase or from its least piece,
  /// at most that), and (b) over every link, no later than the earliest opening of a flow over it
  /// in that pass, plus the bytes all groups' flows drain across it over its bandwidth, plus the
  /// shortest route latency among them;
  /// each less a margin for rounding (see the definition for the proof). nullopt when a route has a
  /// link without bandwidth. With `loads`, also each link's load, by increasing link id (for
  /// `progress_bound`). Keeps the passes of keyed groups for later calls: a group of a kept
  /// program whose routes have the pass's rates and latencies costs O(routes · hops).
  [[nodiscard]] std::optional<RunBound> lower_bound(topo::Router& router,
                                                    std::span<const GroupProgram> groups,
                                                    std::uint64_t salt,
                                                    std::vector<LinkLoad>* loads = nullptr);

  /// How many `evaluate` calls were answered by the ring derivation.
  [[nodiscard]] std::uint64_t derived() const noexcept { return derived_; }
  /// How many groups of `lower_bound` calls were answered by the ring derivation.
  [[nodiscard]] std::uint64_t derived_bounds() const noexcept { return derived_bounds_; }
  /// How many groups of `lower_bound` calls took the pass of an earlier group of the same
  /// program (`repeat_pass`).
  [[nodiscard]] std::uint64_t repeated_passes() const noexcept { return repeated_passes_; }

 private:
  // Checks that `router` routes this evaluator's topology and clears the previous run's links.
  void begin(const topo::Router& router);
  struct LinkState {
    Time busy_until = Time::picoseconds(-1);  // drain end of the last accepted flow
    Time busy;
    double bytes = 0;
    // `lower_bound` only: the earliest gate opening and the shortest route latency of the flows
    // over the link.
    Time first_open;
    Time min_latency;
  };
  // A route a sender used: where its links are in `routes_` (and the room there, the longest
  // route held in that place), its rate and latency, the last drain time computed on it, and,
  // with `bound_only`, what its flows have not yet added to its links (their bytes and earliest
  // opening), added when the route leaves the sender's routes or the group ends.
  struct SenderRoute {
    static constexpr std::uint32_t kNone = ~std::uint32_t{0};
    std::uint32_t peer = kNone;  // the destination device
    std::uint32_t at = 0;
    std::uint32_t hops = 0;
    std::uint32_t room = 0;
    Bandwidth rate;
    Time latency;
    std::int64_t last_bytes = -1;
    Time last_drain;
    double pending_bytes = 0;
    Time pending_open = Time::max();
    std::uint32_t fill = kNone;  // while a pass is recorded: its index in `PassMemo::fills`
  };
  // Routes a sender keeps: a double binary tree's interior rank sends to its parent and two
  // children in turn while its pieces go up and down at once.
  static constexpr std::size_t kSenderRoutes = 3;
  // Per (rank, channel): the gate rule's running maxima and the routes used last.
  struct RankState {
    static constexpr std::uint32_t kNone = ~std::uint32_t{0};
    std::uint32_t send_step = kNone;
    std::uint32_t recv_step = kNone;
    Time open;                 // when the gate of `send_step` opened
    Time sent;                 // last arrival of the sends of `send_step`
    Time received_before;      // last arrival of receives of steps before `recv_step`
    Time received_at;          // last arrival of receives of `recv_step`
    std::uint8_t current = 0;  // the route used last
    std::uint8_t victim = 0;   // the route a new destination replaces, in turn
    std::array<SenderRoute, kSenderRoutes> routes;
  };

  // The pass over one group's transfers; with `bound_only` every flow is taken alone on its
  // links (no admission check: link bytes are summed, nothing else).
  bool evaluate_group(topo::Router& router, const GroupProgram& group, std::uint64_t salt,
                      UncontendedRun& run, bool bound_only = false);
  // `lower_bound`'s pass over one group that is a ring (`bounding_phases`), derived in
  // O(phases · ranks · route hops): the same link sums and events, the same arrivals for one
  // phase per channel of equal pieces, and at most the pass's arrivals and link openings
  // otherwise (see the definition). False: not such a ring, or a condition of the derivation
  // fails (a route with a link without bandwidth among them); nothing was changed, and the pass
  // answers.
  bool bound_ring(topo::Router& router, const GroupProgram& group, std::uint64_t salt,
                  UncontendedRun& run);
  // The run of groups that are all uniform rings, derived; nullopt when a condition of the
  // derivation fails (the transfer-by-transfer pass answers then).
  std::optional<UncontendedRun> evaluate_rings(topo::Router& router,
                                               std::span<const GroupProgram> groups,
                                               std::uint64_t salt);
  // The run of groups that are all rings forwarding on arrival whose pieces travel and differ
  // by a byte (`BoundingRingPhase::carried`), one phase per channel, derived; nullopt when a
  // condition of the derivation fails (the pass answers then).
  std::optional<UncontendedRun> evaluate_carried_rings(topo::Router& router,
                                                       std::span<const GroupProgram> groups,
                                                       std::uint64_t salt);
  // A derived ring's sender: routes src -> dst into `route_` (the flow key of `channel`), claims
  // its links for `owner` (appended to `owned`, released by `finish_derived`); its slowest rate
  // and route latency, or nullopt when the route is empty, a link has no bandwidth or is another
  // sender's (the derivation steps aside).
  struct SenderPath {
    double rate;
    Time latency;
  };
  std::optional<SenderPath> claim_route(topo::Router& router, topo::DeviceId src,
                                        topo::DeviceId dst, std::uint16_t channel,
                                        std::uint64_t salt, std::uint64_t owner,
                                        std::vector<topo::LinkId>& owned);
  // Adds a derived sender's flows to every link of `route`, as the pass adds them: `bytes` and
  // `busy` in all; false when a link's bytes reach 2^53 (no longer exact as a double).
  bool add_load(std::span<const topo::LinkId> route, double bytes, Time busy);
  // Ends a derivation: releases the links in `owned`, and returns `run` with every used link's
  // sums when `ok`, else clears them and returns nullopt.
  std::optional<UncontendedRun> finish_derived(UncontendedRun run,
                                               std::span<const topo::LinkId> owned, bool ok);
  bool admit(std::span<const topo::LinkId> route, Time start, Time drain, Bytes bytes);
  // `bound_only`: adds a route's pending flows to its links.
  void add_pending(SenderRoute& route);
  // Adds flows of `bytes` in all, the first opening at `open`, over `route` of latency
  // `latency` to its links' sums (earliest opening, shortest latency, bytes).
  void add_flows(std::span<const topo::LinkId> route, double bytes, Time open, Time latency);
  // Routes src -> dst (the flow key of `channel`) into `route_`: its slowest rate and latency
  // (infinity and zero when empty), or nullopt when a link has no bandwidth.
  std::optional<SenderPath> route_path(topo::Router& router, topo::DeviceId src, topo::DeviceId dst,
                                       std::uint16_t channel, std::uint64_t salt);

  // The bound's pass over a keyed group (`GroupProgram::key`), kept for the next groups of the
  // same program. The pass reads of a group's devices only, for each route it computes (when a
  // sender meets a destination it does not hold: devices compared, so ranks compared, since a
  // keyed group's devices are distinct), that route's slowest rate, latency and whether it is
  // empty, in an order that the program and the ranks fix: so a group of the same program whose
  // routes, computed in that order, have the same values has the same arrivals and events, and
  // its flows put the same bytes, from the same openings, on its own routes. Not kept for a
  // program that computes more than a quarter as many routes as it has transfers (an all-to-all
  // meets a new destination at every step): a repeat would cost about the pass, and the record
  // 56 bytes per transfer.
  struct PassFill {  // a route computed: sender and destination ranks, channel, and its values
    std::uint32_t src = 0;
    std::uint32_t dst = 0;
    std::uint16_t channel = 0;
    bool empty = false;
    Bandwidth rate;
    Time latency;
  };
  struct PassStint {  // an `add_pending` of the route of fill `fill`
    std::uint32_t fill = 0;
    double bytes = 0;
    Time open;
  };
  struct PassMemo {
    const Program* program = nullptr;  // nullptr: unused
    ProgramKey key;
    std::size_t ranks = 0;
    std::vector<PassFill> fills;
    std::vector<PassStint> stints;
    Time end;
    std::uint64_t events = 0;
  };
  // The pass of a group of the program of a kept pass whose routes have its values: its
  // arrivals, events and link sums, as `evaluate_group(bound_only)` would add them. False:
  // none kept, or a route differs (nothing was changed, and the pass answers).
  bool repeat_pass(topo::Router& router, const GroupProgram& group, std::uint64_t salt,
                   UncontendedRun& run);
  // `evaluate_group(bound_only)` over `group`, recorded in a slot of `passes_` when keyed (the
  // pass of its program found there, else the next slot in turn), and kept once it completes.
  bool recorded_pass(topo::Router& router, const GroupProgram& group, std::uint64_t salt,
                     UncontendedRun& run);
  // The kept pass of `group`'s program (with `group.key`), or nullptr.
  PassMemo* find_pass(const GroupProgram& group);

  const topo::Topology* topology_;
  bool derive_rings_ = true;
  std::uint64_t derived_ = 0;
  std::uint64_t derived_bounds_ = 0;
  std::vector<LinkState> links_;
  std::vector<std::uint64_t> owner_;  // per link: 1 + the sender whose route holds it, or 0
  std::vector<topo::LinkId> used_;    // links touched by the current run
  std::vector<std::vector<RankState>> ranks_;  // [channel][rank] of the current group
  std::vector<Transfer> batch_;                // transfers read from the program, a block at a time
  // The senders' routes (`SenderRoute::at`), one region per route kept, reused as its peer
  // changes, and a route being computed: routed afresh, not through the router's cache,
  // which would keep every pair of every layout asked (see `evaluate_group`).
  std::vector<topo::LinkId> routes_;
  std::vector<topo::LinkId> route_;
  // `bound_ring`'s senders, phase q's at q·n: route (in `routes_`), latency and step time.
  struct RingSender {
    std::uint32_t route_at = 0;
    std::uint32_t hops = 0;
    Time latency;
    Time step;
  };
  std::vector<RingSender> ring_;
  // Kept passes (a few programs: the groups of one query come one after another), the one
  // being recorded, and `repeat_pass`'s routes, fill by fill.
  std::array<PassMemo, 4> passes_;
  std::size_t next_pass_ = 0;
  PassMemo* recording_ = nullptr;
  std::uint64_t record_limit_ = 0;  // routes past which the recording stops
  std::uint64_t repeated_passes_ = 0;
  std::vector<std::uint32_t> fill_at_;
  std::vector<topo::LinkId> fill_links_;
};

}  // namespace nest::coll::detail
