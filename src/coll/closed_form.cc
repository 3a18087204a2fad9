#include "nest/coll/closed_form.h"

#include <algorithm>
#include <limits>
#include <vector>

#include "nest/coll/execution.h"

namespace nest::coll {

RouteProperties route_properties(const topo::Topology& topology,
                                 std::span<const topo::LinkId> route) {
  RouteProperties p;
  if (route.empty()) return p;
  double slowest = std::numeric_limits<double>::infinity();
  for (topo::LinkId id : route) {
    const topo::Link& link = topology.link(id);
    p.latency += link.latency;
    slowest = std::min(slowest, link.bandwidth.bytes_per_s());
  }
  p.bottleneck = Bandwidth::bytes_per_second(slowest);
  return p;
}

ClosedForm closed_form(const Schedule& schedule, std::span<const topo::DeviceId> group,
                       topo::Router& router, std::uint64_t flow_salt) {
  ClosedForm out;
  const auto transfers = schedule.transfers();
  if (transfers.empty()) return out;

  // Transfers bucketed by step (counting sort), so each step is visited once.
  const std::uint32_t steps = schedule.steps();
  std::vector<std::uint32_t> start(steps + 1, 0);
  for (const Transfer& t : transfers) ++start[t.step + 1];
  for (std::uint32_t s = 0; s < steps; ++s) start[s + 1] += start[s];
  std::vector<std::uint32_t> order(transfers.size());
  {
    std::vector<std::uint32_t> fill(start.begin(), start.end() - 1);
    for (std::size_t i = 0; i < transfers.size(); ++i) {
      order[fill[transfers[i].step]++] = static_cast<std::uint32_t>(i);
    }
  }

  const topo::Topology& topology = router.topology();
  std::vector<std::int64_t> sent(static_cast<std::size_t>(schedule.ranks()), 0);
  std::vector<std::int64_t> received(static_cast<std::size_t>(schedule.ranks()), 0);
  double min_beta = std::numeric_limits<double>::infinity();
  for (std::uint32_t s = 0; s < steps; ++s) {
    if (start[s] == start[s + 1]) continue;
    Time alpha;
    double beta = std::numeric_limits<double>::infinity();
    std::int64_t load = 0;
    for (std::uint32_t k = start[s]; k < start[s + 1]; ++k) {
      const Transfer& t = transfers[order[k]];
      const topo::DeviceId src = group[t.src];
      const topo::DeviceId dst = group[t.dst];
      const RouteProperties p = route_properties(
          topology, router.route(src, dst, flow_key(src, dst, t.channel, flow_salt)));
      alpha = std::max(alpha, p.latency);
      beta = std::min(beta, p.bottleneck.bytes_per_s());
      load = std::max(load, sent[t.src] += t.bytes.count());
      load = std::max(load, received[t.dst] += t.bytes.count());
    }
    for (std::uint32_t k = start[s]; k < start[s + 1]; ++k) {
      const Transfer& t = transfers[order[k]];
      sent[t.src] = 0;
      received[t.dst] = 0;
    }
    ++out.steps;
    out.max_alpha = std::max(out.max_alpha, alpha);
    out.latency_seconds += alpha.to_seconds();
    if (load > 0) out.bandwidth_seconds += static_cast<double>(load) / beta;
    min_beta = std::min(min_beta, beta);
  }
  out.seconds = out.latency_seconds + out.bandwidth_seconds;
  out.bottleneck = Bandwidth::bytes_per_second(min_beta);
  return out;
}

}  // namespace nest::coll
