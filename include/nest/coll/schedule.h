#pragma once
/// \file
/// A collective lowered to point-to-point transfers between ranks (positions 0..n-1 in the
/// group) with per-rank dependencies, independent of which devices the ranks are.
///
/// Dependency rule (no global barrier): each transfer has a step and a channel. A rank handles
/// its steps in order, per channel: its sends of step s on channel c start once (1) all its
/// sends on c of its previous sending step on c have arrived and (2) everything it receives on
/// c in steps before s has arrived. Only what a rank itself sent and received gates it, so a
/// fast rank runs ahead of a slow one elsewhere in the group. Channels are independent (e.g. the
/// two trees of the double binary tree). Sends are eager: a receiver never holds a sender back
/// (no rendezvous), so a rank with nothing to wait for sends at once, even to a peer that is
/// still busy (halving-doubling's ranks outside the fold of a non-power-of-two group do).
///
/// The rule is enforced through *gates*: one per (rank, channel, sending step), holding the
/// rank's sends of that step and a count of the transfers it waits for. Every transfer feeds at
/// most two gates (its sender's and its receiver's next sending step on its channel), so memory
/// and dependency work are linear in the number of transfers.
///
/// Bytes are integers: a size split into k parts gives the first (size mod k) parts one byte
/// more (`split_bytes`), so every rank's share is deterministic and the parts sum exactly.

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/coll/program.h"
#include "nest/core/units.h"

namespace nest::coll {

/// Part `index` of `size` split into `parts` near-equal integer parts (the first size % parts
/// parts are one byte larger). `parts` > 0, 0 <= index < parts.
[[nodiscard]] constexpr Bytes split_bytes(Bytes size, std::int64_t parts,
                                          std::int64_t index) noexcept {
  return Bytes(size.count() / parts + (index < size.count() % parts ? 1 : 0));
}

/// A gate: the sends of one rank at one step on one channel, released together.
struct Gate {
  std::uint32_t first = 0;    ///< first transfer index of the gate's sends
  std::uint32_t count = 0;    ///< number of sends (contiguous from `first`)
  std::uint32_t waits = 0;    ///< transfers that must arrive before the gate opens
  std::uint32_t rank = 0;     ///< the sending rank
  std::uint32_t step = 0;     ///< the step of its sends
  std::uint16_t channel = 0;  ///< the channel of its sends
};

/// Marks "no gate" in the schedule's compact successor table.
inline constexpr std::uint32_t kNoGate = 0xffffffffU;

/// An immutable lowered collective. Transfers are sorted by (step, channel, src, dst); build it
/// with `lower` or from any list of transfers. Memory: about 64 bytes per transfer while
/// building, 36 bytes per transfer plus 24 per gate after (24 per transfer for one that shares
/// its dependencies, see below).
class Schedule final : public Program {
 public:
  /// A schedule of `ranks` ranks over `transfers` (any order; each src != dst, both < ranks).
  /// Builds the gates. O(T) for T transfers (bucketed by step), plus sorting the steps whose
  /// transfers were not given in (channel, src, dst) order. Throws `Error` (internal) on a bad
  /// transfer.
  Schedule(int ranks, std::vector<Transfer> transfers);

  /// The same schedule as `Schedule(ranks, transfers)`, transfer for transfer and gate for gate,
  /// in one pass without sorting when `like` has `ranks` ranks and was built from transfers
  /// with the same (src, dst, step, channel) in the same order as `transfers` (their bytes may
  /// differ, e.g. one collective lowered at two sizes): then it shares `like`'s gates and
  /// successors (`shares_dependencies_with`). Whether they match is checked transfer by
  /// transfer; when they do not, it is built as above.
  ///
  /// Why it is the same: the constructor above orders, groups and links transfers by their
  /// (step, channel, src, dst) alone (a stable bucketing by step, then `std::sort` of each step
  /// that is not in order, whose moves depend only on its comparisons), so transfers given with
  /// the same such keys in the same order land in the same places and make the same gates and
  /// successors; only the bytes and their total depend on the bytes.
  Schedule(int ranks, std::vector<Transfer> transfers, const Schedule& like);

  Schedule(const Schedule&) = default;
  Schedule& operator=(const Schedule&) = default;
  /// A moved-from schedule has no transfers and no gates (its dependencies are not null).
  Schedule(Schedule&& other) noexcept;
  Schedule& operator=(Schedule&& other) noexcept;
  ~Schedule() override = default;

  /// Whether this schedule and `other` share their gates and successors (one was built `like`
  /// the other, or both like a third).
  [[nodiscard]] bool shares_dependencies_with(const Schedule& other) const noexcept {
    return deps_ == other.deps_;
  }

  /// Number of ranks n.
  [[nodiscard]] int ranks() const noexcept override { return ranks_; }
  /// All transfers, sorted by (step, channel, src, dst).
  [[nodiscard]] std::span<const Transfer> transfers() const noexcept { return transfers_; }
  /// All gates, sorted by (step, channel, rank); a gate's sends are contiguous transfers.
  [[nodiscard]] std::span<const Gate> gates() const noexcept { return deps_->gates; }
  /// Number of distinct steps (1 + the largest step; 0 when there are no transfers).
  [[nodiscard]] std::uint32_t steps() const noexcept override { return deps_->steps; }
  /// Total bytes of all transfers.
  [[nodiscard]] Bytes total_bytes() const noexcept { return total_bytes_; }

  // Program: gate ids are indices into gates(), transfer ids indices into transfers().
  [[nodiscard]] std::uint64_t transfer_count() const noexcept override { return transfers_.size(); }
  [[nodiscard]] std::uint64_t dense_gates() const noexcept override { return deps_->gates.size(); }
  void initial_gates(std::vector<GateId>& out) const override;
  [[nodiscard]] std::uint32_t waits(GateId gate) const override { return deps_->gates[gate].waits; }
  void sends(GateId gate, std::vector<TransferId>& out) const override;
  [[nodiscard]] Transfer transfer(TransferId id) const override { return transfers_[id]; }
  void transfers(TransferId first, std::span<Transfer> out) const override {
    std::copy_n(transfers_.begin() + static_cast<std::ptrdiff_t>(first), out.size(), out.begin());
  }
  /// For transfer `id`: the gates its arrival counts towards (sender's, receiver's), or
  /// kNoGateId.
  [[nodiscard]] std::array<GateId, 2> successors(TransferId id) const override {
    const std::uint32_t a = deps_->successors[2 * id];
    const std::uint32_t b = deps_->successors[2 * id + 1];
    return {a == kNoGate ? kNoGateId : a, b == kNoGate ? kNoGateId : b};
  }
  void for_each_transfer(const std::function<void(const Transfer&)>& visit) const override;

 private:
  // What depends only on the transfers' (step, channel, src, dst) in the order given.
  struct Dependencies {
    std::vector<Gate> gates;
    std::vector<std::uint32_t> successors;  // 2 per transfer
    std::vector<std::uint32_t> order;       // transfer i was given at position order[i]
    std::uint32_t steps = 0;
  };
  // Orders `given` into `transfers_` and builds the dependencies.
  void build(std::vector<Transfer> given);
  // A moved-from schedule's: no gates, successors or steps (immutable, shared).
  static const std::shared_ptr<const Dependencies>& empty_dependencies() noexcept;

  int ranks_;
  std::vector<Transfer> transfers_;
  std::shared_ptr<const Dependencies> deps_;
  Bytes total_bytes_;
};

/// Lowers `spec` over a group of `ranks` ranks. `spec` must pass `validate(spec, ranks)`;
/// hierarchical and torus specs must have their `levels` filled in. A group of one rank gives
/// an empty schedule. Transfers per algorithm (n ranks, c chunks):
/// ring allreduce 2(n-1)·n·c, ring reduce-scatter/all-gather (n-1)·n·c; tree allreduce
/// 4(n-1)·c ((n-1) edges per tree, up and down, c pieces); halving-doubling allreduce
/// 2·p·log2(p) + 2(n-p) with p = 2^floor(log2 n) (the n-p extra ranks fold into partners
/// first and get the result back last); direct n(n-1) per phase; pairwise n(n-1); ring and
/// tree broadcast (n-1)·c; direct broadcast n-1; send 1; hierarchical and torus the sum of
/// their rings; ring reduce (n-1)·c (the chain 1 -> 2 -> ... -> n-1 -> 0); direct reduce, gather
/// and scatter n-1; direct sendrecv n; nvls n (one step: rank i -> i+1, S + S/n bytes through
/// the switch); a ring of k channels k times a ring's. Time and memory linear in the transfers.
/// Throws `Error` (input) when the schedule would exceed 2^32 - 1 transfers.
/// A ring with `forward_on_arrival` has no stored form (its gates wait for one transfer, which a
/// `Schedule`'s rule does not express): throws `Error` (internal); `lower_program` gives it.
/// With `like` (a schedule lowered from an alike spec, e.g. the same at another size), the
/// result may share its dependencies (`Schedule(ranks, transfers, like)`): the same schedule,
/// built faster.
[[nodiscard]] Schedule lower(const CollectiveSpec& spec, int ranks, const Schedule* like = nullptr);

/// The ring family (ring, hierarchical and torus allreduce, reduce-scatter and all-gather; rings
/// of several channels) as an implicit program: transfers and gates are computed from their ids, so
/// memory is O(ranks) whatever the group size, at the cost of a hash-map counter per pending gate
/// in an execution. Gives the same transfers, gates and dependencies as `lower` (gate and transfer
/// ids differ). `spec` must be a valid ring-family spec with levels filled in (or empty for a
/// flat ring). Throws `Error` (internal) for other algorithms.
[[nodiscard]] std::shared_ptr<const Program> ring_program(const CollectiveSpec& spec, int ranks);

/// The pairwise all-to-all (one channel, no rails or levels) as an implicit program: the
/// transfers, gates and dependencies of `lower(spec, ranks)` computed from their ids (the same
/// transfer ids; gate ids equal transfer ids, one send per gate), memory O(1). Throws `Error`
/// (internal) for another spec or fewer than two ranks, and (input) as `lower` when the
/// program would exceed 2^32 - 1 transfers.
[[nodiscard]] std::shared_ptr<const Program> pairwise_program(const CollectiveSpec& spec,
                                                              int ranks);

/// `lower_program`'s default: collectives of more transfers have no stored schedule.
inline constexpr std::uint64_t kImplicitAbove = 100'000;

/// `lower`, or `ring_program` for ring-family collectives of more than `implicit_above`
/// transfers or that forward on arrival, or `pairwise_program` for pairwise all-to-alls of more
/// than `implicit_above` transfers (memory O(ranks) instead of ~60 bytes per transfer; also
/// faster end to end at that size: building and reading a stored schedule of 2.1M transfers cost
/// ~30% of a 1,024-rank ring allreduce's simulation, see results/coll_bench.md). A stored
/// schedule is lowered `like` the given one when that is a `Schedule` (see `lower`).
[[nodiscard]] std::shared_ptr<const Program> lower_program(
    const CollectiveSpec& spec, int ranks, std::uint64_t implicit_above = kImplicitAbove,
    const Program* like = nullptr);

/// Number of transfers `lower(spec, ranks)` makes, without making them. O(levels).
[[nodiscard]] std::uint64_t transfer_count(const CollectiveSpec& spec, int ranks);

/// The ring of each channel of a multi-channel ring, as ranks by position (position p sends to
/// position p + 1 mod n). Without `ranks_per_node` (0) or within one node, channel c is the
/// group order rotated by c. With ranks_per_node = k (the group is n / k nodes of k ranks, rank
/// node·k + i being local device i of its node, on rail i), channel c visits the nodes in order
/// and crosses from each node to the next on one rail: it enters node t at local rank e_t and
/// leaves it at e_{t+1}, visiting the node's other ranks in between, with e_t = c, c+1, c, c+1,
/// ... (mod k) and, for an odd number of nodes, c+2 for the last one when k >= 3 (k = 2 with an
/// odd count of nodes leaves one crossing between rails). So every node-crossing hop joins the
/// same local rank of two nodes (one rail), and for channels <= k every node's channels leave it
/// on distinct rails. O(channels · n).
[[nodiscard]] std::vector<std::vector<std::uint32_t>> ring_orders(int ranks, int channels,
                                                                  int ranks_per_node);

/// The two binary trees of NCCL's double binary tree over n ranks, as parent arrays (-1 for
/// the root): tree 0 is NCCL's in-order tree rooted at rank 0 (whose only child is the largest
/// power of two below n); tree 1 mirrors it (rank r -> n-1-r) when n is even and shifts it by
/// one rank (r -> r+1 mod n) when n is odd, so that every rank is a leaf in at least one tree.
[[nodiscard]] std::vector<std::vector<int>> double_binary_tree(int n);

}  // namespace nest::coll
