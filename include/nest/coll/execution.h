#pragma once
/// \file
/// Runs a lowered collective on a `net::Simulator`: each gate's transfers become flows when
/// the gate opens, routed by a `topo::Router`, and the execution reports when the last one has
/// arrived. It starts at the simulator's current time, so a caller can interleave collectives
/// with its own events (compute, other collectives) in one simulation.

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "nest/coll/program.h"
#include "nest/core/rng.h"
#include "nest/core/units.h"
#include "nest/net/simulator.h"
#include "nest/topo/router.h"

namespace nest::coll {

/// The ECMP key of a transfer's flow: one path per (source, destination, channel), so that
/// all steps between two devices take the same path, as one connection would. `salt` varies
/// the choice between runs.
[[nodiscard]] constexpr std::uint64_t flow_key(topo::DeviceId src, topo::DeviceId dst,
                                               std::uint16_t channel, std::uint64_t salt) noexcept {
  return hash_mix(hash_mix(hash_mix(salt, src), dst), channel);
}

/// One collective in flight on one simulator. Not copyable or movable (the simulator's
/// callbacks point at it): keep it alive, e.g. in a `std::unique_ptr`, until it finished.
class Execution {
 public:
  /// Ties `program` (shared, immutable; a `Schedule` or an implicit program) to the devices
  /// `group` (group[rank] = device; size = program->ranks(), distinct devices of the router's
  /// topology). `simulator` and `router` must outlive the execution; the router is used only
  /// from `start` and from simulator events (so it must not be used by another thread
  /// meanwhile). Memory: one counter per gate for dense programs, one per pending gate for
  /// implicit ones.
  Execution(net::Simulator& simulator, topo::Router& router, std::shared_ptr<const Program> program,
            std::vector<topo::DeviceId> group, std::uint64_t flow_salt = 0);
  Execution(const Execution&) = delete;
  Execution& operator=(const Execution&) = delete;
  ~Execution();

  /// Starts the collective at the simulator's current time; `on_done(now)` runs (as a
  /// simulator event) when its last transfer has arrived. A schedule without transfers finishes
  /// at the same time. Call at most once. Throws `Error` (internal) on a second call.
  void start(std::function<void(Time)> on_done = {});

  /// True once every transfer has arrived.
  [[nodiscard]] bool finished() const noexcept { return remaining_ == 0 && started_; }
  /// When `start` was called.
  [[nodiscard]] Time start_time() const noexcept { return start_; }
  /// When the last transfer arrived (valid once finished()).
  [[nodiscard]] Time end_time() const noexcept { return end_; }
  /// end_time() - start_time() (valid once finished()).
  [[nodiscard]] Time duration() const noexcept { return end_ - start_; }
  /// The devices of the group, by rank.
  [[nodiscard]] std::span<const topo::DeviceId> group() const noexcept { return group_; }
  /// Per rank: when its last transfer (sent or received) arrived (valid once finished()).
  [[nodiscard]] std::span<const Time> rank_end_times() const noexcept { return rank_end_; }

 private:
  void open_gate(GateId gate);
  void count_arrival(GateId gate);
  void arrived(std::uint32_t slot, Time now);  // `slot` of `flights_`

  net::Simulator& simulator_;
  topo::Router& router_;
  std::shared_ptr<const Program> program_;
  std::vector<topo::DeviceId> group_;
  std::uint64_t salt_;
  std::vector<std::uint32_t> waits_;  // dense programs: per gate
  // Implicit programs: the gates partly arrived and their remaining waits, in an open-addressing
  // table (linear probing, backward-shift deletion, power-of-two size, at most half full): the
  // pairwise all-to-all has ~2 ranks' worth pending and touches it twice per transfer, where a
  // node-based hash map allocated and freed a node per gate.
  struct PendingGate {
    GateId gate = kNoGateId;  // kNoGateId: an empty slot
    std::uint32_t waits = 0;
  };
  std::vector<PendingGate> pending_;
  std::size_t pending_count_ = 0;
  [[nodiscard]] static std::size_t pending_home(GateId gate, std::size_t mask) noexcept;
  [[nodiscard]] std::size_t pending_slot(GateId gate) const noexcept;
  void grow_pending();
  void erase_pending(std::size_t slot) noexcept;
  // The transfers in flight, by a slot that each flow's callback holds (so that an arrival
  // needs no second `Program::transfer`), and the free slots.
  struct InFlight {
    TransferId transfer;
    std::uint32_t src;  // ranks
    std::uint32_t dst;
  };
  std::vector<InFlight> flights_;
  std::vector<std::uint32_t> free_flights_;
  std::vector<TransferId> sends_;    // scratch for open_gate
  std::vector<topo::LinkId> route_;  // scratch for open_gate
  std::vector<Time> rank_end_;
  std::uint64_t remaining_ = 0;
  bool started_ = false;
  Time start_;
  Time end_;
  std::function<void(Time)> on_done_;
};

}  // namespace nest::coll
