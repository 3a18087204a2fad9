#include "nest/coll/execution.h"

#include <algorithm>
#include <utility>

#include "nest/core/error.h"

namespace nest::coll {

Execution::Execution(net::Simulator& simulator, topo::Router& router,
                     std::shared_ptr<const Program> program, std::vector<topo::DeviceId> group,
                     std::uint64_t flow_salt)
    : simulator_(simulator),
      router_(router),
      program_(std::move(program)),
      group_(std::move(group)),
      salt_(flow_salt) {
  if (!program_ || static_cast<std::size_t>(program_->ranks()) != group_.size()) {
    throw Error::internal("execution: the group size does not match the program's ranks");
  }
}

Execution::~Execution() = default;

void Execution::start(std::function<void(Time)> on_done) {
  if (started_) throw Error::internal("execution: started twice");
  started_ = true;
  start_ = simulator_.now();
  end_ = start_;
  on_done_ = std::move(on_done);
  const std::uint64_t dense = program_->dense_gates();
  waits_.resize(dense);
  for (std::uint64_t g = 0; g < dense; ++g) waits_[g] = program_->waits(g);
  rank_end_.assign(group_.size(), start_);
  remaining_ = program_->transfer_count();
  if (remaining_ == 0) {
    simulator_.schedule(start_, [this] {
      if (on_done_) on_done_(end_);
    });
    return;
  }
  std::vector<GateId> initial;
  program_->initial_gates(initial);
  for (GateId g : initial) open_gate(g);
}

void Execution::open_gate(GateId gate) {
  sends_.clear();
  program_->sends(gate, sends_);
  for (TransferId id : sends_) {
    const Transfer t = program_->transfer(id);
    const topo::DeviceId src = group_[t.src];
    const topo::DeviceId dst = group_[t.dst];
    // Copied out, not cached: the simulator copies it too, and an all-to-all's n(n-1) routes
    // would otherwise stay in the router's cache for its life.
    router_.route_into(src, dst, flow_key(src, dst, t.channel, salt_), route_);
    std::uint32_t slot = 0;
    if (free_flights_.empty()) {
      slot = static_cast<std::uint32_t>(flights_.size());
      flights_.emplace_back();
    } else {
      slot = free_flights_.back();
      free_flights_.pop_back();
    }
    flights_[slot] = InFlight{id, t.src, t.dst};
    simulator_.start_flow(route_, t.bytes,
                          [this, slot](net::FlowId, Time now) { arrived(slot, now); });
  }
}

void Execution::count_arrival(GateId gate) {
  if (!waits_.empty()) {
    if (--waits_[gate] == 0) open_gate(gate);
    return;
  }
  if (2 * (pending_count_ + 1) > pending_.size()) grow_pending();
  const std::size_t slot = pending_slot(gate);
  PendingGate& entry = pending_[slot];
  if (entry.gate == kNoGateId) {
    entry = PendingGate{gate, program_->waits(gate)};
    ++pending_count_;
  }
  if (--entry.waits == 0) {
    erase_pending(slot);
    open_gate(gate);
  }
}

// Where `gate`'s probe run starts in a table of mask + 1 slots (Fibonacci hashing).
std::size_t Execution::pending_home(GateId gate, std::size_t mask) noexcept {
  return static_cast<std::size_t>((gate * 0x9E3779B97F4A7C15ULL) >> 32U) & mask;
}

// The slot of `gate`, or the empty slot where it would go. The table is never full.
std::size_t Execution::pending_slot(GateId gate) const noexcept {
  const std::size_t mask = pending_.size() - 1;
  std::size_t slot = pending_home(gate, mask);
  while (pending_[slot].gate != kNoGateId && pending_[slot].gate != gate) slot = (slot + 1) & mask;
  return slot;
}

void Execution::grow_pending() {
  std::vector<PendingGate> old(std::max<std::size_t>(64, 2 * pending_.size()));
  old.swap(pending_);
  for (const PendingGate& entry : old) {
    if (entry.gate != kNoGateId) pending_[pending_slot(entry.gate)] = entry;
  }
}

// Empties `slot` and moves back the entries of its probe run that may no longer be reached
// (backward-shift deletion: no tombstones).
void Execution::erase_pending(std::size_t slot) noexcept {
  const std::size_t mask = pending_.size() - 1;
  std::size_t hole = slot;
  for (std::size_t next = (hole + 1) & mask; pending_[next].gate != kNoGateId;
       next = (next + 1) & mask) {
    const std::size_t home = pending_home(pending_[next].gate, mask);
    // The entry at `next` may fill the hole when its home is not in (hole, next], cyclically.
    if (((next - home) & mask) >= ((next - hole) & mask)) {
      pending_[hole] = pending_[next];
      hole = next;
    }
  }
  pending_[hole] = PendingGate{};
  --pending_count_;
}

void Execution::arrived(std::uint32_t slot, Time now) {
  const InFlight flight = flights_[slot];
  free_flights_.push_back(slot);
  rank_end_[flight.src] = now;
  rank_end_[flight.dst] = now;
  for (GateId g : program_->successors(flight.transfer)) {
    if (g != kNoGateId) count_arrival(g);
  }
  if (--remaining_ == 0) {
    end_ = now;
    if (on_done_) on_done_(now);
  }
}

}  // namespace nest::coll
