#include "nest/coll/closed_form.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_map>
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
  // Ports: a route's first link (its sender's) and last link (its receiver's), numbered densely
  // as they are first seen, so the memory is O(ports used), not O(links of the topology).
  // port_bytes holds the open step's bytes per port; `touched` the ports to clear at its end.
  std::unordered_map<topo::LinkId, std::uint32_t> port_of;
  std::vector<std::int64_t> port_bytes;
  std::vector<double> port_rate;
  std::vector<std::uint32_t> touched;
  const auto port = [&](topo::LinkId link) {
    const auto [it, fresh] =
        port_of.try_emplace(link, static_cast<std::uint32_t>(port_bytes.size()));
    if (fresh) {
      port_bytes.push_back(0);
      port_rate.push_back(topology.link(link).bandwidth.bytes_per_s());
    }
    return it->second;
  };
  double min_beta = std::numeric_limits<double>::infinity();

  // Transfers come in step order; a step is priced when the next one begins.
  bool open = false;
  std::uint32_t step = 0;
  Time alpha;
  // The step's bandwidth term as bytes over a rate: the largest bytes / rate so far (every
  // candidate has bytes > 0).
  std::int64_t load = 0;
  double beta = std::numeric_limits<double>::infinity();
  const auto consider = [&](std::int64_t bytes, double rate) {
    if (load == 0 || static_cast<double>(bytes) * beta > static_cast<double>(load) * rate) {
      load = bytes;
      beta = rate;
    }
  };
  // A step's terms into the sums (the same operations for a step and its repeats).
  const auto add_step = [&] {
    ++out.steps;
    out.max_alpha = std::max(out.max_alpha, alpha);
    out.latency_seconds += alpha.to_seconds();
    if (load > 0) {
      out.bandwidth_seconds += static_cast<double>(load) / beta;
      min_beta = std::min(min_beta, beta);
    }
  };
  Time last_alpha;
  std::int64_t last_load = 0;
  double last_beta = std::numeric_limits<double>::infinity();
  const auto close_step = [&] {
    if (!open) return;
    add_step();
    last_alpha = alpha;
    last_load = load;
    last_beta = beta;
    for (const std::uint32_t p : touched) port_bytes[p] = 0;
    touched.clear();
    alpha = Time::zero();
    beta = std::numeric_limits<double>::infinity();
    load = 0;
  };
  const auto add_to_port = [&](std::uint32_t p, std::int64_t bytes) {
    if (port_bytes[p] == 0) touched.push_back(p);
    port_bytes[p] += bytes;
    consider(port_bytes[p], port_rate[p]);
  };
  constexpr std::uint32_t kNoPort = ~std::uint32_t{0};
  // A sender's last route (per channel: the flow key includes it) and its properties: rings and
  // trees send to the same peer step after step.
  struct LastRoute {
    topo::DeviceId peer = ~topo::DeviceId{0};
    bool local = false;  // the route is empty
    Time latency;
    double bottleneck = 0;  // bytes/s
    std::uint32_t first_port = 0;
    std::uint32_t last_port = kNoPort;  // kNoPort for a one-link route (its first port)
  };
  std::vector<std::vector<LastRoute>> last(1, std::vector<LastRoute>(group.size()));
  // Copied out, not cached: an all-to-all's n(n-1) routes would stay in the router for its life.
  std::vector<topo::LinkId> route;
  // Uniform rings (Program::uniform_ring) repeat each phase's step: the same transfers (ranks,
  // channels, bytes), hence the same routes, alpha, loads and beta. Such a step is priced once
  // and its repeats add the same terms, in the same order as step by step. `fresh[s]`: step s
  // begins a phase of some channel (or is step 0).
  std::vector<bool> fresh;
  std::uint64_t per_step = 0;
  if (program.steps() > 1) {
    const auto phases = program.uniform_ring();
    if (!phases.empty() && program.transfer_count() % program.steps() == 0) {
      per_step = program.transfer_count() / program.steps();
      fresh.assign(program.steps(), false);
      fresh[0] = true;
      std::vector<std::uint32_t> at;  // per channel: the next phase's first step
      for (const auto& p : phases) {
        if (p.channel >= at.size()) at.resize(p.channel + 1U, 0);
        if (at[p.channel] < fresh.size()) fresh[at[p.channel]] = true;
        at[p.channel] += p.steps;
      }
    }
  }
  constexpr std::size_t kBlock = 1024;
  std::vector<Transfer> batch(kBlock);
  TransferId batch_first = 0;
  std::uint64_t batch_size = 0;
  const std::uint64_t count = program.transfer_count();
  for (TransferId id = 0; id < count; ++id) {
    if (id < batch_first || id >= batch_first + batch_size) {
      batch_first = id;
      batch_size = std::min<std::uint64_t>(kBlock, count - id);
      program.transfers(id, std::span(batch).first(batch_size));
    }
    const Transfer& t = batch[id - batch_first];
    if (!open || t.step != step) {
      close_step();
      if (!fresh.empty() && !fresh[t.step]) {
        // Steps t.step .. the next phase's first (exclusive) repeat the step just closed.
        std::uint32_t s = t.step;
        while (s < fresh.size() && !fresh[s]) {
          alpha = last_alpha;
          load = last_load;
          beta = last_beta;
          add_step();
          ++s;
        }
        alpha = Time::zero();
        beta = std::numeric_limits<double>::infinity();
        load = 0;
        open = false;
        id = static_cast<TransferId>(s) * per_step - 1;  // the loop's ++ lands on step s
        continue;
      }
      open = true;
      step = t.step;
    }
    if (t.channel >= last.size()) last.resize(t.channel + 1U, std::vector<LastRoute>(group.size()));
    LastRoute& r = last[t.channel][t.src];
    const topo::DeviceId dst = group[t.dst];
    if (r.peer != dst) {
      const topo::DeviceId src = group[t.src];
      r.peer = dst;
      router.route_into(src, dst, flow_key(src, dst, t.channel, flow_salt), route);
      r.local = route.empty();
      if (!route.empty()) {
        const RouteProperties p = route_properties(topology, route);
        r.latency = p.latency;
        r.bottleneck = p.bottleneck.bytes_per_s();
        r.first_port = port(route.front());
        r.last_port = route.size() > 1 ? port(route.back()) : kNoPort;
      }
    }
    if (r.local) continue;
    alpha = std::max(alpha, r.latency);
    const std::int64_t bytes = t.bytes.count();
    if (bytes <= 0) continue;
    consider(bytes, r.bottleneck);
    add_to_port(r.first_port, bytes);
    if (r.last_port != kNoPort) add_to_port(r.last_port, bytes);
  }
  close_step();
  out.seconds = out.latency_seconds + out.bandwidth_seconds;
  if (std::isfinite(min_beta)) out.bottleneck = Bandwidth::bytes_per_second(min_beta);
  return out;
}

}  // namespace nest::coll
