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

ClosedForm closed_form(const Program& program, std::span<const topo::DeviceId> group,
                       topo::Router& router, std::uint64_t flow_salt) {
  ClosedForm out;
  const topo::Topology& topology = router.topology();
  std::vector<std::int64_t> sent(static_cast<std::size_t>(program.ranks()), 0);
  std::vector<std::int64_t> received(static_cast<std::size_t>(program.ranks()), 0);
  std::vector<std::uint32_t> touched;
  double min_beta = std::numeric_limits<double>::infinity();

  // Transfers come in step order; a step is priced when the next one begins.
  bool open = false;
  std::uint32_t step = 0;
  Time alpha;
  double beta = std::numeric_limits<double>::infinity();
  std::int64_t load = 0;
  const auto close_step = [&] {
    if (!open) return;
    ++out.steps;
    out.max_alpha = std::max(out.max_alpha, alpha);
    out.latency_seconds += alpha.to_seconds();
    if (load > 0) out.bandwidth_seconds += static_cast<double>(load) / beta;
    min_beta = std::min(min_beta, beta);
    for (std::uint32_t r : touched) sent[r] = received[r] = 0;
    touched.clear();
    alpha = Time::zero();
    beta = std::numeric_limits<double>::infinity();
    load = 0;
  };
  program.for_each_transfer([&](const Transfer& t) {
    if (!open || t.step != step) {
      close_step();
      open = true;
      step = t.step;
    }
    const topo::DeviceId src = group[t.src];
    const topo::DeviceId dst = group[t.dst];
    const RouteProperties p = route_properties(
        topology, router.route(src, dst, flow_key(src, dst, t.channel, flow_salt)));
    alpha = std::max(alpha, p.latency);
    beta = std::min(beta, p.bottleneck.bytes_per_s());
    touched.push_back(t.src);
    touched.push_back(t.dst);
    load = std::max(load, sent[t.src] += t.bytes.count());
    load = std::max(load, received[t.dst] += t.bytes.count());
  });
  close_step();
  out.seconds = out.latency_seconds + out.bandwidth_seconds;
  if (out.steps > 0) out.bottleneck = Bandwidth::bytes_per_second(min_beta);
  return out;
}

}  // namespace nest::coll
