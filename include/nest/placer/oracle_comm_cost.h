#pragma once
/// \file
/// The network as the flow-level simulator sees it: a `CommCost` whose answers come from
/// `coll::CollectiveOracle` (every group of a layout simulated together, memoized exactly and by
/// structure). Collectives use coll's default algorithm of their operation (ring for
/// allreduce, all-gather and reduce-scatter; pairwise for all-to-all) unless told otherwise;
/// stage-to-stage transfers are point-to-point flows between the paired devices, all at once.

#include <cstdint>
#include <string>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/coll/oracle.h"
#include "nest/placer/comm_cost.h"
#include "nest/topo/topology.h"

namespace nest::placer {

/// How the oracle is asked.
struct OracleOptions {
  coll::Algorithm allreduce = coll::Algorithm::kRing;
  coll::Algorithm all_gather = coll::Algorithm::kRing;
  coll::Algorithm reduce_scatter = coll::Algorithm::kRing;
  coll::Algorithm all_to_all = coll::Algorithm::kPairwise;
  /// Price every size of a (operation, layout) on the line through the simulated times at
  /// 64 MiB and 256 MiB (two simulations per layout instead of one per size; off by default:
  /// the search rarely asks one layout for more than two sizes). In the flow model a
  /// collective on a fixed layout is affine in its size when all its flows scale together (rates
  /// depend only on which flows are active); the test OracleCommCost.InterpolationErrorIsBounded
  /// measures the error on the rail-optimized cluster.
  bool interpolate_sizes = false;
  std::uint64_t seed = 0;  ///< ECMP seed
};

class OracleCommCost final : public CommCost {
 public:
  /// `topology` must outlive this object.
  explicit OracleCommCost(const topo::Topology& topology, OracleOptions options = {});

  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  /// max(the flat injection bound, the domain-exit bound, the device-exit bound). Domain exit:
  /// for each innermost domain (with the switches that serve only its devices), the bytes the
  /// collective must move out of it (or into it) over the capacity of the links that leave
  /// (enter) it. Device exit, where routes never pass through another device (rail-optimized
  /// clusters by construction, or devices with a single link): the bytes one device sends out
  /// of (receives into) its domain over its own links that leave (enter) it. Ring algorithms send
  /// 2(n−1)/n·S (allreduce) or (n−1)/n·S (all-gather, reduce-scatter) along each ring hop,
  /// pairwise all-to-all S/n to every other member; other algorithms get the injection bound
  /// only. O(devices of the layout).
  Time collective_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  Time transfer_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  bool placement_independent() const noexcept override { return false; }
  Bandwidth injection_bound() const noexcept override { return injection_bound_; }
  /// The topology's innermost domain (an NVLink node on rail-optimized clusters).
  int scale_up_size() const noexcept override;
  std::string describe() const override;

  /// The oracle's counters (queries, memo hits, simulations).
  [[nodiscard]] const coll::OracleStats& stats() const noexcept { return oracle_.stats(); }
  [[nodiscard]] const topo::Topology& topology() const noexcept { return topology_; }

 private:
  [[nodiscard]] Time exact_collective(const coll::CollectiveSpec& spec, const GroupLayout& layout);
  [[nodiscard]] Time exact_transfer(Bytes size, const GroupLayout& from, const GroupLayout& to);

  // Bytes crossing domain boundaries (per domain, out and in) to a time bound.
  [[nodiscard]] Time exit_bound(const std::vector<double>& out,
                                const std::vector<double>& in) const;
  // Seconds for `bytes_out` to leave device `a` (`bytes_in` to enter device `b`) through its own
  // exit links; 0 when the device bound does not apply.
  [[nodiscard]] double device_seconds(topo::DeviceId a, topo::DeviceId b, double bytes_out,
                                      double bytes_in) const;

  const topo::Topology& topology_;
  coll::CollectiveOracle oracle_;
  OracleOptions options_;
  Bandwidth injection_bound_;
  int domain_size_ = 0;             // innermost domain; 0 when the topology has one domain
  std::vector<double> exit_out_;    // per domain: capacity of the links leaving it, B/s
  std::vector<double> exit_in_;     // per domain: capacity of the links entering it, B/s
  std::vector<double> device_out_;  // per device: its links leaving its domain, B/s (or empty)
  std::vector<double> device_in_;   // per device: its links entering from outside, B/s
};

/// The flat network that stands for `topology` in the topology-agnostic baseline: every device
/// injects its share of the bisection bandwidth (bisection / (N/2)) and every message pays the
/// latency of the route from device 0 to the last device. `scale_up_size` serves the manual
/// baseline only. O(bisection computation).
[[nodiscard]] FlatCommCost flat_network_for(const topo::Topology& topology, int scale_up_size);

}  // namespace nest::placer
