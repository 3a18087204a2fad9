#include "nest/coll/closed_form.h"

#include <algorithm>
#include <cmath>
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
  // Bytes of the open step on each port: a route's first link (its sender's) and last link (its
  // receiver's); `touched` lists the links to clear when the step closes.
  std::vector<std::int64_t> port_bytes(topology.num_links(), 0);
  std::vector<topo::LinkId> touched;
  double min_beta = std::numeric_limits<double>::infinity();

  // Transfers come in step order; a step is priced when the next one begins.
  bool open = false;
  std::uint32_t step = 0;
  Time alpha;
  // The step's bandwidth term as bytes over a rate: the largest bytes / rate so far.
  std::int64_t load = 0;
  double beta = std::numeric_limits<double>::infinity();
  const auto consider = [&](std::int64_t bytes, double rate) {
    if (bytes <= 0) return;
    if (load == 0 || static_cast<double>(bytes) * beta > static_cast<double>(load) * rate) {
      load = bytes;
      beta = rate;
    }
  };
  const auto close_step = [&] {
    if (!open) return;
    ++out.steps;
    out.max_alpha = std::max(out.max_alpha, alpha);
    out.latency_seconds += alpha.to_seconds();
    if (load > 0) {
      out.bandwidth_seconds += static_cast<double>(load) / beta;
      min_beta = std::min(min_beta, beta);
    }
    for (const topo::LinkId l : touched) port_bytes[l] = 0;
    touched.clear();
    alpha = Time::zero();
    beta = std::numeric_limits<double>::infinity();
    load = 0;
  };
  const auto add_to_port = [&](topo::LinkId l, std::int64_t bytes) {
    if (port_bytes[l] == 0) touched.push_back(l);
    port_bytes[l] += bytes;
    consider(port_bytes[l], topology.link(l).bandwidth.bytes_per_s());
  };
  program.for_each_transfer([&](const Transfer& t) {
    if (!open || t.step != step) {
      close_step();
      open = true;
      step = t.step;
    }
    const topo::DeviceId src = group[t.src];
    const topo::DeviceId dst = group[t.dst];
    const std::span<const topo::LinkId> route =
        router.route(src, dst, flow_key(src, dst, t.channel, flow_salt));
    if (route.empty()) return;
    const RouteProperties p = route_properties(topology, route);
    alpha = std::max(alpha, p.latency);
    const std::int64_t bytes = t.bytes.count();
    consider(bytes, p.bottleneck.bytes_per_s());
    if (bytes <= 0) return;
    add_to_port(route.front(), bytes);
    if (route.size() > 1) add_to_port(route.back(), bytes);
  });
  close_step();
  out.seconds = out.latency_seconds + out.bandwidth_seconds;
  if (std::isfinite(min_beta)) out.bottleneck = Bandwidth::bytes_per_second(min_beta);
  return out;
}

}  // namespace nest::coll
