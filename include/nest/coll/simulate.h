#pragma once
/// \file
/// One-call simulation of a collective on one or more device groups at once (every group runs
/// the same collective from time zero on one simulator, so they contend for shared links), and
/// the derivation of hierarchical levels from a topology's domains.

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::coll {

/// Levels of a hierarchical (or torus) collective on `group`, innermost first, from the
/// topology's nested domains (`Topology::domain_sizes`): for each domain size, the number of
/// the group's devices that share a domain of that size, divided by the count at the level
/// below; levels of 1 are dropped and the product is the group size. Throws `Error` (input,
/// key "--group") unless the group lists each domain's devices consecutively and every domain
/// it touches holds the same number of its devices. O(n · domain levels).
[[nodiscard]] std::vector<int> hierarchy_levels(const topo::Topology& topology,
                                                std::span<const topo::DeviceId> group);

/// `spec` with levels filled in from the topology when the algorithm is hierarchical or torus
/// and none were given, then validated against the group size (see `validate`). Also checks
/// the group: non-empty, devices < topology.num_devices(), no duplicates (key "--group").
[[nodiscard]] CollectiveSpec resolve(const CollectiveSpec& spec, const topo::Topology& topology,
                                     std::span<const topo::DeviceId> group);

/// One directed link's use in a simulation.
struct LinkUse {
  topo::LinkId link = 0;
  double bytes = 0;  ///< bytes carried
  Time busy;         ///< time with at least one flow draining
  std::uint32_t peak_flows = 0;
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
};

/// Knobs of `simulate`.
struct SimulationOptions {
  std::uint64_t seed = 0;  ///< ECMP seed of the router and flow-key salt
  int busiest_links = 0;   ///< how many entries `SimulationResult::busiest` gets
  /// Skip the contention-free evaluation and always run the event simulation (for tests and
  /// benchmarks of the simulator; the result is the same).
  bool events_only = false;
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
[[nodiscard]] SimulationResult simulate(const topo::Topology& topology, const CollectiveSpec& spec,
                                        std::span<const std::vector<topo::DeviceId>> groups,
                                        const SimulationOptions& options = {});

}  // namespace nest::coll
