#pragma once
/// \file
/// The network as the flow-level simulator sees it: a `CommCost` whose answers come from
/// `coll::CollectiveOracle` (every group of a layout simulated together, memoized exactly and by
/// structure). Under the topology's collective model (nest/topo/collective_model.h) every
/// answer is calibrated and each group's collective uses the fastest algorithm of NCCL's
/// tuner's candidates on its actual devices (ring, rail rings, tree, NVLink SHARP,
/// hierarchical, ...; `coll::tuner_candidates`), unless an option fixes it; on the ideal
/// network (no model, or `ideal`) the defaults are today's: ring for allreduce, all-gather and
/// reduce-scatter, pairwise for all-to-all; on a `kind: dimensions` topology (ASTRA-sim's
/// networks) the first three run hierarchical with each dimension's algorithm, as `nest
/// collective` does (`coll::default_algorithm`), ring for a group its domains do not split
/// evenly. Stage-to-stage transfers are point-to-point flows
/// between the paired devices, all at once.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/coll/oracle.h"
#include "nest/placer/comm_cost.h"
#include "nest/topo/topology.h"

namespace nest::placer {

/// How the oracle is asked.
struct OracleOptions {
  /// The algorithm of each operation; none: the tuner's choice per group under a collective
  /// model, coll's default (ring; pairwise for all-to-all; hierarchical on a `kind:
  /// dimensions` topology) on the ideal network. A fixed
  /// algorithm runs as `resolve` makes it (chunks and channels chosen under the model).
  std::optional<coll::Algorithm> allreduce;
  std::optional<coll::Algorithm> all_gather;
  std::optional<coll::Algorithm> reduce_scatter;
  std::optional<coll::Algorithm> all_to_all;
  /// Ignore the topology's collective model: line rates and the topology's latencies, fixed
  /// algorithms (what `nest collective --ideal` prices).
  bool ideal = false;
  /// Price every size of a (operation, layout) on the line through the simulated times at
  /// 64 MiB and 256 MiB (two simulations per layout instead of one per size; off by default:
  /// the search rarely asks one layout for more than two sizes). In the flow model a
  /// collective on a fixed layout is affine in its size when all its flows scale together (rates
  /// depend only on which flows are active); the test OracleCommCost.InterpolationErrorIsBounded
  /// measures the error on the rail-optimized cluster.
  bool interpolate_sizes = false;
  std::uint64_t seed = 0;  ///< ECMP seed
  /// Threads of the oracle's exact queries (`coll::OracleSettings::threads`): the same answers.
  int threads = 1;
};

/// One group layout's collective as the oracle priced it.
struct GroupChoice {
  workload::CollectiveOp op = workload::CollectiveOp::kAllReduce;
  Bytes size;
  GroupLayout layout;
  coll::Algorithm algorithm = coll::Algorithm::kRing;
  topo::Protocol protocol = topo::Protocol::kSimple;  ///< Simple on the ideal network
  int channels = 1;                                   ///< rings of a ring
  bool tuned = false;                                 ///< chosen by the tuner, not fixed
  Time time;                                          ///< the layout's time
};

class OracleCommCost final : public CommCost {
 public:
  /// `topology` must outlive this object.
  explicit OracleCommCost(const topo::Topology& topology, OracleOptions options = {});

  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  /// The algorithm `collective(op, size, like)` chose (tuned or fixed), run on every group of
  /// `layout` (its protocol and channels resolved for `layout`'s first group, as `collective`
  /// resolves them). Not recorded in `choices()`.
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like) override;
  /// Whether no link carries flows of two parts' groups for any algorithm `collective_like` may
  /// run them with: each part's fixed algorithm, else every candidate of the tuner for each
  /// part's first group (`CollectiveOracle::parts_apart`). Routing only; memoized. False with
  /// `interpolate_sizes` (the choice is made at other sizes) and when a candidate refuses a group.
  bool groups_apart(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                    int per_part) override;
  /// max(`collective_bound`, the oracle's event-free bound of what `collective_like` runs:
  /// `like`'s algorithm on every group of `layout`; `like` itself is priced exactly, as
  /// `collective_like` prices it). With `interpolate_sizes`, `collective_bound` only.
  Time collective_like_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                             const GroupLayout& like) override;
  /// max(the flat injection bound, the domain-exit bound, the device-exit bound). Domain exit:
  /// for each innermost domain (with the switches that serve only its devices), the bytes the
  /// collective must move out of it (or into it) over the capacity of the links that leave
  /// (enter) it. Device exit, where routes never pass through another device (rail-optimized
  /// clusters by construction, or devices with a single link): the bytes one device sends out
  /// of (receives into) its domain over its own links that leave (enter) it. Ring algorithms send
  /// 2(n−1)/n·S (allreduce) or (n−1)/n·S (all-gather, reduce-scatter) along each ring hop,
  /// pairwise all-to-all S/n to every other member; other algorithms get the injection bound
  /// only. O(devices of the layout) the first time, allocation-free; memoized by its arguments.
  Time collective_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  /// max(the flat injection bound, the device-exit bound of every pair, and with one group the
  /// domain-exit bound): `transfer` prices several groups at a class's mean wait, which the
  /// exits the groups share do not bound. Memoized by its arguments, as `collective_bound`.
  Time transfer_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  /// max(`collective_bound`, the oracle's event-free bound of what `collective` asks it:
  /// `CollectiveOracle::lower_bound` for a fixed algorithm, `fastest_lower_bound` for the
  /// tuner's choice), so the answer itself where the oracle knows it without events (memoized,
  /// or contention-free). With `interpolate_sizes`, `collective_bound` only.
  Time collective_pass_bound(workload::CollectiveOp op, Bytes size,
                             const GroupLayout& layout) override;
  /// What `collective` asks of the oracle, asked within `within`
  /// (`CollectiveOracle::collective_within` / `fastest_within`: no simulation runs past it).
  /// Not recorded in `choices()`. With `interpolate_sizes`, `CommCost`'s default.
  std::optional<Time> collective_within(workload::CollectiveOp op, Bytes size,
                                        const GroupLayout& layout, Time within) override;
  bool placement_independent() const noexcept override { return false; }
  Bandwidth injection_bound() const noexcept override { return injection_bound_; }
  /// The topology's innermost domain (an NVLink node on rail-optimized clusters).
  int scale_up_size() const noexcept override;
  std::string describe() const override;

  std::uint64_t simulated_events() const noexcept override { return oracle_.stats().events; }
  /// The oracle's counters (queries, memo hits, simulations).
  [[nodiscard]] const coll::OracleStats& stats() const noexcept { return oracle_.stats(); }
  /// What `collective(op, size, layout)` chose and took, if it was asked (interpolated sizes:
  /// the choice at the larger of the two sizes priced). O(1).
  [[nodiscard]] std::optional<GroupChoice> choice(workload::CollectiveOp op, Bytes size,
                                                  const GroupLayout& layout) const;
  /// Every (operation, size, layout) asked so far with its choice, in the order first asked.
  [[nodiscard]] std::vector<GroupChoice> choices() const;
  /// The collective oracle behind the prices, for a caller on this thread that asks the same
  /// questions (the replay's tuner, `replay::replay_plan`): what it holds answers them.
  [[nodiscard]] coll::CollectiveOracle& collective_oracle() noexcept { return oracle_; }
  /// True when the topology's collective model calibrates the answers.
  [[nodiscard]] bool calibrated() const noexcept { return oracle_.calibrated(); }
  [[nodiscard]] const topo::Topology& topology() const noexcept { return topology_; }

 private:
  [[nodiscard]] Time exact_collective(workload::CollectiveOp op, const coll::CollectiveSpec& spec,
                                      const GroupLayout& layout);
  // The spec `collective` asks for `op` of `size`: coll's default algorithm (the tuner's choice
  // or the fixed one replaces it), chunks and channels left to `resolve` under a model.
  [[nodiscard]] coll::CollectiveSpec spec_of(workload::CollectiveOp op, Bytes size) const;
  // The spec `collective_like` runs on every group: what `collective(op, size, like)` chose
  // (asked first when it was not).
  [[nodiscard]] coll::CollectiveSpec like_spec(workload::CollectiveOp op, Bytes size,
                                               const GroupLayout& like);
  // The operation's fixed algorithm, or none (the tuner's choice): the option's, else on the
  // ideal network coll::default_algorithm for `groups` (hierarchical on a `kind: dimensions`
  // topology when every group has hierarchy levels; no groups: any that has).
  [[nodiscard]] std::optional<coll::Algorithm> fixed_algorithm(
      workload::CollectiveOp op, std::span<const std::vector<topo::DeviceId>> groups = {}) const;
  [[nodiscard]] Time exact_transfer(Bytes size, const GroupLayout& from, const GroupLayout& to);

  // The bound under a collective model (any algorithm, any channel count).
  [[nodiscard]] Time calibrated_bound(workload::CollectiveOp op, Bytes size,
                                      const GroupLayout& layout);
  // `collective_bound` and `transfer_bound` computed (not memoized).
  [[nodiscard]] Time layout_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout);
  [[nodiscard]] Time pairs_bound(Bytes size, const GroupLayout& from, const GroupLayout& to);
  // Bytes crossing domain boundaries (out_ and in_ over the domains in dirty_list_) to a time
  // bound; clears those buffers for the next query.
  [[nodiscard]] Time exit_bound();
  // out_[x] += bytes (in_[x] += bytes), recording x as touched.
  void add_out(std::uint32_t x, double bytes);
  void add_in(std::uint32_t x, double bytes);
  // crossing_[k] = k additions of `step` from zero, k <= n.
  void fill_crossing(double step, int n);
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
  // Buffers of the bounds, owned so that a query allocates nothing (sized per domain once; all
  // zero between queries): bytes out of and into each domain, whether a query touched it (and
  // the list of those), one group's members per domain, pairwise pairs per domain, the
  // domains one group touches, the all-to-all crossing sums.
  std::vector<double> out_;
  std::vector<double> in_;
  std::vector<std::uint8_t> dirty_;
  std::vector<std::uint32_t> dirty_list_;
  std::vector<int> members_;
  std::vector<std::uint64_t> pair_count_;
  std::vector<std::uint32_t> group_touched_;
  std::vector<double> crossing_;
  struct ChoiceKey {
    int op = 0;
    std::int64_t size = 0;
    GroupLayout layout;
    friend bool operator==(const ChoiceKey&, const ChoiceKey&) = default;
  };
  struct ChoiceKeyHash {
    std::size_t operator()(const ChoiceKey& k) const noexcept;
  };
  std::unordered_map<ChoiceKey, GroupChoice, ChoiceKeyHash> choices_;
  std::vector<ChoiceKey> asked_;  // the keys of choices_ in the order first asked
  // Answers by layout, so that a repeated question costs a hash of a few words instead of the
  // oracle's key of every device: event-free bounds (`collective_pass_bound`), joint syncs
  // (`collective_like`, the second layout in `b`) and transfers (from, to). Exact answers
  // of `collective` are in `choices_`.
  std::unordered_map<ChoiceKey, Time, ChoiceKeyHash> pass_bounds_;
  std::unordered_map<LayoutKey, Time, LayoutKey::Hash> joint_;
  std::unordered_map<LayoutKey, Time, LayoutKey::Hash> joint_bounds_;
  std::unordered_map<LayoutKey, Time, LayoutKey::Hash> transfers_;
  // `groups_apart`, by (op, size, layout) and the groups per part.
  struct ApartKey {
    ChoiceKey choice;
    int per_part = 0;
    friend bool operator==(const ApartKey&, const ApartKey&) = default;
  };
  struct ApartKeyHash {
    std::size_t operator()(const ApartKey& k) const noexcept;
  };
  std::unordered_map<ApartKey, bool, ApartKeyHash> apart_;
  // `collective_bound` (kind 0) and `transfer_bound` (kind 1, `b` the destination layout) by
  // their arguments: arithmetic and O(devices), and asked again by every table and plan bound
  // that meets the layout. Emptied past kBoundsKept entries.
  std::unordered_map<LayoutKey, Time, LayoutKey::Hash> bounds_;
};

/// The flat network that stands for `topology` in the topology-agnostic baseline: every device
/// injects its share of the bisection bandwidth (bisection / (N/2)) and every message pays the
/// latency of the route from device 0 to the last device. `scale_up_size` serves the manual
/// baseline only. O(bisection computation).
[[nodiscard]] FlatCommCost flat_network_for(const topo::Topology& topology, int scale_up_size);

}  // namespace nest::placer
