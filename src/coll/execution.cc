#include "nest/coll/execution.h"

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
    simulator_.start_flow(route_, t.bytes, [this, id](net::FlowId, Time now) { arrived(id, now); });
  }
}

void Execution::count_arrival(GateId gate) {
  if (!waits_.empty()) {
    if (--waits_[gate] == 0) open_gate(gate);
    return;
  }
  const auto [it, added] = pending_.try_emplace(gate, 0U);
  if (added) it->second = program_->waits(gate);
  if (--it->second == 0) {
    pending_.erase(it);
    open_gate(gate);
  }
}

void Execution::arrived(TransferId transfer, Time now) {
  const Transfer t = program_->transfer(transfer);
  rank_end_[t.src] = now;
  rank_end_[t.dst] = now;
  for (GateId g : program_->successors(transfer)) {
    if (g != kNoGateId) count_arrival(g);
  }
  if (--remaining_ == 0) {
    end_ = now;
    if (on_done_) on_done_(now);
  }
}

}  // namespace nest::coll
