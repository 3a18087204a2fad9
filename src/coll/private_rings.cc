#include "coll/private_rings.h"

#include <algorithm>
#include <limits>

#include "nest/coll/execution.h"
#include "nest/core/error.h"
#include "nest/net/event_queue.h"
#include "nest/net/simulator.h"

namespace nest::coll::detail {

// One sender of one channel of one group: its route and the bundle of its flows in flight.
struct PrivateRingSimulator::Sender {
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
  std::uint64_t copies = 1;  // senders of the whole ring it stands for (see `reduce`)
};

namespace {

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

}  // namespace

PrivateRingSimulator::PrivateRingSimulator(const topo::Topology& topology)
    : topology_(&topology),
      owner_(topology.num_links(), std::numeric_limits<std::uint32_t>::max()) {}

PrivateRingSimulator::~PrivateRingSimulator() = default;

bool PrivateRingSimulator::load(topo::Router& router, std::span<const GroupProgram> groups,
                                std::uint64_t salt) {
  if (&router.topology() != topology_) {
    throw Error::internal("private rings: the router routes another topology");
  }
  senders_.clear();
  routes_.clear();
  left_.clear();
  rings_.clear();
  if (groups.empty()) return false;
  std::vector<std::vector<UniformRingPhase>> rings;
  for (const GroupProgram& group : groups) {                 // the cheap checks first
    if (group.program->waits_for_own_sends()) return false;  // derived when contention-free
    rings.push_back(one_phase_per_channel(*group.program, group.group.size()));
    if (rings.back().empty()) return false;
    left_.push_back(group.program->transfer_count());
  }
  const auto all = topology_->links();
  constexpr auto kFree = std::numeric_limits<std::uint32_t>::max();
  bool ok = true;
  for (std::size_t g = 0; g < groups.size() && ok; ++g) {
    const auto& devices = groups[g].group;
    for (const UniformRingPhase& phase : rings[g]) {
      const auto first = static_cast<std::uint32_t>(senders_.size());
      rings_.push_back({first, static_cast<std::uint32_t>(devices.size())});
      for (std::size_t r = 0; r < devices.size() && ok; ++r) {
        const topo::DeviceId src = devices[r];
        const topo::DeviceId dst = devices[phase.next[r]];
        router.route_into(src, dst, flow_key(src, dst, phase.channel, salt), route_);
        Sender s;
        s.capacity = std::numeric_limits<double>::infinity();
        s.route_at = static_cast<std::uint32_t>(routes_.size());
        for (const topo::LinkId link : route_) {
          if (owner_[link] != kFree) {
            ok = false;  // two senders share a link
            break;
          }
          owner_[link] = static_cast<std::uint32_t>(senders_.size());
          routes_.push_back(link);
          s.capacity = std::min(s.capacity, all[link].bandwidth.bytes_per_s());
          s.latency = s.latency + all[link].latency;
        }
        s.hops = static_cast<std::uint32_t>(routes_.size()) - s.route_at;
        // A link without bandwidth: the simulator reports it.
        ok = ok && !route_.empty() && s.capacity > 0 && s.latency > Time::zero();
        s.next = first + phase.next[r];
        s.group = static_cast<std::uint32_t>(g);
        s.steps = phase.steps;
        s.piece = phase.piece.as_double();
        senders_.push_back(std::move(s));
      }
    }
  }
  for (const topo::LinkId link : routes_) owner_[link] = kFree;
  if (ok) reduce(groups);
  return ok;
}

// Why one period of a ring runs as the whole ring. Take one ring of n senders s_0 .. s_{n-1}
// in order along it (s_k's pieces go to s_{k+1 mod n}) whose routes have the same capacity and
// latency as those P places further, P dividing n. All of them start at time zero with the same
// piece and steps (a uniform ring phase), and in this run a sender's flows are rated, drained
// and delivered by its own capacity and latency alone (no link is shared; see `run`), its next
// piece starting when its predecessor's arrives. What happens at a timestamp does not depend
// on the order in which its events are taken: each drain or delivery changes its own sender's
// bundle (or starts one flow at the successor), and the rating after the timestamp gives every
// flow of a bundle c / k whatever the order; events are counted one by one. So rotating the
// ring by P places maps the run onto itself: by induction over the timestamps, s_k and s_{k+P}
// start, rate, drain and deliver the same flows at the same picoseconds. In particular s_0's
// predecessor s_{n-1} delivers what s_{P-1} delivers, at the same times, so s_0 .. s_{P-1} with
// s_{P-1} feeding s_0 run exactly as they do in the whole ring. Every event of theirs stands
// for n / P events of the whole ring at the same timestamp (so the budget, checked between
// timestamps, stops after the same one), every sender's link statistics are those of the one
// P·j places before it, and a group's last delivery is the last of its rings' periods.
// Rings that are not one cycle, or have no period below n, run whole.
void PrivateRingSimulator::reduce(std::span<const GroupProgram> groups) {
  simulated_.clear();
  of_.assign(senders_.size(), 0);
  simulated_left_.assign(groups.size(), 0);
  const auto alike = [this](std::uint32_t a, std::uint32_t b) {
    return senders_[a].capacity == senders_[b].capacity &&
           senders_[a].latency == senders_[b].latency;
  };
  std::vector<std::uint32_t> along;
  for (const Ring& ring : rings_) {
    along.clear();
    std::uint32_t at = ring.first;
    do {
      along.push_back(at);
      at = senders_[at].next;
    } while (at != ring.first && along.size() < ring.n);
    std::uint32_t period = ring.n;
    const bool cycle = at == ring.first && along.size() == ring.n;
    if (cycle) {
      for (std::uint32_t p = 1; p < ring.n; ++p) {
        if (ring.n % p != 0) continue;
        bool repeats = true;
        for (std::uint32_t k = p; k < ring.n && repeats; ++k)
          repeats = alike(along[k], along[k - p]);
        if (repeats) {
          period = p;
          break;
        }
      }
    } else {
      along.resize(ring.n);  // the ring runs whole, its senders by rank
      for (std::uint32_t r = 0; r < ring.n; ++r) along[r] = ring.first + r;
    }
    const auto base = static_cast<std::uint32_t>(simulated_.size());
    for (std::uint32_t k = 0; k < ring.n; ++k) of_[along[k]] = base + k % period;
    for (std::uint32_t k = 0; k < period; ++k) {
      Sender s = senders_[along[k]];
      // Along the ring, its period's last feeding its first (the whole ring when P = n);
      // otherwise by rank, as loaded.
      s.next = cycle ? base + (k + 1) % period : base + (s.next - ring.first);
      s.copies = ring.n / period;
      simulated_left_[s.group] += static_cast<std::uint64_t>(s.steps);
      simulated_.push_back(std::move(s));
    }
  }
  // Every group ends at its last transfer: the phases cover them (`one_phase_per_channel`).
  std::vector<std::uint64_t> whole(groups.size(), 0);
  for (const Sender& s : simulated_) {
    whole[s.group] += s.copies * static_cast<std::uint64_t>(s.steps);
  }
  if (whole != left_) throw Error::internal("private rings: phases that miss transfers");
}

// Why the bundles' rates are the simulator's. No two senders share a link, so every link of
// a sender's route carries only that sender's flows, all over the same route. Let k of them be
// in flight after a timestamp and c the route's smallest capacity. Whichever way the simulator
// rates them (the verified refilling, the component refilling from a changed link with or
// without kept lower levels), it rates all k together and none is held fixed: the component
// refilling keeps only flows below the timestamp's level (the smallest departed rate and
// arrival floor over the whole timestamp) less a relative 1e-9, and that level is at most
// c / k_before after a departure from the bundle (the departed flow's rate, which the others
// share) and at most c / k after an arrival (its floor), below the bundle's rate c / k_before
// either way; the verified refilling re-rates the arrivals and the flows whose bottleneck is a
// changed link, and every link of the route changed. So every link of the component has its
// full capacity as spare and k unfrozen flows; with k = 1 each link is private and the flow
// gets its cap, capacity c; with k >= 2 the filling takes the smallest share capacity / k,
// c / k, and freezes all k at it. Other bundles change nothing here. The rate is thus c / k
// (one division; c / 1 = c), and flows whose rate changed are settled and rescheduled with the
// simulator's own arithmetic (`net::detail::settled_remaining`, `net::detail::drain_time_of`),
// so every drain end and delivery falls on the same picosecond. The event loop is the
// simulator's: rates after each timestamp, superseded drain events skipped and not counted, a
// drain end and a delivery per flow, gates opened by deliveries at once.
std::optional<PrivateRingRun> PrivateRingSimulator::run(topo::Router& router,
                                                        std::span<const GroupProgram> groups,
                                                        std::uint64_t salt, Time until,
                                                        std::uint64_t max_events) {
  if (!load(router, groups, salt)) return std::nullopt;
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
    Sender& s = simulated_[sender];
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
  // What the simulator's rate update does to the bundles changed at `now` (see above).
  const auto rate_dirty = [&] {
    for (const std::uint32_t sender : dirty) {
      Sender& s = simulated_[sender];
      s.dirty = false;
      if (s.flows.empty()) continue;
      const double rate = s.capacity / static_cast<double>(s.flows.size());
      for (const std::uint32_t slot : s.flows) {
        Flow& f = flows[slot];
        if (f.rate == rate) continue;
        f.remaining = net::detail::settled_remaining(f.remaining, f.rate, now - f.settled, f.size);
        f.settled = now;
        f.rate = rate;
        ++f.version;
        const Time end = net::later(now, net::detail::drain_time_of(f.remaining, f.rate));
        queue.push(end, 0, kDrain, slot, f.version);
      }
    }
    dirty.clear();
  };
  const auto stale = [&](const net::QueuedEvent& e) {
    return e.kind == kDrain && flows[e.target].version != e.stamp;
  };

  PrivateRingRun out;
  std::vector<Time> ends(groups.size());
  std::size_t finished = 0;
  for (const std::uint64_t left : simulated_left_) finished += left == 0 ? 1 : 0;
  for (std::uint32_t i = 0; i < simulated_.size(); ++i) {
    if (simulated_[i].steps > 0) start(i, 0);
  }
  for (;;) {
    if (!dirty.empty()) rate_dirty();
    while (!queue.empty() && stale(queue.peek())) queue.pop();
    if (queue.empty() || queue.next_time() > until || out.events >= max_events) break;
    now = queue.next_time();
    do {
      const net::QueuedEvent e = queue.pop();
      if (stale(e)) continue;
      Flow& f = flows[e.target];
      Sender& s = simulated_[f.sender];
      out.events += s.copies;
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
      // for this arrival only). `f` and `s` are not used past `start`, which may move them.
      const std::uint32_t step = f.step + 1;
      const std::uint32_t next = s.next;
      const std::uint32_t group = s.group;
      const bool more = step < s.steps;
      free_slots.push_back(e.target);
      if (more) start(next, step);
      if (--simulated_left_[group] == 0) {
        ends[group] = now;
        ++finished;
      }
    } while (!queue.empty() && queue.next_time() == now);
  }
  out.finished = finished == groups.size();
  out.senders = senders_.size();
  out.simulated = simulated_.size();
  if (!out.finished) return out;
  out.durations = std::move(ends);
  for (std::uint32_t i = 0; i < senders_.size(); ++i) {
    Sender& s = senders_[i];
    const Sender& like = simulated_[of_[i]];
    s.bytes = like.bytes;
    s.busy = like.busy;
    s.peak = like.peak;
    for (std::uint32_t h = 0; h < s.hops; ++h) {
      out.links.push_back(LinkUse{routes_[s.route_at + h], s.bytes, s.busy, s.peak});
    }
  }
  std::sort(out.links.begin(), out.links.end(),
            [](const LinkUse& a, const LinkUse& b) { return a.link < b.link; });
  return out;
}

}  // namespace nest::coll::detail
