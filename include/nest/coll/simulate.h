#pragma once
/// \file
/// One-call simulation of a collective on one or more device groups at once (every group runs
/// the same collective from time zero on one simulator, so they contend for shared links), and
/// the derivation of hierarchical levels from a topology's domains.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nest/coll/calibration.h"
#include "nest/coll/closed_form.h"
#include "nest/coll/collective.h"
#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::net {
class Simulator;
}  // namespace nest::net

namespace nest::coll {

/// Levels of a hierarchical (or torus) collective on `group`, innermost first, from the
/// topology's nested domains (`Topology::domain_sizes`): for each domain size, the number of
/// the group's devices that share a domain of that size, divided by the count at the level
/// below; levels of 1 are dropped and the product is the group size. Throws `Error` (input,
/// key "--group") unless the group lists each domain's devices consecutively and every domain
/// it touches holds the same number of its devices. O(n · domain levels).
[[nodiscard]] std::vector<int> hierarchy_levels(const topo::Topology& topology,
                                                std::span<const topo::DeviceId> group);

/// True when `hierarchy_levels` accepts `group` (it lists each domain's devices consecutively
/// and every domain it touches holds as many of them), without throwing. O(n · domain levels).
[[nodiscard]] bool has_hierarchy_levels(const topo::Topology& topology,
                                        std::span<const topo::DeviceId> group);

/// The algorithm of `op` on `groups` when nothing fixes it, on the ideal network (under a
/// collective model the tuner chooses): on a `kind: dimensions` topology, allreduce,
/// reduce-scatter and all-gather run `hierarchical` with each dimension's algorithm (as
/// ASTRA-sim does) when every group has hierarchy levels (`has_hierarchy_levels`); otherwise,
/// and on every other topology, `default_algorithm(op)`. O(devices of the groups · domain
/// levels).
[[nodiscard]] Algorithm default_algorithm(const topo::Topology& topology, Operation op,
                                          std::span<const std::vector<topo::DeviceId>> groups);

/// The devices per scale-up domain of a group that spans several domains rail by rail: it lists
/// whole blocks of k devices, each block inside one innermost domain (a different one for each
/// block), with the same local devices (device mod domain size) in the same order in every
/// block. 0 when the group does not (or lies in one domain). O(n).
[[nodiscard]] int rail_block(const topo::Topology& topology, std::span<const topo::DeviceId> group);

/// The switch through which all of `group` reduces in NVLink SHARP: a switch that every device
/// of the group links to and whose links all lead to devices, on a topology with
/// `nvlink_sharp()`; none otherwise. O(n · degree).
[[nodiscard]] std::optional<topo::NodeId> nvls_switch(const topo::Topology& topology,
                                                      std::span<const topo::DeviceId> group);

/// `spec` made concrete for `group` on `network`, then validated against the group size (see
/// `validate`): levels from the topology when the algorithm is hierarchical or torus and none
/// were given; chunks 0 -> under a collective model, a pipelined tree, ring broadcast and ring
/// reduce in pieces of 512 KiB (NCCL's Simple step: 4 MiB buffer / 8 steps), at most 16 pieces
/// (per tree: size / 2), else 1; channels 0 -> under a model, ring allreduce, reduce-scatter and
/// all-gather on a group that spans domains rail by rail (`rail_block` k > 0) use min(model's
/// channels, k) rings, else 1; with channels > 1, ranks_per_node = the rail block. Also checks
/// the group: non-empty, devices < topology.num_devices(), no duplicates (key "--group"), and
/// that nvls has its switch (key "--algorithm"). Hierarchical without level algorithms on a
/// `kind: dimensions` topology takes each level's from its dimension, ring where the
/// dimension's cannot run on the level: halving_doubling on a level whose size is not a power
/// of two, double_binary_tree on a level that is not the last of an allreduce.
[[nodiscard]] CollectiveSpec resolve(const CollectiveSpec& spec, const CalibratedNetwork& network,
                                     std::span<const topo::DeviceId> group);
/// `resolve` on the ideal network of `topology` (its collective model ignored).
[[nodiscard]] CollectiveSpec resolve(const CollectiveSpec& spec, const topo::Topology& topology,
                                     std::span<const topo::DeviceId> group);

/// One directed link's use in a simulation.
struct LinkUse {
  topo::LinkId link = 0;
  double bytes = 0;  ///< bytes carried
  Time busy;         ///< time with at least one flow draining
  std::uint32_t peak_flows = 0;
};

class Program;
namespace detail {
class UncontendedEvaluator;
}  // namespace detail

/// A collective timed alone (`ContentionFreeEvaluator`, `AloneSimulator`).
struct AloneRun {
  Time duration;               ///< from its start to its last arrival
  std::vector<LinkUse> links;  ///< every link a flow drained over, by increasing id
};

/// The contention-free evaluation (see `simulate`) of one collective, for a caller that shares a
/// simulator with other traffic and has shown that no other flow crosses the collective's links
/// while it runs (the replay's gradient reductions, src/replay/plan_replay.cc). An `Execution` of
/// `program` on `group`, routed by `router` with flow keys salted by `salt`, started at any time
/// t then ends at t + `duration` and leaves these link statistics: its flows share links only
/// with one another, so the simulator times them as the evaluation does, and a run shifted by t
/// drains and arrives exactly t later (a drain time depends only on bytes and rate, in whole
/// picoseconds). Reusable; one per thread.
class ContentionFreeEvaluator {
 public:
  explicit ContentionFreeEvaluator(const topo::Topology& topology);
  ~ContentionFreeEvaluator();
  ContentionFreeEvaluator(const ContentionFreeEvaluator&) = delete;
  ContentionFreeEvaluator& operator=(const ContentionFreeEvaluator&) = delete;

  /// The run alone; nullopt when two of its own flows would overlap on a link, or one would
  /// start there in the picosecond another drains (the event simulation must time it then), or
  /// a route has a link without bandwidth. O(transfers + route hops); uniform rings
  /// O(phases · ranks · route hops).
  [[nodiscard]] std::optional<AloneRun> evaluate(topo::Router& router, const Program& program,
                                                 std::span<const topo::DeviceId> group,
                                                 std::uint64_t salt);

 private:
  std::unique_ptr<detail::UncontendedEvaluator> impl_;
};

/// The event simulation of one collective alone, on a simulator of its own: for the same caller
/// as `ContentionFreeEvaluator`, where that evaluation declines because the collective's own
/// flows share links (NCCL's double binary tree, whose pieces go up and down a node's links at
/// once). An `Execution` of `program` on `group` started at time t in a simulator whose other
/// flows never cross the collective's links while it runs gets the same max-min rates as here
/// (max-min sharing is computed per connected group of flows that share links) and so ends at
/// t + `duration` with these link statistics, up to the simulator's two choices per timestamp
/// (the level below which it keeps rates and whether the verified refilling takes the
/// timestamp), which an unrelated event in the same picosecond can change, and then only in the
/// rates' last bits (`net::Simulator::reuse_lower_levels`). Reusable; one per thread.
class AloneSimulator {
 public:
  explicit AloneSimulator(const topo::Topology& topology);
  ~AloneSimulator();
  AloneSimulator(const AloneSimulator&) = delete;
  AloneSimulator& operator=(const AloneSimulator&) = delete;

  /// The run alone, routed by `router` with flow keys salted by `salt`; its link statistics for
  /// the links of `links` (sorted) that a flow drained over, which must hold every link of its
  /// routes. Throws `Error` as the simulator does (a link without bandwidth, time out of range).
  [[nodiscard]] AloneRun run(topo::Router& router, const std::shared_ptr<const Program>& program,
                             std::span<const topo::DeviceId> group, std::uint64_t salt,
                             std::span<const topo::LinkId> links);

 private:
  std::unique_ptr<net::Simulator> sim_;
};

/// What `simulate` measured.
struct SimulationResult {
  std::vector<Time> durations;   ///< per group, start (time 0) to its last arrival
  Time makespan;                 ///< the largest duration
  std::uint64_t flows = 0;       ///< transfers simulated, all groups
  std::uint64_t events = 0;      ///< simulator events processed
  std::vector<LinkUse> busiest;  ///< the most-loaded links by bytes, then id (descending bytes)
  /// True when the contention-free evaluation answered: every link carried its flows one after
  /// another (each started strictly after the previous one there had drained), so every flow ran
  /// at its slowest link's rate, and no events were simulated. False when the event simulation
  /// ran (also for runs where a flow starts on a link in the picosecond another drains there).
  /// The numbers are the same either way.
  bool contention_free = false;
  /// The protocol the collective ran with (Simple on the ideal network).
  topo::Protocol protocol = topo::Protocol::kSimple;
  /// The collective model's base latency, included in `durations` and `makespan` (zero ideal).
  Time base_latency;
  /// True when a collective model calibrated the run.
  bool calibrated = false;
};

/// Knobs of `simulate`.
struct SimulationOptions {
  std::uint64_t seed = 0;  ///< ECMP seed of the router and flow-key salt
  int busiest_links = 0;   ///< how many entries `SimulationResult::busiest` gets
  /// Skip the contention-free evaluation and always run the event simulation (for tests and
  /// benchmarks of the simulator; the result is the same).
  bool events_only = false;
  /// Ignore the topology's collective model: line rates and the topology's latencies.
  bool ideal = false;
};

/// Simulates `spec` on every group of `groups` at once, all starting at time zero, on a fresh
/// simulator and router. Each group is resolved (`resolve`); groups must not share devices
/// (key "--concurrent"). Deterministic: same inputs and seed give the same result.
///
/// First tries the contention-free evaluation: one pass over the transfers in step order that
/// times each flow as alone on its route and checks, link by link, that no flow starts before
/// the previous one on a link has drained (strictly after). When that holds for every flow it is
/// exactly what the simulator computes, at O(transfers + hops) with no events
/// (`contention_free`); the first flow that fails abandons it, and the event simulation runs
/// instead (cost: the simulator's).
///
/// Under a collective model (the topology's, unless `options.ideal`) the run is calibrated as
/// nest/coll/calibration.h says: it runs on the copy of the topology for its protocol and every
/// duration includes the base latency.
[[nodiscard]] SimulationResult simulate(const topo::Topology& topology, const CollectiveSpec& spec,
                                        std::span<const std::vector<topo::DeviceId>> groups,
                                        const SimulationOptions& options = {});
/// The same on `network` (its model, or none); `options.ideal` is not read. A network built once
/// serves any number of calls (a sweep) without rebuilding the calibrated copies.
[[nodiscard]] SimulationResult simulate(const CalibratedNetwork& network,
                                        const CollectiveSpec& spec,
                                        std::span<const std::vector<topo::DeviceId>> groups,
                                        const SimulationOptions& options = {});

/// The algorithms NCCL's tuner would weigh for `op` on `group` (each valid there), in order of
/// preference on ties: allreduce ring, tree (only when the group spans scale-up domains: NCCL's
/// tree is a chain inside a node, no faster than its ring there), nvls (when the group sits on one
/// NVLink SHARP switch and `size` uses the Simple protocol, the only one NVLS runs), hierarchical
/// (when the group spans scale-up domains evenly); reduce-scatter and all-gather ring,
/// hierarchical; all-to-all pairwise, direct; broadcast ring, tree (across domains); reduce ring;
/// send, gather, scatter and sendrecv direct. On a torus, torus is added to the ring family's list.
[[nodiscard]] std::vector<Algorithm> tuner_candidates(const CalibratedNetwork& network,
                                                      Operation op, Bytes size,
                                                      std::span<const topo::DeviceId> group);

/// What the tuner chose.
struct TunedRun {
  CollectiveSpec spec;  ///< the chosen algorithm, resolved for the first group
  SimulationResult result;
};

/// Simulates `spec` with every algorithm of `tuner_candidates` (spec.algorithm is ignored) on
/// all `groups` at once and keeps the fastest (smallest makespan; ties: the earlier candidate),
/// as NCCL's tuner picks the algorithm its model says is fastest. The candidates run in the order
/// of their event-free lower bounds, each only while it can still win, and one whose bound
/// already loses not at all (src/coll/fastest.h): the same choice and result as simulating every
/// one to the end, at the cost of the winner's simulation and what the losers take to lose; an
/// error only a losing candidate's run would raise (its time past the simulator's horizon) is
/// not raised.
[[nodiscard]] TunedRun simulate_fastest(const CalibratedNetwork& network,
                                        const CollectiveSpec& spec,
                                        std::span<const std::vector<topo::DeviceId>> groups,
                                        const SimulationOptions& options = {});

/// The closed form (nest/coll/closed_form.h) of `spec` on `group` alone on `network`: the
/// protocol's base latency (in `base_latency_seconds`) plus the step-by-step sum on the copy of
/// the topology the protocol runs on, with the flow keys of `seed`. `spec` is resolved here.
[[nodiscard]] ClosedForm closed_form(const CalibratedNetwork& network, const CollectiveSpec& spec,
                                     std::span<const topo::DeviceId> group, std::uint64_t seed = 0);

/// `closed_form` for many groups on one network: the router of each topology copy the protocols
/// run on is built once (on a 16,384-GPU fabric a router costs milliseconds to build), not per
/// call. `network` must outlive it. Not thread-safe.
class ClosedFormPricer {
 public:
  ClosedFormPricer(const CalibratedNetwork& network, std::uint64_t seed);
  ~ClosedFormPricer();
  ClosedFormPricer(const ClosedFormPricer&) = delete;
  ClosedFormPricer& operator=(const ClosedFormPricer&) = delete;

  /// What `closed_form(network, spec, group, seed)` returns.
  [[nodiscard]] ClosedForm price(const CollectiveSpec& spec, std::span<const topo::DeviceId> group);

 private:
  struct Routers;
  const CalibratedNetwork& network_;
  std::uint64_t seed_;
  std::unique_ptr<Routers> routers_;
};

}  // namespace nest::coll
