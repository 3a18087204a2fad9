#include "nest/coll/execution.h"

#include <utility>

#include "nest/core/error.h"

namespace nest::coll {

Execution::Execution(net::Simulator& simulator, topo::Router& router,
                     std::shared_ptr<const Schedule> schedule, std::vector<topo::DeviceId> group,
                     std::uint64_t flow_salt)
    : simulator_(simulator),
      router_(router),
      schedule_(std::move(schedule)),
      group_(std::move(group)),
      salt_(flow_salt) {
  if (!schedule_ || static_cast<std::size_t>(schedule_->ranks()) != group_.size()) {
    throw Error::internal("execution: the group size does not match the schedule's ranks");
  }
}

Execution::~Execution() = default;

void Execution::start(std::function<void(Time)> on_done) {
  if (started_) throw Error::internal("execution: started twice");
  started_ = true;
  start_ = simulator_.now();
  end_ = start_;
  on_done_ = std::move(on_done);
  const auto gates = schedule_->gates();
  waits_.resize(gates.size());
  for (std::size_t g = 0; g < gates.size(); ++g) waits_[g] = gates[g].waits;
  rank_end_.assign(group_.size(), start_);
  remaining_ = schedule_->transfers().size();
  if (remaining_ == 0) {
    simulator_.schedule(start_, [this] {
      if (on_done_) on_done_(end_);
    });
    return;
  }
  for (std::size_t g = 0; g < gates.size(); ++g) {
    if (waits_[g] == 0) open_gate(static_cast<std::uint32_t>(g));
  }
}

void Execution::open_gate(std::uint32_t gate) {
  const Gate& g = schedule_->gates()[gate];
  const auto transfers = schedule_->transfers();
  for (std::uint32_t i = g.first; i < g.first + g.count; ++i) {
    const Transfer& t = transfers[i];
    const topo::DeviceId src = group_[t.src];
    const topo::DeviceId dst = group_[t.dst];
    const auto route = router_.route(src, dst, flow_key(src, dst, t.channel, salt_));
    simulator_.start_flow(route, t.bytes, [this, i](net::FlowId, Time now) { arrived(i, now); });
  }
}

void Execution::arrived(std::uint32_t transfer, Time now) {
  const Transfer& t = schedule_->transfers()[transfer];
  rank_end_[t.src] = now;
  rank_end_[t.dst] = now;
  for (std::uint32_t g : schedule_->successors(transfer)) {
    if (g != kNoGate && --waits_[g] == 0) open_gate(g);
  }
  if (--remaining_ == 0) {
    end_ = now;
    if (on_done_) on_done_(now);
  }
}

}  // namespace nest::coll
