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
/// two trees of the double binary tree).
///
/// The rule is enforced through *gates*: one per (rank, channel, sending step), holding the
/// rank's sends of that step and a count of the transfers it waits for. Every transfer feeds at
/// most two gates (its sender's and its receiver's next sending step on its channel), so memory
/// and dependency work are linear in the number of transfers.
///
/// Bytes are integers: a size split into k parts gives the first (size mod k) parts one byte
/// more (`split_bytes`), so every rank's share is deterministic and the parts sum exactly.

#include <cstdint>
#include <span>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/core/units.h"

namespace nest::coll {

/// Part `index` of `size` split into `parts` near-equal integer parts (the first size % parts
/// parts are one byte larger). `parts` > 0, 0 <= index < parts.
[[nodiscard]] constexpr Bytes split_bytes(Bytes size, std::int64_t parts,
                                          std::int64_t index) noexcept {
  return Bytes(size.count() / parts + (index < size.count() % parts ? 1 : 0));
}

/// One point-to-point transfer of a schedule.
struct Transfer {
  std::uint32_t src = 0;      ///< sending rank (group position)
  std::uint32_t dst = 0;      ///< receiving rank, != src
  std::uint32_t step = 0;     ///< algorithm step; orders a rank's work per channel
  std::uint16_t channel = 0;  ///< independent dependency streams (tree halves, ...)
  Bytes bytes;                ///< >= 0; zero-byte transfers still pay the route latency
};

/// A gate: the sends of one rank at one step on one channel, released together.
struct Gate {
  std::uint32_t first = 0;    ///< first transfer index of the gate's sends
  std::uint32_t count = 0;    ///< number of sends (contiguous from `first`)
  std::uint32_t waits = 0;    ///< transfers that must arrive before the gate opens
  std::uint32_t rank = 0;     ///< the sending rank
  std::uint32_t step = 0;     ///< the step of its sends
  std::uint16_t channel = 0;  ///< the channel of its sends
};

/// Marks "no gate" in `Schedule::successors`.
inline constexpr std::uint32_t kNoGate = 0xffffffffU;

/// An immutable lowered collective. Transfers are sorted by (step, channel, src, dst); build it
/// with `lower` or from any list of transfers. Memory: about 60 bytes per transfer while
/// building, 32 bytes per transfer plus 24 per gate after.
class Schedule {
 public:
  /// A schedule of `ranks` ranks over `transfers` (any order; each src != dst, both < ranks).
  /// Builds the gates. O(T log T) for T transfers. Throws `Error` (internal) on a bad transfer.
  Schedule(int ranks, std::vector<Transfer> transfers);

  /// Number of ranks n.
  [[nodiscard]] int ranks() const noexcept { return ranks_; }
  /// All transfers, sorted by (step, channel, src, dst).
  [[nodiscard]] std::span<const Transfer> transfers() const noexcept { return transfers_; }
  /// All gates, sorted by (step, channel, rank); a gate's sends are contiguous transfers.
  [[nodiscard]] std::span<const Gate> gates() const noexcept { return gates_; }
  /// For transfer t: the gates its arrival counts towards (sender's, receiver's), or kNoGate.
  [[nodiscard]] std::span<const std::uint32_t, 2> successors(std::size_t t) const noexcept {
    return std::span<const std::uint32_t, 2>(successors_.data() + 2 * t, 2);
  }
  /// Number of distinct steps (1 + the largest step; 0 when there are no transfers).
  [[nodiscard]] std::uint32_t steps() const noexcept { return steps_; }
  /// Total bytes of all transfers.
  [[nodiscard]] Bytes total_bytes() const noexcept { return total_bytes_; }

 private:
  int ranks_;
  std::vector<Transfer> transfers_;
  std::vector<Gate> gates_;
  std::vector<std::uint32_t> successors_;  // 2 per transfer
  std::uint32_t steps_ = 0;
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
/// their rings. Time and memory linear in the transfers. Throws `Error` (input) when the
/// schedule would exceed 2^32 - 1 transfers.
[[nodiscard]] Schedule lower(const CollectiveSpec& spec, int ranks);

/// The two binary trees of NCCL's double binary tree over n ranks, as parent arrays (-1 for
/// the root): tree 0 is NCCL's in-order tree rooted at rank 0 (whose only child is the largest
/// power of two below n); tree 1 mirrors it (rank r -> n-1-r) when n is even and shifts it by
/// one rank (r -> r+1 mod n) when n is odd, so that every rank is a leaf in at least one tree.
[[nodiscard]] std::vector<std::vector<int>> double_binary_tree(int n);

}  // namespace nest::coll
