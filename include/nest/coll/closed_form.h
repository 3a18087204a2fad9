#pragma once
/// \file
/// The alpha-beta closed form of a lowered collective on given devices, without contention.
///
/// The schedule is taken step by step, as if every step started when the previous one ended
/// (the textbook bulk-synchronous reading). Step k costs alpha_k + L_k / beta_k, where
///   alpha_k = the largest route latency among the step's transfers (sum of link latencies), and
///   L_k / beta_k = the largest of
///     - each transfer's bytes over its route's bottleneck bandwidth, and
///     - each port's bytes over the port's bandwidth, a port being a route's first link (its
///       sender's way out) or last link (its receiver's way in): a rank's concurrent transfers
///       share the port they leave or enter by (full duplex: sending and receiving do not mix).
/// A device with several ports (a GPU's NVLink and its NIC, a torus node's links to its
/// neighbours) moves on each at that port's rate. Transfers are otherwise assumed not to meet on
/// any link; where they do, the simulation is slower than the closed form, and the difference is
/// the contention the network adds. On a non-blocking switch (or a direct-link ring) with the
/// steps aligned, the simulator reproduces this exactly: e.g. ring allreduce of S bytes over n
/// ranks gives 2(n-1)·a + 2(n-1)/n·S/B.
///
/// Steps are aligned (tested exactly, every n from 2 to 16, 1 to 3 chunks) for ring,
/// hierarchical/torus, direct, pairwise, halving-doubling on powers of two, tree broadcast
/// (pipelined or not), the unpipelined tree allreduce except on 7, 13, 14 and 15 ranks, and the
/// pipelined one on 2 and 4 ranks. They are not when per-rank dependencies let some ranks start
/// a step early, and the tests pin the difference:
/// - unpipelined tree allreduce with subtrees of different heights (7 and 13-15 ranks): the
///   simulation is faster than this sum (by 7-10% on a star);
/// - pipelined tree allreduce on other sizes: early pieces meet later ones on a port, or run
///   ahead; either way, within 6.5% (-5.6% to +6.3% with 2 to 32 chunks on a star);
/// - halving-doubling's fold on non-powers of two: ranks outside the fold send into folding
///   ranks while the fold arrives, so the simulation is slower (by 13-24% on a star).

#include <cstdint>
#include <span>

#include "nest/coll/program.h"
#include "nest/core/units.h"
#include "nest/topo/router.h"

namespace nest::coll {

/// The closed-form time of a schedule and its parts.
struct ClosedForm {
  /// total: base_latency_seconds + latency_seconds + bandwidth_seconds
  double seconds = 0;
  double base_latency_seconds = 0;  ///< a collective model's per-collective latency (or 0)
  double latency_seconds = 0;       ///< sum over steps of alpha_k
  double bandwidth_seconds = 0;     ///< sum over steps of L_k / beta_k
  std::uint32_t steps = 0;          ///< steps with at least one transfer
  Time max_alpha;                   ///< largest per-step latency
  /// Smallest beta_k (the rate of the route or port that set a step's bandwidth term) over the
  /// steps that move bytes; zero when none does.
  Bandwidth bottleneck;
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
