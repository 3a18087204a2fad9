#include "coll/uncontended.h"

#include <algorithm>
#include <limits>
#include <string>

#include "nest/coll/execution.h"
#include "nest/core/error.h"
#include "nest/net/simulator.h"

namespace nest::coll::detail {
UncontendedEvaluator::UncontendedEvaluator(const topo::Topology& topology)
    : topology_(&topology), links_(topology.num_links()) {}

std::optional<UncontendedRun> UncontendedEvaluator::evaluate(topo::Router& router,
                                                             std::span<const GroupProgram> groups,
                                                             std::uint64_t salt) {
  if (&router.topology() != topology_) {
    throw Error::internal("uncontended evaluation: the router routes another topology");
  }
  for (const topo::LinkId link : used_) links_[link] = LinkState{};
  used_.clear();
  UncontendedRun run;
  for (const GroupProgram& group : groups) {
    if (!evaluate_group(router, group, salt, run)) return std::nullopt;
  }
  std::sort(used_.begin(), used_.end());
  run.links.reserve(used_.size());
  for (const topo::LinkId link : used_) {
    run.links.push_back(LinkUse{link, links_[link].bytes, links_[link].busy, 1});
  }
  return run;
}

bool UncontendedEvaluator::evaluate_group(topo::Router& router, const GroupProgram& group,
                                          std::uint64_t salt, UncontendedRun& run) {
  const Program& program = *group.program;
  const std::uint64_t count = program.transfer_count();
  const bool own_sends = program.waits_for_own_sends();
  const RankState fresh;
  for (auto& channel : ranks_) channel.assign(group.group.size(), fresh);
  Time end;
  if (count == 0) ++run.events;  // the execution's "done" event
  std::uint32_t step = 0;
  constexpr std::size_t kBlock = 1024;
  batch_.resize(kBlock);
  for (TransferId id = 0; id < count; ++id) {
    if (id % kBlock == 0) {
      program.transfers(id, std::span(batch_).first(std::min<std::uint64_t>(kBlock, count - id)));
    }
    const Transfer t = batch_[id % kBlock];
    if (t.step < step) {
      throw Error::internal("program transfer " + std::to_string(id) + " is out of step order");
    }
    step = t.step;
    if (t.channel >= ranks_.size()) {
      ranks_.resize(t.channel + 1U);
      for (auto& channel : ranks_) channel.resize(group.group.size(), fresh);
    }
    RankState& sender = ranks_[t.channel][t.src];
    if (sender.send_step != t.step) {
      // A new gate: after the previous sending step's sends and every earlier receive.
      Time received = sender.received_before;
      if (sender.recv_step != t.step) received = std::max(received, sender.received_at);
      sender.open = own_sends ? std::max(sender.sent, received) : received;
      sender.sent = Time::zero();
      sender.send_step = t.step;
    }
    const topo::DeviceId dst = group.group[t.dst];
    if (sender.peer != dst) {
      const topo::DeviceId src = group.group[t.src];
      sender.route = router.route(src, dst, flow_key(src, dst, t.channel, salt));
      const auto all = topology_->links();
      double rate = std::numeric_limits<double>::infinity();
      Time latency;
      for (const topo::LinkId link : sender.route) {
        const double bandwidth = all[link].bandwidth.bytes_per_s();
        if (!(bandwidth > 0)) return false;  // the simulator reports the link
        rate = std::min(rate, bandwidth);
        latency += all[link].latency;
      }
      sender.peer = dst;
      sender.rate = Bandwidth::bytes_per_second(rate);
      sender.latency = latency;
      sender.last_bytes = -1;
    }
    Time arrival = net::later(sender.open, sender.latency);
    if (t.bytes.count() == 0 || sender.route.empty()) {
      ++run.events;  // delivery only
    } else {
      if (t.bytes.count() != sender.last_bytes) {
        sender.last_bytes = t.bytes.count();
        sender.last_drain = net::drain_time(t.bytes, sender.rate);
      }
      if (!admit(sender.route, sender.open, net::later(sender.open, sender.last_drain), t.bytes)) {
        return false;
      }
      arrival = net::later(arrival, sender.last_drain);
      run.events += 2;  // drain end and delivery
    }
    sender.sent = std::max(sender.sent, arrival);
    RankState& receiver = ranks_[t.channel][t.dst];
    if (receiver.recv_step != t.step) {
      receiver.received_before = std::max(receiver.received_before, receiver.received_at);
      receiver.received_at = arrival;
      receiver.recv_step = t.step;
    } else {
      receiver.received_at = std::max(receiver.received_at, arrival);
    }
    end = std::max(end, arrival);
  }
  run.durations.push_back(end);
  return true;
}

bool UncontendedEvaluator::admit(std::span<const topo::LinkId> route, Time start, Time drain,
                                 Bytes bytes) {
  for (const topo::LinkId link : route) {
    LinkState& state = links_[link];
    if (!(start > state.busy_until)) return false;
    if (state.busy_until < Time::zero()) used_.push_back(link);
    state.busy_until = drain;
    state.busy += drain - start;
    state.bytes += bytes.as_double();
  }
  return true;
}

}  // namespace nest::coll::detail
