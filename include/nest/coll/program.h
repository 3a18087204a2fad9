#pragma once
/// \file
/// `Program`: what an `Execution` (and the closed form) needs of a lowered collective, whether
/// its transfers are stored (`Schedule`) or computed on demand (the ring family's implicit
/// program, whose memory is O(ranks) instead of O(transfers)).
///
/// Transfers and gates have 64-bit ids. Transfer ids are 0..transfer_count()-1 in nondecreasing
/// step order, so visiting them in id order visits every transfer after all those it (through
/// its gate) waits for. A gate is one rank's sends of one step on one channel,
/// released together once `waits(gate)` transfers have arrived (the dependency rule of
/// nest/coll/schedule.h); every transfer's arrival counts towards at most two gates.

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "nest/core/units.h"

namespace nest::coll {

/// One point-to-point transfer of a collective.
struct Transfer {
  std::uint32_t src = 0;      ///< sending rank (group position)
  std::uint32_t dst = 0;      ///< receiving rank, != src
  std::uint32_t step = 0;     ///< algorithm step; orders a rank's work per channel
  std::uint16_t channel = 0;  ///< independent dependency streams (tree halves, ...)
  Bytes bytes;                ///< >= 0; zero-byte transfers still pay the route latency
};

/// A (src rank, dst rank, channel) that a program's transfers use (`Program::distinct_pairs`).
struct RankPair {
  std::uint32_t src = 0;
  std::uint32_t dst = 0;
  std::uint16_t channel = 0;
};

/// One phase of a ring-family program whose transfers are uniform (`Program::uniform_ring`):
/// `steps` consecutive steps of one channel in which every rank r sends `piece` to `next[r]`.
struct UniformRingPhase {
  std::uint16_t channel = 0;
  std::uint32_t steps = 0;
  Bytes piece;                      ///< > 0, the bytes of every transfer of the phase
  std::vector<std::uint32_t> next;  ///< next[r]: where rank r sends (a permutation, no r -> r)
};

/// One phase of a ring-family program as the event-free bound sees it
/// (`Program::bounding_ring`): `steps` consecutive steps of one channel in which every rank r
/// sends one piece to `next[r]`, waiting for what it received in the step before (and, when the
/// program `waits_for_own_sends`, for its own send); the pieces may differ: `least` is the
/// smallest of them and `sent[r]` the bytes rank r sends over the phase's steps.
struct BoundingRingPhase {
  std::uint16_t channel = 0;
  std::uint32_t steps = 0;
  Bytes least;                      ///< > 0, the smallest piece of the phase
  std::vector<std::uint32_t> next;  ///< next[r]: where rank r sends (a permutation, no r -> r)
  std::vector<std::int64_t> sent;   ///< sent[r]: the sum of rank r's pieces
  /// Empty, or (a flat ring's channel of unsplit chunks) the pieces travel: every piece of the
  /// phase is `least` or `least` + 1 bytes, and the piece rank r sends in a step after the
  /// phase's first is the one its predecessor (r' with next[r'] = r) sent in the step before,
  /// so the pieces of a chain of such sends are all equal; carried[r]: the bytes of rank r's
  /// send in the phase's last step.
  std::vector<std::int64_t> carried;
};

/// Names a gate of a program.
using GateId = std::uint64_t;
/// Names a transfer of a program.
using TransferId = std::uint64_t;
/// Marks "no gate" among a transfer's successors.
inline constexpr GateId kNoGateId = ~GateId{0};

/// A lowered collective as a dependency structure over transfers. Immutable; any number of
/// executions (threads included) may share one.
class Program {
 public:
  virtual ~Program() = default;

  /// Number of ranks n.
  [[nodiscard]] virtual int ranks() const noexcept = 0;
  /// Number of transfers.
  [[nodiscard]] virtual std::uint64_t transfer_count() const noexcept = 0;
  /// 1 + the largest step (0 without transfers).
  [[nodiscard]] virtual std::uint32_t steps() const noexcept = 0;
  /// When gates are numbered 0..k-1, k (an execution then keeps a dense counter array);
  /// 0 when gate ids are sparse (counters live in a hash map only while a gate is pending).
  [[nodiscard]] virtual std::uint64_t dense_gates() const noexcept = 0;

  /// Appends the gates that wait for nothing.
  virtual void initial_gates(std::vector<GateId>& out) const = 0;
  /// How many transfers must arrive before `gate` opens.
  [[nodiscard]] virtual std::uint32_t waits(GateId gate) const = 0;
  /// Appends the ids of `gate`'s transfers.
  virtual void sends(GateId gate, std::vector<TransferId>& out) const = 0;
  /// Transfer `id`.
  [[nodiscard]] virtual Transfer transfer(TransferId id) const = 0;
  /// Transfers first, first + 1, ... into `out` (first + out.size() <= transfer_count()): what
  /// `transfer` gives for each, computed in bulk where a program can (the implicit ring hoists
  /// each step's arithmetic out of the loop over ranks).
  virtual void transfers(TransferId first, std::span<Transfer> out) const {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = transfer(first + i);
  }
  /// The gates transfer `id`'s arrival counts towards (sender's, receiver's), or kNoGateId.
  [[nodiscard]] virtual std::array<GateId, 2> successors(TransferId id) const = 0;
  /// Calls `visit` on every transfer, in nondecreasing step order.
  virtual void for_each_transfer(const std::function<void(const Transfer&)>& visit) const = 0;
  /// False when a rank's sends of a step wait only for what it received in earlier steps, not
  /// for its own previous sends to arrive (rule (1) of nest/coll/schedule.h dropped): rings with
  /// `CollectiveSpec::forward_on_arrival`.
  [[nodiscard]] virtual bool waits_for_own_sends() const noexcept { return true; }
  /// The program as uniform rings, when it is one: every channel's steps are covered by its
  /// phases (listed per channel in step order), in every step every rank of the channel sends
  /// exactly one transfer (the phase's piece, to its successor), and a rank's sends of a step
  /// wait for its predecessor's send of the step before and, when `waits_for_own_sends`, for
  /// its own. Empty otherwise (the default). The contention-free evaluator derives such a run
  /// (waiting for own sends, or forwarding with one phase per channel and no send waiting for
  /// a link) and its event-free bound (phase by phase) from the rings' ranks instead of their
  /// steps (coll/uncontended.h); forwarding rings whose senders share no link are
  /// event-simulated from it without the max-min machinery (coll/private_rings.h).
  /// O(phases · ranks).
  [[nodiscard]] virtual std::vector<UniformRingPhase> uniform_ring() const { return {}; }
  /// The program as rings whose pieces may differ (a buffer that does not split evenly), when
  /// it is one: as `uniform_ring` (phases listed per channel in step order, covering its steps),
  /// each phase with its least piece and what each rank sends in it. Empty otherwise (the
  /// default; the event-free bound of coll/uncontended.h then takes `uniform_ring`'s phases).
  /// O(phases · ranks).
  [[nodiscard]] virtual std::vector<BoundingRingPhase> bounding_ring() const { return {}; }
  /// Every distinct (src, dst, channel) of the transfers, in order of first use in
  /// `for_each_transfer`, when the program lists them without visiting its transfers (rings:
  /// O(phases · ranks) instead of O(steps · ranks)); nullopt otherwise (the default), and the
  /// caller visits the transfers.
  [[nodiscard]] virtual std::optional<std::vector<RankPair>> distinct_pairs() const {
    return std::nullopt;
  }

 protected:
  // Derived programs may be copied and moved; a Program itself is never sliced.
  Program() = default;
  Program(const Program&) = default;
  Program(Program&&) = default;
  Program& operator=(const Program&) = default;
  Program& operator=(Program&&) = default;
};

}  // namespace nest::coll
