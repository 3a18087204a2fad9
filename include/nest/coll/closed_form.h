#pragma once
/// \file
/// The alpha-beta closed form of a lowered collective on given devices, without contention.
///
/// The schedule is taken step by step, as if every step started when the previous one ended
/// (the textbook bulk-synchronous reading). Step k costs alpha_k + L_k / beta_k, where
///   alpha_k = the largest route latency among the step's transfers (sum of link latencies),
///   beta_k  = the smallest route bottleneck bandwidth among the step's transfers,
///   L_k     = the largest number of bytes one rank sends, or receives, in the step (a rank's
///             port is full duplex and its concurrent transfers share it).
/// Only a rank's own transfers share its port; transfers of different ranks are assumed not to
/// meet on any link. Where they do, the simulation is slower than the closed form, and the
/// difference is the contention the network adds. On a non-blocking switch (or a direct-link
/// ring) with the steps aligned, the simulator reproduces this exactly: e.g. ring allreduce of
/// S bytes over n ranks gives 2(n-1)·a + 2(n-1)/n·S/B.
///
/// Steps are aligned (tested exactly) for ring, hierarchical/torus, direct, pairwise,
/// halving-doubling on powers of two, the unpipelined double binary tree on 2, 3, 4, 5, 6, 8,
/// 12 and 16 ranks and the pipelined one on 2, 4 and 8. They are not when per-rank dependencies
/// let some ranks start a step early: trees with subtrees of different heights (e.g. 7 or 13
/// ranks: the simulation is then faster than this sum), other pipelined trees (early pieces
/// meet later ones on a port: slower), and halving-doubling's fold on non-powers of two (ranks
/// outside the fold send into folding ranks: slower by S/(2B) at 6 ranks).

#include <cstdint>
#include <span>

#include "nest/coll/program.h"
#include "nest/core/units.h"
#include "nest/topo/router.h"

namespace nest::coll {

/// The closed-form time of a schedule and its parts.
struct ClosedForm {
  double seconds = 0;            ///< total: latency_seconds + bandwidth_seconds
  double latency_seconds = 0;    ///< sum over steps of alpha_k
  double bandwidth_seconds = 0;  ///< sum over steps of L_k / beta_k
  std::uint32_t steps = 0;       ///< steps with at least one transfer
  Time max_alpha;                ///< largest per-step latency
  Bandwidth bottleneck;          ///< smallest per-step beta (zero without transfers)
};

/// Latency and bottleneck of one route.
struct RouteProperties {
  Time latency;          ///< sum of the links' latencies
  Bandwidth bottleneck;  ///< smallest link bandwidth (zero for an empty route)
};

/// Properties of `route` on `topology`. O(route length).
[[nodiscard]] RouteProperties route_properties(const topo::Topology& topology,
                                               std::span<const topo::LinkId> route);

/// The closed form of `program` (a `Schedule` or an implicit program) with rank r on device
/// group[r], routes from `router` with the flow keys an `Execution` with `flow_salt` would use.
/// O(transfers · route length) time, O(ranks) memory.
[[nodiscard]] ClosedForm closed_form(const Program& program, std::span<const topo::DeviceId> group,
                                     topo::Router& router, std::uint64_t flow_salt = 0);

}  // namespace nest::coll
