#pragma once
/// \file
/// What the placer asks of the network, behind one small interface (`CommCost`): the time of an
/// intra-layer collective on a set of device groups that run it at the same time, and the time of
/// a stage-to-stage transfer between two concrete device sets. Three implementations: the zero
/// network of the nest-artifact rules, a flat alpha-beta network (the topology-agnostic
/// baseline) and the `CollectiveOracle`-backed one (nest/placer/oracle_comm_cost.h).
///
/// Device groups are described arithmetically (`GroupLayout`), as every placement order lays
/// them out: a layout is cheap to build, compare and hash, and expands to device lists on demand.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/topo/topology.h"
#include "nest/workload/layer_profile.h"

namespace nest::placer {

/// One arithmetic axis of a layout: `count` positions `stride` devices apart.
struct LayoutAxis {
  int count = 1;
  std::uint32_t stride = 0;
  friend constexpr bool operator==(const LayoutAxis&, const LayoutAxis&) = default;
};

/// Equal-sized device groups laid out arithmetically. Group g, with digits (g0, g1, g2) of g in
/// the mixed radix (groups[0].count, groups[1].count, groups[2].count), digit 0 fastest, has the
/// members `base + g0·groups[0].stride + g1·groups[1].stride + g2·groups[2].stride +
/// m·member.stride` for m < member.count. Invariant: the devices of all groups are distinct.
struct GroupLayout {
  topo::DeviceId base = 0;
  LayoutAxis member{1, 1};
  std::array<LayoutAxis, 3> groups{};

  /// Devices per group.
  [[nodiscard]] int group_size() const noexcept { return member.count; }
  /// Number of groups (product of the group axes' counts).
  [[nodiscard]] int group_count() const noexcept {
    return groups[0].count * groups[1].count * groups[2].count;
  }
  /// Device `member` of group `group` (both 0-based, in range). O(1).
  [[nodiscard]] topo::DeviceId device(int group, int member_index) const noexcept;
  /// Every group's device list, group by group. O(groups · size).
  [[nodiscard]] std::vector<std::vector<topo::DeviceId>> expand() const;
  /// One past the largest device id the layout uses.
  [[nodiscard]] topo::DeviceId end() const noexcept;
  /// A 64-bit digest of the fields, for memo tables.
  [[nodiscard]] std::uint64_t hash() const noexcept;

  friend constexpr bool operator==(const GroupLayout&, const GroupLayout&) = default;
};

/// A key of the placer's memos of network answers: what is asked (`kind`, the memo's own
/// numbering), the operation, the size and up to two layouts, with its hash computed once
/// (`of`). libstdc++ keeps no hash codes beside the nodes of a table whose hasher cannot throw,
/// so a table keyed by the layouts themselves would hash them again for every node its lookups
/// walk past and for every node at each rehash.
struct LayoutKey {
  std::uint64_t hash = 0;  ///< of the fields below (compared first)
  int kind = 0;
  int op = 0;
  std::int64_t size = 0;
  GroupLayout a;
  GroupLayout b;  ///< the second layout, or the default one

  [[nodiscard]] static LayoutKey of(int kind, int op, std::int64_t size, const GroupLayout& a,
                                    const GroupLayout& b = {}) noexcept;
  friend bool operator==(const LayoutKey&, const LayoutKey&) = default;
  /// The hasher of a table keyed by `LayoutKey`.
  struct Hash {
    std::size_t operator()(const LayoutKey& k) const noexcept { return k.hash; }
  };
};

/// Network costs as the placer sees them. Implementations may memoize, so the query methods are
/// not const; one instance must not be shared between threads.
class CommCost {
 public:
  CommCost() = default;
  CommCost(const CommCost&) = delete;
  CommCost& operator=(const CommCost&) = delete;
  virtual ~CommCost() = default;

  /// Time of `op` with message `size` (nccl-tests convention, see `workload::LayerCollective`)
  /// when every group of `layout` runs it at the same time. Zero for groups of one device or a
  /// zero size.
  [[nodiscard]] virtual Time collective(workload::CollectiveOp op, Bytes size,
                                        const GroupLayout& layout) = 0;

  /// Time until every device `from.device(g, m)` has sent `size` bytes to `to.device(g, m)`, all
  /// pairs at once. `from` and `to` have the same shape.
  [[nodiscard]] virtual Time transfer(Bytes size, const GroupLayout& from,
                                      const GroupLayout& to) = 0;

  /// `collective(op, size, layout)`, every group run with the algorithm this network chooses
  /// for `like` alone (a stage's data-parallel groups priced together with other stages', each
  /// running what it runs alone, as the replay runs them). Default: `collective(op, size,
  /// layout)`, for networks whose choice does not depend on the groups.
  [[nodiscard]] virtual Time collective_like(workload::CollectiveOp op, Bytes size,
                                             const GroupLayout& layout, const GroupLayout& like) {
    (void)like;
    return collective(op, size, layout);
  }

  /// A lower bound of `collective_like(op, size, layout, like)` as `collective_pass_bound` is of
  /// `collective`. Default: `collective_bound(op, size, layout)` (every algorithm's bound).
  [[nodiscard]] virtual Time collective_like_bound(workload::CollectiveOp op, Bytes size,
                                                   const GroupLayout& layout,
                                                   const GroupLayout& like) {
    (void)like;
    return collective_bound(op, size, layout);
  }

  /// True when no link can carry flows of two groups of `layout` in different parts (groups g
  /// and h in the same part when g / `per_part` == h / `per_part`) running `op` of `size`, with
  /// whatever algorithm `collective_like` may run them (the one chosen for any part's groups
  /// alone): a joint sync of such parts is each part's alone (`detail::joint_sync_factor` then
  /// prices nothing). Default: false (not known).
  [[nodiscard]] virtual bool groups_apart(workload::CollectiveOp op, Bytes size,
                                          const GroupLayout& layout, int per_part) {
    (void)op;
    (void)size;
    (void)layout;
    (void)per_part;
    return false;
  }

  /// True when no cost depends on which devices run (zero and flat networks): every placement
  /// order and every stage position then cost the same, and the search prices one of them.
  [[nodiscard]] virtual bool placement_independent() const noexcept = 0;

  /// A lower bound of `collective(op, size, layout)`, cheap to compute (no simulation); the
  /// search prunes with it. Default: the flat network at `injection_bound()` without latency
  /// (zero when that is unknown).
  [[nodiscard]] virtual Time collective_bound(workload::CollectiveOp op, Bytes size,
                                              const GroupLayout& layout);
  /// A lower bound of `transfer(size, from, to)`, as `collective_bound`.
  [[nodiscard]] virtual Time transfer_bound(Bytes size, const GroupLayout& from,
                                            const GroupLayout& to);
  /// `collective(op, size, layout)` when it is at most `within`, else nullopt; a network that
  /// simulates stops there (the search asks so when a later answer would rule a plan out).
  /// Default: `collective` compared with `within`.
  [[nodiscard]] virtual std::optional<Time> collective_within(workload::CollectiveOp op, Bytes size,
                                                              const GroupLayout& layout,
                                                              Time within) {
    const Time t = collective(op, size, layout);
    return t <= within ? std::optional<Time>(t) : std::nullopt;
  }
  /// A lower bound of `collective(op, size, layout)` at least as high as `collective_bound`,
  /// that may cost a pass over the collective's transfers but no event simulation; the search
  /// tries it before it prices a plan in full. Default: `collective_bound`.
  [[nodiscard]] virtual Time collective_pass_bound(workload::CollectiveOp op, Bytes size,
                                                   const GroupLayout& layout) {
    return collective_bound(op, size, layout);
  }

  /// True when every cost is zero (the nest-artifact rules): the placer then skips pricing.
  [[nodiscard]] virtual bool zero() const noexcept { return false; }

  /// A point of the line on which the cost model prices ZeRO-3 weight gathers (an all-gather of
  /// `size` on `layout`, asked at two sizes and read at a stage's own bytes). Default:
  /// `collective`. The search's bounding networks answer both points with the layout bound, so
  /// that their line keeps its proportion to the bytes (see `placer::plan_lower_bound`).
  [[nodiscard]] virtual Time gather_point(Bytes size, const GroupLayout& layout) {
    return collective(workload::CollectiveOp::kAllGather, size, layout);
  }

  /// A rate that no device exceeds, sending or receiving (the largest sum of a device's link
  /// rates); zero when unknown. With it, a flat network of this rate and no latency prices every
  /// collective (ring or pairwise) and transfer at most as high as this network does: each
  /// device must move its share of the bytes through its own links. The search bounds with it.
  [[nodiscard]] virtual Bandwidth injection_bound() const noexcept { return {}; }

  /// Devices per scale-up domain (an NVLink node), used by the `manual` baseline.
  [[nodiscard]] virtual int scale_up_size() const noexcept = 0;

  /// Events the network's event simulations processed so far (0 for networks that do not
  /// simulate): the work of pricing.
  [[nodiscard]] virtual std::uint64_t simulated_events() const noexcept { return 0; }

  /// A short description for reports ("zero network", "flat 50 GB/s, 5.00 us", ...).
  [[nodiscard]] virtual std::string describe() const = 0;
};

/// A `CommCost` that asks `inner` for everything: decorators (the anneal's approximate network,
/// the plan's collective recorder) derive from it and override what they change. The search's
/// sharper questions (`collective_within`, `collective_pass_bound`, `collective_like_bound`)
/// are not forwarded: their defaults ask this object's own answers, which a decorator changes.
class ForwardingCommCost : public CommCost {
 public:
  /// `inner` must outlive this object.
  explicit ForwardingCommCost(CommCost& inner) noexcept : inner_(inner) {}
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    return inner_.collective(op, size, layout);
  }
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override {
    return inner_.transfer(size, from, to);
  }
  Time collective_like(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                       const GroupLayout& like) override {
    return inner_.collective_like(op, size, layout, like);
  }
  bool groups_apart(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                    int per_part) override {
    return inner_.groups_apart(op, size, layout, per_part);
  }
  bool placement_independent() const noexcept override { return inner_.placement_independent(); }
  Time collective_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override {
    return inner_.collective_bound(op, size, layout);
  }
  Time transfer_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) override {
    return inner_.transfer_bound(size, from, to);
  }
  bool zero() const noexcept override { return inner_.zero(); }
  Bandwidth injection_bound() const noexcept override { return inner_.injection_bound(); }
  int scale_up_size() const noexcept override { return inner_.scale_up_size(); }
  std::string describe() const override { return inner_.describe(); }
  std::uint64_t simulated_events() const noexcept override { return inner_.simulated_events(); }

 protected:
  [[nodiscard]] CommCost& inner() const noexcept { return inner_; }

 private:
  CommCost& inner_;
};

/// The nest-artifact rule: every network term is zero.
class ZeroCommCost final : public CommCost {
 public:
  /// `scale_up_size` only serves the manual baseline.
  explicit ZeroCommCost(int scale_up_size = 8) : scale_up_size_(scale_up_size) {}
  Time collective(workload::CollectiveOp, Bytes, const GroupLayout&) override {
    return Time::zero();
  }
  Time transfer(Bytes, const GroupLayout&, const GroupLayout&) override { return Time::zero(); }
  bool placement_independent() const noexcept override { return true; }
  bool zero() const noexcept override { return true; }
  int scale_up_size() const noexcept override { return scale_up_size_; }
  std::string describe() const override { return "zero network"; }

 private:
  int scale_up_size_;
};

/// A topology-agnostic network: every device injects at `bandwidth` and every message pays
/// `latency` per algorithm step; groups never contend. Closed forms (n devices, S bytes, a
/// latency, B bandwidth): ring allreduce 2(n−1)·a + 2(n−1)/n·S/B; all-gather, reduce-scatter and
/// pairwise all-to-all (n−1)·a + (n−1)/n·S/B; a transfer a + S/B.
class FlatCommCost final : public CommCost {
 public:
  /// `bandwidth` must be > 0.
  FlatCommCost(Bandwidth bandwidth, Time latency, int scale_up_size = 8);
  Time collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) override;
  Time transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) override;
  bool placement_independent() const noexcept override { return true; }
  Bandwidth injection_bound() const noexcept override { return bandwidth_; }
  int scale_up_size() const noexcept override { return scale_up_size_; }
  std::string describe() const override;

  [[nodiscard]] Bandwidth bandwidth() const noexcept { return bandwidth_; }
  [[nodiscard]] Time latency() const noexcept { return latency_; }

 private:
  Bandwidth bandwidth_;
  Time latency_;
  int scale_up_size_;
};

}  // namespace nest::placer
