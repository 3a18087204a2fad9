#include "coll/private_rings.h"

#include <algorithm>
#include <limits>

#include "nest/coll/execution.h"
#include "nest/net/event_queue.h"
#include "nest/net/simulator.h"

namespace nest::coll::detail {
namespace {

// One sender of one channel of one group: its route and the bundle of its flows in flight.
struct Sender {
  double capacity = 0;  // bytes/s: the smallest along its route
  Time latency;         // the route's
  std::uint32_t route_at = 0;
  std::uint32_t hops = 0;
  std::uint32_t next = 0;  // the sender its pieces go to (same group and channel)
  std::uint32_t group = 0;
  std::int64_t steps = 0;
  double piece = 0;
  std::vector<std::uint32_t> flows;  // in flight, by slot
  bool dirty = false;
  Time busy_since;
  Time busy;
  std::uint32_t peak = 0;
  double bytes = 0;
};

struct Flow {
  double size = 0;
  double remaining = 0;
  double rate = 0;  // 0 until rated
  Time settled;
  std::uint32_t sender = 0;
  std::uint32_t step = 0;
  std::uint32_t version = 0;
  std::uint32_t position = 0;  // in its sender's `flows`
};

enum Kind : std::uint8_t { kDrain, kDeliver };

// The phases of a forwarding ring, one per channel (consecutive ones of the same piece and
// successors merged), or empty when it is not such a ring.
std::vector<UniformRingPhase> forwarding_phases(const Program& program, std::size_t n) {
  std::vector<UniformRingPhase> phases;
  if (program.waits_for_own_sends() || program.ranks() != static_cast<int>(n) || n < 2) {
    return {};
  }
  std::uint64_t transfers = 0;
  for (UniformRingPhase& p : program.uniform_ring()) {
    if (p.next.size() != n || p.piece.count() <= 0 || p.steps == 0) return {};
    transfers += static_cast<std::uint64_t>(p.steps) * n;
    if (!phases.empty() && phases.back().channel == p.channel && phases.back().piece == p.piece &&
        phases.back().next == p.next) {
      phases.back().steps += p.steps;
      continue;
    }
    for (const UniformRingPhase& q : phases) {
      if (q.channel == p.channel) return {};  // two phases
    }
    phases.push_back(std::move(p));
  }
  if (transfers != program.transfer_count()) return {};
  return phases;
}

}  // namespace

// Why the bundles' rates are the simulator's. No two senders share a link, so every link of
// a sender's route carries only that sender's flows, all over the same route. Let k of them be
// in flight after a timestamp and c the route's smallest capacity. Whichever way the simulator
// rates them (the verified refilling, the component refilling from a changed link with or
// without kept lower levels), it rates all k together and none is held fixed: a flow is held
// only below the timestamp's level (the smallest departed rate, the arrivals' floors), and the
// bundle's flows share one rate, c / k_before, which a departure from the bundle makes the
// level itself and an arrival's floor (c / k) lies below; the verified refilling re-rates the
// flows whose bottleneck is a changed link, and every link of the route changed. So every link
// of the component has its full capacity as spare and k unfrozen flows; with k = 1 each link is
// private and the flow gets its cap, capacity c; with k >= 2 the filling takes the smallest
// share capacity / k, c / k, and freezes all k at it. Other bundles change nothing here. The
// rate is thus c / k (one division; c / 1 = c), and flows whose rate changed are settled and
// rescheduled with the simulator's own arithmetic (`net::settled_remaining`,
// `net::drain_time_of`), so every drain end and delivery falls on the same picosecond. The
// event loop is the simulator's: rates after each timestamp, superseded drain events skipped
// and not counted, a drain end and a delivery per flow, gates opened by deliveries at once.
std::optional<PrivateRingRun> simulate_private_rings(const topo::Topology& topology,
                                                     topo::Router& router,
                                                     std::span<const GroupProgram> groups,
                                                     std::uint64_t salt, Time until,
                                                     std::uint64_t max_events) {
  if (groups.empty()) return std::nullopt;
  const auto all = topology.links();
  std::vector<Sender> senders;
  std::vector<topo::LinkId> routes;
  std::vector<topo::LinkId> route;
  std::vector<std::uint32_t> owner(all.size(), std::numeric_limits<std::uint32_t>::max());
  std::vector<std::uint64_t> left(groups.size());  // transfers not yet arrived, per group
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const GroupProgram& group = groups[g];
    const std::size_t n = group.group.size();
    const std::vector<UniformRingPhase> phases = forwarding_phases(*group.program, n);
    if (phases.empty()) return std::nullopt;
    left[g] = group.program->transfer_count();
    for (const UniformRingPhase& phase : phases) {
      const auto first = static_cast<std::uint32_t>(senders.size());
      for (std::size_t r = 0; r < n; ++r) {
        const topo::DeviceId src = group.group[r];
        const topo::DeviceId dst = group.group[phase.next[r]];
        router.route_into(src, dst, flow_key(src, dst, phase.channel, salt), route);
        if (route.empty()) return std::nullopt;
        Sender s;
        s.capacity = std::numeric_limits<double>::infinity();
        for (const topo::LinkId link : route) {
          const double bandwidth = all[link].bandwidth.bytes_per_s();
          if (!(bandwidth > 0)) return std::nullopt;  // the simulator reports it
          s.capacity = std::min(s.capacity, bandwidth);
          s.latency = s.latency + all[link].latency;
          if (owner[link] != std::numeric_limits<std::uint32_t>::max()) return std::nullopt;
          owner[link] = static_cast<std::uint32_t>(senders.size());
        }
        if (s.latency <= Time::zero()) return std::nullopt;
        s.route_at = static_cast<std::uint32_t>(routes.size());
        s.hops = static_cast<std::uint32_t>(route.size());
        routes.insert(routes.end(), route.begin(), route.end());
        s.next = first + phase.next[r];
        s.group = static_cast<std::uint32_t>(g);
        s.steps = phase.steps;
        s.piece = phase.piece.as_double();
        senders.push_back(std::move(s));
      }
    }
  }

  std::vector<Flow> flows;
  std::vector<std::uint32_t> free_slots;
  net::EventQueue queue;  // the simulator's event list: (time, insertion) order
  std::vector<std::uint32_t> dirty;
  Time now;
  const auto start = [&](std::uint32_t sender, std::uint32_t step) {
    std::uint32_t slot = 0;
    if (free_slots.empty()) {
      slot = static_cast<std::uint32_t>(flows.size());
      flows.emplace_back();
    } else {
      slot = free_slots.back();
      free_slots.pop_back();
    }
    Sender& s = senders[sender];
    Flow& f = flows[slot];
    f.size = s.piece;
    f.remaining = s.piece;
    f.rate = 0;
    f.settled = now;
    f.sender = sender;
    f.step = step;
    ++f.version;
    f.position = static_cast<std::uint32_t>(s.flows.size());
    if (s.flows.empty()) s.busy_since = now;
    s.flows.push_back(slot);
    s.peak = std::max(s.peak, static_cast<std::uint32_t>(s.flows.size()));
    if (!s.dirty) {
      s.dirty = true;
      dirty.push_back(sender);
    }
  };
  const auto rate_dirty = [&] {
    for (const std::uint32_t sender : dirty) {
      Sender& s = senders[sender];
      s.dirty = false;
      if (s.flows.empty()) continue;
      const double rate = s.capacity / static_cast<double>(s.flows.size());
      for (const std::uint32_t slot : s.flows) {
        Flow& f = flows[slot];
        if (f.rate == rate) continue;
        f.remaining = net::settled_remaining(f.remaining, f.rate, now - f.settled, f.size);
        f.settled = now;
        f.rate = rate;
        ++f.version;
        const Time end = net::later(now, net::drain_time_of(f.remaining, f.rate));
        queue.push(end, 0, kDrain, slot, f.version);
      }
    }
    dirty.clear();
  };
  const auto stale = [&](const net::QueuedEvent& e) {
    return e.kind == kDrain && flows[e.target].version != e.stamp;
  };

  PrivateRingRun run;
  std::vector<Time> ends(groups.size());
  std::size_t finished = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) finished += left[g] == 0 ? 1 : 0;
  for (std::uint32_t i = 0; i < senders.size(); ++i) {
    if (senders[i].steps > 0) start(i, 0);
  }
  for (;;) {
    if (!dirty.empty()) rate_dirty();
    while (!queue.empty() && stale(queue.peek())) queue.pop();
    if (queue.empty() || queue.next_time() > until || run.events >= max_events) break;
    now = queue.next_time();
    do {
      const net::QueuedEvent e = queue.pop();
      if (stale(e)) continue;
      ++run.events;
      Flow& f = flows[e.target];
      Sender& s = senders[f.sender];
      if (e.kind == kDrain) {
        // Leaves its bundle; delivered a route latency later.
        const std::uint32_t last = s.flows.back();
        s.flows[f.position] = last;
        flows[last].position = f.position;
        s.flows.pop_back();
        s.bytes += f.size;
        if (s.flows.empty()) s.busy = s.busy + (now - s.busy_since);
        if (!s.dirty) {
          s.dirty = true;
          dirty.push_back(f.sender);
        }
        ++f.version;  // no drain event of this flow is live any more
        queue.push(net::later(now, s.latency), 0, kDeliver, e.target, f.version);
        continue;
      }
      // Delivered: the successor forwards the piece at once (the gate of the next step waits
      // for this arrival only).
      const std::uint32_t step = f.step + 1;
      const std::uint32_t next = s.next;
      const std::uint32_t group = s.group;
      const bool more = step < s.steps;
      free_slots.push_back(e.target);
      if (more) start(next, step);
      if (--left[group] == 0) {
        ends[group] = now;
        ++finished;
      }
    } while (!queue.empty() && queue.next_time() == now);
  }
  run.finished = finished == groups.size();
  if (!run.finished) return run;
  run.durations = std::move(ends);
  for (const Sender& s : senders) {
    for (std::uint32_t h = 0; h < s.hops; ++h) {
      run.links.push_back(LinkUse{routes[s.route_at + h], s.bytes, s.busy, s.peak});
    }
  }
  std::sort(run.links.begin(), run.links.end(),
            [](const LinkUse& a, const LinkUse& b) { return a.link < b.link; });
  return run;
}

}  // namespace nest::coll::detail
