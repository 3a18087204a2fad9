#include "coll/uncontended.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>
#include <string>
#include <utility>

#include "nest/coll/execution.h"
#include "nest/core/error.h"
#include "nest/net/simulator.h"

namespace nest::coll::detail {
UncontendedEvaluator::UncontendedEvaluator(const topo::Topology& topology, bool derive_rings)
    : topology_(&topology),
      derive_rings_(derive_rings),
      links_(topology.num_links()),
      owner_(topology.num_links(), 0) {}

void UncontendedEvaluator::begin(const topo::Router& router) {
  if (&router.topology() != topology_) {
    throw Error::internal("uncontended evaluation: the router routes another topology");
  }
  for (const topo::LinkId link : used_) links_[link] = LinkState{};
  used_.clear();
}

namespace {

// The smallest and the largest sum of k consecutive entries of `cycle` going around it (k may
// exceed its length m: floor(k / m) laps of its total plus a window of k mod m), or nullopt when
// a sum would reach the horizon. Integer picoseconds: exact.
std::optional<std::pair<std::int64_t, std::int64_t>> cyclic_sums(
    std::span<const std::int64_t> cycle, std::int64_t k) {
  const std::int64_t horizon = net::kHorizon.ps();
  const auto m = static_cast<std::int64_t>(cycle.size());
  std::int64_t total = 0;
  for (const std::int64_t d : cycle) {
    if (d > horizon - 1 - total) return std::nullopt;
    total += d;
  }
  const std::int64_t laps = k / m;
  const auto rest = static_cast<std::size_t>(k % m);
  if (total > 0 && laps > (horizon - 1) / total) return std::nullopt;
  std::int64_t window = 0;  // the rest's entries ending at position i, going backwards
  for (std::size_t i = 0; i < rest; ++i) window += cycle[i];
  std::int64_t least = window;
  std::int64_t most = window;
  for (std::size_t i = rest; i < cycle.size() + rest && rest > 0; ++i) {
    window += cycle[i % cycle.size()] - cycle[i - rest];
    least = std::min(least, window);
    most = std::max(most, window);
  }
  if (most > horizon - 1 - laps * total) return std::nullopt;
  return std::pair{laps * total + least, laps * total + most};
}

}  // namespace

std::vector<UniformRingPhase> one_phase_per_channel(const Program& program, std::size_t n) {
  if (program.ranks() != static_cast<int>(n) || n < 2) return {};
  std::vector<UniformRingPhase> phases;
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

std::vector<BoundingRingPhase> bounding_phases(const Program& program, std::size_t n) {
  if (program.ranks() != static_cast<int>(n) || n < 2) return {};
  std::vector<BoundingRingPhase> listed = program.bounding_ring();
  if (listed.empty()) {
    for (UniformRingPhase& p : program.uniform_ring()) {
      const auto sent = static_cast<std::int64_t>(p.steps) * p.piece.count();
      listed.push_back({.channel = p.channel,
                        .steps = p.steps,
                        .least = p.piece,
                        .next = std::move(p.next),
                        .sent = std::vector<std::int64_t>(n, sent)});
    }
  }
  std::vector<BoundingRingPhase> phases;
  std::vector<std::uint16_t> channels;          // in order of first listing
  std::vector<std::uint64_t> steps_of_channel;  // their steps
  for (BoundingRingPhase& p : listed) {
    if (p.next.size() != n || p.sent.size() != n || p.least.count() <= 0 || p.steps == 0 ||
        (!p.carried.empty() && p.carried.size() != n)) {
      return {};
    }
    const auto at = std::find(channels.begin(), channels.end(), p.channel);
    if (at == channels.end()) {
      channels.push_back(p.channel);
      steps_of_channel.push_back(p.steps);
    } else if (at + 1 != channels.end()) {
      return {};  // a channel's phases must be listed together
    } else {
      steps_of_channel.back() += p.steps;
    }
    if (!phases.empty() && phases.back().channel == p.channel && phases.back().next == p.next) {
      BoundingRingPhase& last = phases.back();
      last.steps += p.steps;
      last.least = std::min(last.least, p.least);
      for (std::size_t r = 0; r < n; ++r) last.sent[r] += p.sent[r];
      last.carried.clear();  // pieces that travel within each phase need not across them
      continue;
    }
    phases.push_back(std::move(p));
  }
  std::uint64_t transfers = 0;
  for (const std::uint64_t steps : steps_of_channel) {
    if (steps != program.steps()) return {};
    transfers += steps * n;
  }
  if (transfers != program.transfer_count()) return {};
  return phases;
}

std::optional<UncontendedRun> UncontendedEvaluator::evaluate(topo::Router& router,
                                                             std::span<const GroupProgram> groups,
                                                             std::uint64_t salt) {
  begin(router);
  if (derive_rings_) {
    if (auto derived = evaluate_rings(router, groups, salt)) {
      ++derived_;
      return derived;
    }
    if (auto derived = evaluate_carried_rings(router, groups, salt)) {
      ++derived_;
      return derived;
    }
  }
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

// Why `lower_bound` bounds the event simulation from below. (a) Take the transfers in id order
// (a gate waits only for transfers of earlier steps). A flow's gate opens in the simulation at
// the last arrival it waits for, as in the pass, and the simulation's arrivals of the earlier
// transfers are, by induction, no earlier than the pass's less their margins; the flow drains
// at a max-min rate no faster than its slowest link, so it drains for at least its bytes over
// that rate, as the pass's flow alone does, up to rounding: the pass rounds its drain up to a
// whole picosecond (at most 1 ps over the exact quotient), the simulation counts a flow
// drained within 1e-12 of its size and rounds its drain end within 1e-6 ps of a whole
// picosecond down. So each transfer of a chain loses at most 2 ps + 2e-12 of its drain against
// the pass: 4 ps per transfer and a relative 1e-6 cover that with room (floating rates may
// exceed a link's capacity by a few ulps; the simulation keeps lower max-min levels only within
// 1e-9). (b) The flows over a link open no earlier than the earliest of their openings in the
// pass (less the margin of (a)), drain together at no more than its bandwidth, and the last to
// drain is delivered its route latency later: the run lasts at least that opening plus the
// link's bytes over its bandwidth plus the shortest route latency over it, less the margins.
std::optional<RunBound> UncontendedEvaluator::lower_bound(topo::Router& router,
                                                          std::span<const GroupProgram> groups,
                                                          std::uint64_t salt,
                                                          std::vector<LinkLoad>* loads) {
  begin(router);
  UncontendedRun run;
  std::int64_t path = 0;
  std::int64_t margin = 0;
  for (const GroupProgram& group : groups) {
    const bool derived = derive_rings_ && bound_ring(router, group, salt, run);
    if (!derived && !repeat_pass(router, group, salt, run) &&
        !recorded_pass(router, group, salt, run)) {
      return std::nullopt;
    }
    const auto own = static_cast<std::int64_t>(4 * group.program->transfer_count());
    margin = std::max(margin, own);
    path = std::max(path, run.durations.back().ps() - own);
  }
  constexpr double kRelativeMargin = 1e-6;
  const auto all = topology_->links();
  double load = 0;
  for (const topo::LinkId link : used_) {
    const LinkState& state = links_[link];
    load = std::max(load, static_cast<double>((state.first_open + state.min_latency).ps()) +
                              state.bytes / all[link].bandwidth.bytes_per_s() * 1e12);
  }
  const double bound =
      std::max(static_cast<double>(path), std::floor(load) - static_cast<double>(margin)) *
      (1 - kRelativeMargin);
  RunBound out;
  out.slowest = Time::picoseconds(std::max<std::int64_t>(0, static_cast<std::int64_t>(bound)));
  out.events = run.events;
  if (loads != nullptr) {
    std::sort(used_.begin(), used_.end());
    loads->clear();
    loads->reserve(used_.size());
    for (const topo::LinkId link : used_) {
      loads->push_back({link, links_[link].bytes, links_[link].min_latency});
    }
  }
  return out;
}

// Why `progress_bound` bounds the run's end. By now the simulation has drained `carried` bytes
// across link l (its statistics: the drained part of every flow over it, the flows still
// draining settled to now); its flows put `bytes` over it in all (the same routes and sizes as
// the bound's pass, so the same sum), so `bytes - carried` are still to drain across it, at no
// more than its bandwidth (max-min rates may exceed it by a few ulps, and the refilling keeps
// lower levels within 1e-9), and the flow that drains the last of them is delivered its route
// latency later, at least the shortest among l's flows. Floating settlement may leave carried
// short of the truth by a relative 1e-12 per flow (a flow counts as drained within 1e-12 of its
// size): a relative 1e-9 of the link's bytes is taken off what is left, and a link with less
// left than that is skipped (its flows may all have drained; one delivered before now plus its
// latency must not count). Drain ends round down by at most 1 ps per flow and chained
// transfers can accumulate it: `margin` (4 ps per transfer; the oracle passes the sum over its
// groups, at least `lower_bound`'s largest group's) and a relative 1e-6 cover that. Between two
// calls each link's term rises by at most the time elapsed (what is left only shrinks), and a
// link whose flows have all drained drops out, so the bound rises no faster than the clock
// (it may fall: a link's last delivery still pending no longer counts).
Time progress_bound(const net::Simulator& sim, std::span<const LinkLoad> loads, Time margin) {
  constexpr double kCarriedMargin = 1e-9;
  constexpr double kRelativeMargin = 1e-6;
  const auto all = sim.topology().links();
  const double now = static_cast<double>(sim.now().ps());
  double end = now;
  for (const LinkLoad& load : loads) {
    const double left = load.bytes * (1 - kCarriedMargin) - sim.link_stats(load.link).bytes;
    if (left <= 0) continue;
    end = std::max(end, now + left / all[load.link].bandwidth.bytes_per_s() * 1e12 +
                            static_cast<double>(load.min_latency.ps()));
  }
  const double bound = (std::floor(end) - static_cast<double>(margin.ps())) * (1 - kRelativeMargin);
  return Time::picoseconds(std::max<std::int64_t>(0, static_cast<std::int64_t>(bound)));
}

// The bound's pass (`evaluate_group` with `bound_only`: every flow alone, no admission) on a
// ring (`bounding_phases`): per channel, phases q of K_q steps in which rank r sends a piece to
// next_q[r] and receives one from its predecessor there. Write d_r(k) = latency + drain(piece of
// r's send of step k, slowest link of r's route) and d_qr for that with phase q's least piece:
// d_qr <= d_r(k), since a drain never shrinks as the piece grows (equal for a uniform ring). Write
// a(r, k) for the arrival of r's send of step k. The pass opens r's gate of step k at the latest
// receive of the steps before (`received_before`, and `received_at` when r has not yet received in
// step k) and, when ranks wait for their own sends, at no earlier than r's send of step k-1
// (`sent`); the arrival is the opening plus d_r(k). So the gate opens no earlier than a(p, k-1), p
// the rank r received from in step k-1 (0 for k = 0), and, waiting for own sends, a(r, k-1):
// - in both kinds, a(r, k) >= a(p, k-1) + d_r(k): unrolled back to step 0, the sum of d(k)
//   along a chain that walks each phase's successor map backwards for its K_q steps, that is,
//   K_q consecutive d_q's going backwards around a cycle of the map (of m ranks, total C:
//   floor(K_q / m)·C plus K_q mod m consecutive ones). Each map is a permutation, so walking
//   back from the last step is one to one at every step: for any phase q some last rank's chain
//   takes q's largest window. So the channel's last arrival is at least the sum over its phases
//   of their smallest windows plus the largest gap between one phase's largest and smallest,
//   and a phase's first gates open no earlier than the smallest windows before it. One phase of
//   equal pieces forwarding on arrival ends exactly at its largest window (a(r, k) = a(p, k-1) +
//   d_r: arrivals grow with the step);
// - waiting for their own sends, also a(r, k) >= a(r, k-1) + d_r(k): rank r's last arrival is at
//   least sum_q K_q·d_qr, and its gate of phase q's first step opens no earlier than the sum over
//   the phases before; the channel's end is at least the larger of the two sums. One phase of
//   equal pieces ends at exactly K·D, D = max_r d_r: a rank with d_r = D reaches it, and
//   a(x, k) = max(a(x, k-1), a(p, k-1)) + d_x <= (k + 1)·D by induction (arrivals grow with the
//   step, so the gate opens at the later of the two; `evaluate_rings`), which no window of K
//   d's exceeds.
// So the derivation is the pass's for one phase per channel of equal pieces (a uniform flat or
// channel ring; the tests compare) and at most the pass's otherwise, which is what `lower_bound`
// needs (the pass is below the event simulation). Integer picoseconds throughout, so the sums
// are exact when they stay below the horizon (checked; otherwise the pass runs and reports it).
// The pass's other results follow: a route stays the sender's for the phase's steps, so each of
// its links gets the sender's pieces of the phase, sent[r] bytes (an integer below 2^53: exact
// as a double, in any order), no earlier an opening than the phase's first gate's (the pass's
// first flow over the link opens no earlier; exactly 0 with one phase per channel) and its route
// latency, as `add_pending` adds them; two events per transfer (pieces are not empty). The group
// ends at its latest channel.
bool UncontendedEvaluator::bound_ring(topo::Router& router, const GroupProgram& group,
                                      std::uint64_t salt, UncontendedRun& run) {
  const Program& program = *group.program;
  const std::size_t n = group.group.size();
  const std::vector<BoundingRingPhase> phases = bounding_phases(program, n);
  if (phases.empty()) return false;
  const bool own = program.waits_for_own_sends();
  const std::int64_t horizon = net::kHorizon.ps();
  routes_.clear();
  ring_.clear();  // phase q's senders at q·n
  for (const BoundingRingPhase& phase : phases) {
    for (std::size_t r = 0; r < n; ++r) {
      const topo::DeviceId src = group.group[r];
      const topo::DeviceId dst = group.group[phase.next[r]];
      const std::optional<SenderPath> path = route_path(router, src, dst, phase.channel, salt);
      if (!path || route_.empty()) return false;  // the pass reports a link without bandwidth
      const Time latency = path->latency;
      const Time drain = net::drain_time(phase.least, Bandwidth::bytes_per_second(path->rate));
      if (latency.ps() >= horizon || drain.ps() >= horizon - latency.ps()) {
        return false;
      }
      ring_.push_back({static_cast<std::uint32_t>(routes_.size()),
                       static_cast<std::uint32_t>(route_.size()), latency, latency + drain});
      routes_.insert(routes_.end(), route_.begin(), route_.end());
    }
  }
  // Each channel's phases [first, last]; `opens[q·n + r]`: no later than r's first gate of q.
  std::vector<std::int64_t> opens(phases.size() * n, 0);
  std::vector<std::int64_t> sums;  // per rank, own sends: its d's so far
  std::vector<bool> seen;
  std::vector<std::int64_t> cycle;  // d along a cycle, in successor order
  Time end;
  for (std::size_t first = 0; first < phases.size();) {
    std::size_t last = first;
    while (last + 1 < phases.size() && phases[last + 1].channel == phases[first].channel) ++last;
    // The chain: every phase's smallest window so far, and the widest spread of one phase's.
    std::int64_t smallest = 0;
    std::int64_t spread = 0;
    for (std::size_t q = first; q <= last; ++q) {
      std::optional<std::pair<std::int64_t, std::int64_t>> windows;
      seen.assign(n, false);
      for (std::size_t start = 0; start < n; ++start) {
        if (seen[start]) continue;
        cycle.clear();
        for (std::size_t r = start; !seen[r]; r = phases[q].next[r]) {
          seen[r] = true;
          cycle.push_back(ring_[q * n + r].step.ps());
        }
        const auto w = cyclic_sums(cycle, phases[q].steps);
        if (!w) return false;
        windows = !windows ? *w
                           : std::pair{std::min(windows->first, w->first),
                                       std::max(windows->second, w->second)};
      }
      std::fill_n(opens.begin() + static_cast<std::ptrdiff_t>(q * n), n, smallest);
      if (windows->first > horizon - 1 - smallest) return false;
      smallest += windows->first;
      spread = std::max(spread, windows->second - windows->first);
    }
    if (spread > horizon - 1 - smallest) return false;
    std::int64_t channel_end = smallest + spread;
    if (own) {
      sums.assign(n, 0);
      for (std::size_t q = first; q <= last; ++q) {
        const std::int64_t k = phases[q].steps;
        for (std::size_t r = 0; r < n; ++r) {
          const std::int64_t d = ring_[q * n + r].step.ps();
          opens[q * n + r] = std::max(opens[q * n + r], sums[r]);
          if (d > 0 && k > (horizon - 1 - sums[r]) / d) return false;
          sums[r] += k * d;
        }
      }
      channel_end = std::max(channel_end, *std::max_element(sums.begin(), sums.end()));
    }
    end = std::max(end, Time::picoseconds(channel_end));
    first = last + 1;
  }
  // The link sums, as `add_pending` adds them.
  for (std::size_t q = 0; q < phases.size(); ++q) {
    for (std::size_t r = 0; r < n; ++r) {
      const auto bytes = static_cast<double>(phases[q].sent[r]);
      const Time open = Time::picoseconds(opens[q * n + r]);
      const RingSender& sender = ring_[q * n + r];
      for (std::uint32_t h = sender.route_at; h < sender.route_at + sender.hops; ++h) {
        LinkState& state = links_[routes_[h]];
        if (state.busy_until < Time::zero()) {
          used_.push_back(routes_[h]);
          state.busy_until = Time::zero();
          state.first_open = open;
          state.min_latency = sender.latency;
        }
        state.first_open = std::min(state.first_open, open);
        state.min_latency = std::min(state.min_latency, sender.latency);
        state.bytes += bytes;
      }
    }
  }
  run.events += 2 * program.transfer_count();  // bounding_phases checked they match
  run.durations.push_back(end);
  ++derived_bounds_;
  return true;
}

bool UncontendedEvaluator::evaluate_group(topo::Router& router, const GroupProgram& group,
                                          std::uint64_t salt, UncontendedRun& run,
                                          bool bound_only) {
  const Program& program = *group.program;
  const std::uint64_t count = program.transfer_count();
  const bool own_sends = program.waits_for_own_sends();
  const RankState fresh;
  for (auto& channel : ranks_) channel.assign(group.group.size(), fresh);
  routes_.clear();
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
    if (sender.routes[sender.current].peer != dst) {
      std::size_t kept = 0;
      while (kept < kSenderRoutes && sender.routes[kept].peer != dst) ++kept;
      if (kept < kSenderRoutes) {
        sender.current = static_cast<std::uint8_t>(kept);
      } else {
        // A new destination, in the place of the route kept longest.
        sender.current = sender.victim;
        sender.victim = static_cast<std::uint8_t>((sender.victim + 1) % kSenderRoutes);
        SenderRoute& slot = sender.routes[sender.current];
        if (bound_only) add_pending(slot);
        const std::optional<SenderPath> path =
            route_path(router, group.group[t.src], dst, t.channel, salt);
        if (!path) return false;  // a link without bandwidth: the simulator reports it
        if (route_.size() > slot.room) {
          slot.at = static_cast<std::uint32_t>(routes_.size());
          slot.room = static_cast<std::uint32_t>(route_.size());
          routes_.resize(routes_.size() + route_.size());
        }
        std::copy(route_.begin(), route_.end(), routes_.begin() + slot.at);
        slot.hops = static_cast<std::uint32_t>(route_.size());
        slot.peer = dst;
        slot.rate = Bandwidth::bytes_per_second(path->rate);
        slot.latency = path->latency;
        slot.last_bytes = -1;
        if (recording_ != nullptr && recording_->fills.size() >= record_limit_) {
          // Too many routes for a repeat to pay: the slot stays incomplete (never taken), and
          // its memory is given back.
          recording_->fills = {};
          recording_->stints = {};
          recording_ = nullptr;
        }
        if (recording_ != nullptr) {
          slot.fill = static_cast<std::uint32_t>(recording_->fills.size());
          recording_->fills.push_back(PassFill{.src = t.src,
                                               .dst = t.dst,
                                               .channel = t.channel,
                                               .empty = route_.empty(),
                                               .rate = slot.rate,
                                               .latency = slot.latency});
        }
      }
    }
    SenderRoute& via = sender.routes[sender.current];
    const std::span<const topo::LinkId> route(routes_.data() + via.at, via.hops);
    Time arrival = net::later(sender.open, via.latency);
    if (t.bytes.count() == 0 || route.empty()) {
      ++run.events;  // delivery only
    } else {
      if (t.bytes.count() != via.last_bytes) {
        via.last_bytes = t.bytes.count();
        via.last_drain = net::drain_time(t.bytes, via.rate);
      }
      if (bound_only) {
        via.pending_bytes += t.bytes.as_double();
        via.pending_open = std::min(via.pending_open, sender.open);
      } else if (!admit(route, sender.open, net::later(sender.open, via.last_drain), t.bytes)) {
        return false;
      }
      arrival = net::later(arrival, via.last_drain);
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
  if (bound_only) {
    for (auto& channel : ranks_) {
      for (RankState& sender : channel) {
        for (SenderRoute& route : sender.routes) add_pending(route);
      }
    }
  }
  run.durations.push_back(end);
  return true;
}

// A route's links get the sums of its flows at once (when the route leaves its sender's kept
// routes, or the group ends) instead of flow by flow: the same minima, and the same byte totals,
// since byte counts are integers and every partial sum stays below 2^53, where doubles add
// integers exactly in any order (a link would need 9 PB for that to fail). So a ring step, or a
// tree's pieces to a parent and two children in turn, cost O(1) per flow instead of O(hops), and
// the links are visited once per route kept.
void UncontendedEvaluator::add_pending(SenderRoute& route) {
  if (route.pending_open == Time::max()) return;
  if (recording_ != nullptr) {
    recording_->stints.push_back(
        PassStint{.fill = route.fill, .bytes = route.pending_bytes, .open = route.pending_open});
  }
  add_flows(std::span<const topo::LinkId>(routes_.data() + route.at, route.hops),
            route.pending_bytes, route.pending_open, route.latency);
  route.pending_bytes = 0;
  route.pending_open = Time::max();
}

void UncontendedEvaluator::add_flows(std::span<const topo::LinkId> route, double bytes, Time open,
                                     Time latency) {
  for (const topo::LinkId link : route) {
    LinkState& state = links_[link];
    if (state.busy_until < Time::zero()) {
      used_.push_back(link);
      state.busy_until = Time::zero();
      state.first_open = open;
      state.min_latency = latency;
    }
    state.first_open = std::min(state.first_open, open);
    state.min_latency = std::min(state.min_latency, latency);
    state.bytes += bytes;
  }
}

std::optional<UncontendedEvaluator::SenderPath> UncontendedEvaluator::route_path(
    topo::Router& router, topo::DeviceId src, topo::DeviceId dst, std::uint16_t channel,
    std::uint64_t salt) {
  router.route_into(src, dst, flow_key(src, dst, channel, salt), route_);
  const auto all = topology_->links();
  SenderPath path{std::numeric_limits<double>::infinity(), Time::zero()};
  for (const topo::LinkId link : route_) {
    const double bandwidth = all[link].bandwidth.bytes_per_s();
    if (!(bandwidth > 0)) return std::nullopt;
    path.rate = std::min(path.rate, bandwidth);
    path.latency += all[link].latency;
  }
  return path;
}

bool UncontendedEvaluator::recorded_pass(topo::Router& router, const GroupProgram& group,
                                         std::uint64_t salt, UncontendedRun& run) {
  PassMemo* memo = nullptr;
  if (group.key) {
    memo = find_pass(group);
    if (memo == nullptr) {
      memo = &passes_[next_pass_];
      next_pass_ = (next_pass_ + 1) % passes_.size();
    }
    memo->program = nullptr;  // incomplete until the pass ends
    memo->key = *group.key;
    memo->ranks = group.group.size();
    memo->fills.clear();
    memo->stints.clear();
    recording_ = memo;
    record_limit_ = group.program->transfer_count() / 4 + 16;
  }
  const std::uint64_t events = run.events;
  bool ok = false;
  try {
    ok = evaluate_group(router, group, salt, run, true);
  } catch (...) {
    recording_ = nullptr;  // the slot stays incomplete: never taken
    throw;
  }
  const bool recorded = recording_ != nullptr;  // not abandoned past the record limit
  recording_ = nullptr;
  if (ok && recorded) {
    memo->program = group.program;  // complete: usable from now on
    memo->end = run.durations.back();
    memo->events = run.events - events;
  }
  return ok;
}

UncontendedEvaluator::PassMemo* UncontendedEvaluator::find_pass(const GroupProgram& group) {
  for (PassMemo& memo : passes_) {
    if (memo.program == group.program && memo.key == *group.key &&
        memo.ranks == group.group.size()) {
      return &memo;
    }
  }
  return nullptr;
}

bool UncontendedEvaluator::repeat_pass(topo::Router& router, const GroupProgram& group,
                                       std::uint64_t salt, UncontendedRun& run) {
  if (!group.key) return false;
  const PassMemo* kept = find_pass(group);
  if (kept == nullptr) return false;
  const PassMemo& memo = *kept;
  // This group's routes in the pass's order, each with the values the pass read.
  fill_at_.clear();
  fill_links_.clear();
  for (const PassFill& fill : memo.fills) {
    const topo::DeviceId src = group.group[fill.src];
    const topo::DeviceId dst = group.group[fill.dst];
    const std::optional<SenderPath> path = route_path(router, src, dst, fill.channel, salt);
    if (!path || route_.empty() != fill.empty ||
        Bandwidth::bytes_per_second(path->rate) != fill.rate || path->latency != fill.latency) {
      return false;  // the pass answers (and reports a link without bandwidth)
    }
    fill_at_.push_back(static_cast<std::uint32_t>(fill_links_.size()));
    fill_links_.insert(fill_links_.end(), route_.begin(), route_.end());
  }
  fill_at_.push_back(static_cast<std::uint32_t>(fill_links_.size()));
  // The same arrivals and events; the same sums, as `add_pending` adds them, on these routes.
  for (const PassStint& stint : memo.stints) {
    const std::span<const topo::LinkId> links(fill_links_.data() + fill_at_[stint.fill],
                                              fill_at_[stint.fill + 1] - fill_at_[stint.fill]);
    add_flows(links, stint.bytes, stint.open, memo.fills[stint.fill].latency);
  }
  run.durations.push_back(memo.end);
  run.events += memo.events;
  ++repeated_passes_;
  return true;
}

namespace {

// The last arrival of a channel whose ranks wait for their own sends, from its d(r, q) (phase q,
// rank r, at d[q * n + r]) and each phase's largest, D_q = top[q] (see `evaluate_rings`):
// sum_q K_q * D_q when one rank is maximal in every phase; nullopt when none is, or past the
// horizon (the pass answers, or reports it).
std::optional<Time> own_sends_end(std::span<const UniformRingPhase* const> phases,
                                  std::span<const Time> d, std::span<const Time> top) {
  for (const UniformRingPhase* p : phases) {
    if (p->steps == 0) return std::nullopt;  // no program lists one; the pass answers
  }
  const std::size_t n = d.size() / phases.size();
  bool reached = false;
  for (std::size_t r = 0; r < n && !reached; ++r) {
    bool everywhere = true;
    for (std::size_t q = 0; q < phases.size() && everywhere; ++q) {
      everywhere = d[q * n + r] == top[q];
    }
    reached = everywhere;
  }
  if (!reached) return std::nullopt;
  Time end;
  for (std::size_t q = 0; q < phases.size(); ++q) {
    const auto k = static_cast<std::int64_t>(phases[q]->steps);
    if (top[q].ps() >= (net::kHorizon.ps() - end.ps()) / k) return std::nullopt;
    end = end + top[q] * k;
  }
  return end;
}

// The same for a channel whose ranks forward on arrival (NCCL's rings), of one phase (or
// consecutive phases of the same piece and successors: one), with d(r) = d[r] and the drains
// drain(r) = drains[r] (see `evaluate_rings`): the last arrival, or nullopt when the pass would
// not admit every flow, when the channel has several phases, or past the horizon.
std::optional<Time> forwarding_end(std::span<const UniformRingPhase* const> phases,
                                   std::span<const Time> d, std::span<const Time> drains) {
  const std::size_t n = d.size() / phases.size();
  std::int64_t k = 0;
  for (const UniformRingPhase* p : phases) {
    if (p->piece != phases.front()->piece || p->next != phases.front()->next) return std::nullopt;
    k += p->steps;
  }
  if (k <= 0) return std::nullopt;
  const std::vector<std::uint32_t>& next = phases.front()->next;
  const auto w = static_cast<std::size_t>(k - 1);  // the predecessors a rank's sends follow
  std::vector<bool> seen(n, false);
  std::vector<std::size_t> cycle;   // ranks in successor order
  std::vector<std::int64_t> steps;  // their d's, picoseconds
  std::vector<std::int64_t> extended;
  std::deque<std::size_t> window;
  std::int64_t end = 0;
  for (std::size_t start = 0; start < n; ++start) {
    if (seen[start]) continue;
    cycle.clear();
    for (std::size_t r = start; !seen[r]; r = next[r]) {
      seen[r] = true;
      cycle.push_back(r);
    }
    const std::size_t m = cycle.size();
    // The last arrival: the largest sum of k consecutive d's going backwards (`bound_ring`).
    steps.clear();
    for (const std::size_t r : cycle) steps.push_back(d[r].ps());
    const auto sums = cyclic_sums(steps, k);
    if (!sums) return std::nullopt;
    end = std::max(end, sums->second);
    // Admission: rank r's send of step s + 1 opens d(prev^(s+1)(r)) after its send of step s,
    // which holds r's links for drain(r): every d of the w nearest predecessors must exceed it.
    if (w == 0) continue;
    if (w >= m) {
      std::int64_t least = std::numeric_limits<std::int64_t>::max();
      for (const std::size_t r : cycle) least = std::min(least, d[r].ps());
      for (const std::size_t r : cycle) {
        if (!(least > drains[r].ps())) return std::nullopt;
      }
      continue;
    }
    // The w predecessors of cycle[i] are the positions i - w .. i - 1 (mod m): extended[i ..
    // i + w - 1] with extended[t] = d at position t - w; a sliding minimum over it.
    extended.clear();
    for (std::size_t t = 0; t < m + w; ++t) extended.push_back(d[cycle[(t + m - w) % m]].ps());
    window.clear();
    for (std::size_t t = 0; t + 1 < m + w; ++t) {
      while (!window.empty() && extended[window.back()] >= extended[t]) window.pop_back();
      window.push_back(t);
      if (t + 1 < w) continue;
      const std::size_t i = t + 1 - w;  // the window extended[i .. t] precedes cycle[i]
      while (window.front() < i) window.pop_front();
      if (!(extended[window.front()] > drains[cycle[i]].ps())) return std::nullopt;
    }
  }
  return Time::picoseconds(end);
}

}  // namespace

// Uniform rings, derived. Take one channel of one group, with phases p = 1..P of K_p steps;
// rank r's transfer in phase p takes d(r, p) = latency + drain_time(piece_p, slowest link) of
// its route to next_p[r]. Write a(r, k) for the arrival of rank r's send of step k and
// o(r, k) for the opening of its gate. The pass's rules give o(r, 0) = 0 and, since a rank
// waits for its own and its predecessor's sends of the step before (and only those: it
// receives one transfer per step, from its predecessor of that step, and later receives only
// come later), o(r, k) = max(a(r, k-1), a(q, k-1)) with q that predecessor, and
// a(r, k) = o(r, k) + d(r, phase of k) -- provided every flow is admitted, see below.
// Let D_p = max_r d(r, p). (i) By induction on k, every a(x, k) <= sum of D over the steps
// 0..k (each step adds one d of its phase to a maximum of arrivals of the step before).
// (ii) a(r, k) >= a(r, k-1) + d(r, phase of k), so a rank r* with d(r*, p) = D_p in every
// phase reaches that sum. When such a rank exists (checked; otherwise the pass answers),
// the channel's last arrival is exactly sum_p K_p * D_p, and the group's the maximum over its
// channels (they share no gate). Admission: when no two senders (group, channel, rank) have a
// link in common (checked; otherwise the pass answers) and every route has a positive latency,
// the flows on a link are one rank's, visited in step order, and each starts at
// o(r, k) >= a(r, k-1) = o(r, k-1) + latency + drain > the drain end of the one before: the
// pass admits every flow. Its link statistics are then, per link, the sums over that rank's
// steps of piece bytes (integers below 2^53, so the floating sums are exact) and drain times;
// its events two per flow. Each step's routes are the same (the same pair and flow key).
// Rings that forward on arrival (NCCL's), of one phase per channel (K steps, successor map
// next, predecessor q of r): the pass opens r's gate of step k at its latest receive of the
// steps before, a(q, k-1) (0 for k = 0), so a(r, k) = a(q, k-1) + d(r) is the sum of d over r
// and its k nearest predecessors and the channel ends at the largest sum of K consecutive d's
// going backwards around a cycle (as `bound_ring` derives it). Admission, when no two senders
// share a link (the same check): a link carries one rank's K flows in step order, and the
// flow of step k + 1 opens o(r, k+1) - o(r, k) = a(q, k) - a(q, k-1) = ... = d(q^(k+1)) (the
// (k+1)-th predecessor) after the one of step k, which holds the link until o(r, k) + drain(r);
// the pass admits it iff that d exceeds drain(r) (strictly: a flow starting as the previous
// drains is refused). So every flow is admitted iff, for every rank, each d of its K - 1
// nearest predecessors exceeds its drain (`forwarding_end`); otherwise the pass answers.
std::optional<UncontendedRun> UncontendedEvaluator::evaluate_rings(
    topo::Router& router, std::span<const GroupProgram> groups, std::uint64_t salt) {
  std::vector<std::vector<UniformRingPhase>> rings;
  rings.reserve(groups.size());
  for (const GroupProgram& group : groups) {
    if (group.program->ranks() != static_cast<int>(group.group.size())) return std::nullopt;
    rings.push_back(group.program->uniform_ring());
    if (rings.back().empty()) return std::nullopt;
  }
  std::vector<topo::LinkId> owned;  // links given an owner, reset on return
  UncontendedRun run;
  bool ok = true;
  std::uint64_t next_owner = 1;
  std::vector<Time> d;
  std::vector<Time> drains;
  for (std::size_t g = 0; g < groups.size() && ok; ++g) {
    const auto& phases = rings[g];
    const auto& devices = groups[g].group;
    const std::size_t n = devices.size();
    const bool own = groups[g].program->waits_for_own_sends();
    Time end;
    std::vector<std::uint16_t> channels;
    for (const auto& p : phases) {
      if (std::find(channels.begin(), channels.end(), p.channel) == channels.end()) {
        channels.push_back(p.channel);
      }
    }
    for (const std::uint16_t c : channels) {
      std::vector<const UniformRingPhase*> mine;  // the channel's phases, in step order
      for (const auto& p : phases) {
        if (p.channel == c) mine.push_back(&p);
      }
      // d(r, p) = latency + drain, the drains kept for the link sums.
      d.assign(mine.size() * n, Time::zero());
      drains.assign(mine.size() * n, Time::zero());
      std::vector<Time> top(mine.size());
      for (std::size_t r = 0; r < n && ok; ++r) {
        const std::uint64_t owner = next_owner + r;
        for (std::size_t q = 0; q < mine.size() && ok; ++q) {
          const UniformRingPhase& p = *mine[q];
          const auto path =
              claim_route(router, devices[r], devices[p.next[r]], c, salt, owner, owned);
          if (!path || path->latency <= Time::zero() || p.piece.count() <= 0) {
            ok = false;
            break;
          }
          const Time latency = path->latency;
          const Time drain = net::drain_time(p.piece, Bandwidth::bytes_per_second(path->rate));
          drains[q * n + r] = drain;
          d[q * n + r] = net::later(latency, drain);
          top[q] = std::max(top[q], d[q * n + r]);
        }
      }
      if (!ok) break;
      const std::optional<Time> channel_end =
          own ? own_sends_end(mine, d, top) : forwarding_end(mine, d, drains);
      if (!channel_end) {
        ok = false;
        break;
      }
      for (const UniformRingPhase* p : mine) {
        run.events += 2 * static_cast<std::uint64_t>(p->steps) * n;
      }
      end = std::max(end, *channel_end);
      // Every link of rank r's route in phase q carries its K_q pieces, one at a time.
      for (std::size_t r = 0; r < n && ok; ++r) {
        for (std::size_t q = 0; q < mine.size(); ++q) {
          const UniformRingPhase& p = *mine[q];
          const topo::DeviceId src = devices[r];
          const topo::DeviceId dst = devices[p.next[r]];
          router.route_into(src, dst, flow_key(src, dst, c, salt), route_);
          ok = ok && add_load(route_, static_cast<double>(p.piece.count()) * p.steps,
                              drains[q * n + r] * static_cast<std::int64_t>(p.steps));
        }
      }
      next_owner += n;
    }
    if (ok) run.durations.push_back(end);
  }
  return finish_derived(std::move(run), owned, ok);
}

std::optional<UncontendedEvaluator::SenderPath> UncontendedEvaluator::claim_route(
    topo::Router& router, topo::DeviceId src, topo::DeviceId dst, std::uint16_t channel,
    std::uint64_t salt, std::uint64_t owner, std::vector<topo::LinkId>& owned) {
  router.route_into(src, dst, flow_key(src, dst, channel, salt), route_);
  const auto all = topology_->links();
  SenderPath path{std::numeric_limits<double>::infinity(), Time::zero()};
  bool ok = !route_.empty();
  for (const topo::LinkId link : route_) {
    const double bandwidth = all[link].bandwidth.bytes_per_s();
    if (!(bandwidth > 0)) ok = false;  // the pass reports it
    path.rate = std::min(path.rate, bandwidth);
    path.latency += all[link].latency;
    if (owner_[link] == 0) {
      owner_[link] = owner;
      owned.push_back(link);
    } else if (owner_[link] != owner) {
      ok = false;  // two senders share a link
    }
  }
  if (!ok) return std::nullopt;
  return path;
}

bool UncontendedEvaluator::add_load(std::span<const topo::LinkId> route, double bytes, Time busy) {
  constexpr double kExactDouble = 9007199254740992.0;  // 2^53
  bool ok = true;
  for (const topo::LinkId link : route) {
    LinkState& state = links_[link];
    if (state.busy_until < Time::zero()) {
      used_.push_back(link);
      state.busy_until = Time::zero();
    }
    state.bytes += bytes;
    state.busy += busy;
    if (!(state.bytes < kExactDouble)) ok = false;
  }
  return ok;
}

std::optional<UncontendedRun> UncontendedEvaluator::finish_derived(
    UncontendedRun run, std::span<const topo::LinkId> owned, bool ok) {
  for (const topo::LinkId link : owned) owner_[link] = 0;
  if (!ok) {
    for (const topo::LinkId link : used_) links_[link] = LinkState{};
    used_.clear();
    return std::nullopt;
  }
  std::sort(used_.begin(), used_.end());
  run.links.reserve(used_.size());
  for (const topo::LinkId link : used_) {
    run.links.push_back(LinkUse{link, links_[link].bytes, links_[link].busy, 1});
  }
  return run;
}

namespace {

// The sum of the `k` entries of `cycle` ending at each position going backwards (position i and
// its k - 1 predecessors around the cycle: floor(k / m) laps of its total plus the k mod m
// nearest), into `out`; false when a sum would reach the horizon. Integer picoseconds: exact.
bool cyclic_windows(std::span<const std::int64_t> cycle, std::int64_t k,
                    std::vector<std::int64_t>& out) {
  const std::int64_t horizon = net::kHorizon.ps();
  const auto m = cycle.size();
  std::int64_t total = 0;
  for (const std::int64_t d : cycle) {
    if (d > horizon - 1 - total) return false;
    total += d;
  }
  const std::int64_t laps = k / static_cast<std::int64_t>(m);
  const auto rest = static_cast<std::size_t>(k % static_cast<std::int64_t>(m));
  if (total > 0 && laps > (horizon - 1) / total) return false;
  const std::int64_t base = laps * total;
  // The rest's window ending at position i, slid from the one ending at position m - 1.
  std::int64_t window = 0;
  for (std::size_t t = 0; t < rest; ++t) window += cycle[m - 1 - t];
  out.assign(m, 0);
  for (std::size_t i = 0; i < m; ++i) {
    if (rest > 0) window += cycle[i] - cycle[(i + m - rest) % m];
    if (window > horizon - 1 - base) return false;
    out[i] = base + window;
  }
  return true;
}

}  // namespace

// Rings that forward on arrival whose pieces differ by a byte (a buffer that does not split
// evenly into unsplit chunks: `BoundingRingPhase::carried`), derived, one phase per channel, when
// no two senders share a link (the owner check of `evaluate_rings`). Write K for the phase's
// steps, s and s + 1 for its two piece sizes, and for rank x d_x(b) = latency + drain(b, slowest
// link) of its route, Δ_x = drain(s + 1) − drain(s) >= 0 (a drain never shrinks as the piece
// grows). The pass opens r's gate of step k at its latest receive of the steps before, the
// arrivals a(q, i), i < k, of its predecessor q's sends (0 for k = 0), and r's send arrives
// d_r(b) later, b its piece. A piece travels: the one r sends in step k is the one q sent in
// step k − 1, so along the chain of forwards ending at r's send of step k, every hop carries
// that piece b and, once arrivals grow with the step (below), a(r, k) = the sum of d_x(b) over r
// and its k nearest predecessors. Then
//   a(q, k) − a(q, k − 1) = d_{q^k}(b') + Σ_{i<k} (d_{q^i}(b') − d_{q^i}(b)) >= D − k·Δ,
// b' and b the two chains' pieces, D = min_x d_x(s), Δ = max_x Δ_x: by induction on k, when
// D − (K − 1)·Δ > 0 the arrivals of every rank grow with the step, so the gate is the
// predecessor's last arrival, as assumed. Admission: a link carries one sender's K flows in step
// order, and r's send of step k + 1 opens a(q, k) − a(q, k − 1) (or a(q, 0), k = 0) after its
// send of step k, which holds r's links for drain_r(b) <= max_x drain_x(s + 1) = M; so when
// D − (K − 1)·Δ > M (checked; otherwise the pass answers, which may still admit every flow)
// every flow is admitted, and the channel's last arrival is the largest a(r, K − 1): over r,
// the window of K consecutive d_x(carried[r]) going backwards from r. Link sums as the pass
// adds them: r's route carries sent[r] bytes (an integer below 2^53, exact as a double in any
// order) and its drains, (sent[r] − K·s) pieces of s + 1 bytes and the rest of s; two events per
// transfer (pieces are not empty). The group ends at its latest channel.
std::optional<UncontendedRun> UncontendedEvaluator::evaluate_carried_rings(
    topo::Router& router, std::span<const GroupProgram> groups, std::uint64_t salt) {
  std::vector<std::vector<BoundingRingPhase>> rings;
  rings.reserve(groups.size());
  for (const GroupProgram& group : groups) {
    const std::size_t n = group.group.size();
    if (group.program->waits_for_own_sends()) return std::nullopt;
    rings.push_back(bounding_phases(*group.program, n));
    const std::vector<BoundingRingPhase>& phases = rings.back();
    if (phases.empty()) return std::nullopt;
    for (std::size_t q = 0; q < phases.size(); ++q) {
      if (phases[q].carried.size() != n) return std::nullopt;
      for (std::size_t o = 0; o < q; ++o) {
        if (phases[o].channel == phases[q].channel) return std::nullopt;  // two phases
      }
    }
  }
  const std::int64_t horizon = net::kHorizon.ps();
  std::vector<topo::LinkId> owned;  // links given an owner, reset on return
  UncontendedRun run;
  bool ok = true;
  std::uint64_t next_owner = 1;
  struct Sender {
    std::uint32_t route_at = 0;
    std::uint32_t hops = 0;
    std::int64_t small_drain = 0;  // drain(s), picoseconds
    std::int64_t large_drain = 0;  // drain(s + 1)
    std::int64_t small_d = 0;      // latency + drain(s)
    std::int64_t large_d = 0;      // latency + drain(s + 1)
  };
  std::vector<Sender> senders;
  std::vector<bool> seen;
  std::vector<std::uint32_t> cycle;
  std::vector<std::int64_t> values;
  std::vector<std::int64_t> small_windows;
  std::vector<std::int64_t> large_windows;
  for (std::size_t g = 0; g < groups.size() && ok; ++g) {
    const auto& devices = groups[g].group;
    const std::size_t n = devices.size();
    Time end;
    for (const BoundingRingPhase& p : rings[g]) {
      const std::int64_t k = p.steps;
      const std::int64_t s = p.least.count();
      routes_.clear();
      senders.assign(n, Sender{});
      std::int64_t least_d = std::numeric_limits<std::int64_t>::max();
      std::int64_t most_drain = 0;
      std::int64_t most_gap = 0;  // the largest drain(s + 1) − drain(s)
      for (std::size_t r = 0; r < n && ok; ++r) {
        const auto path = claim_route(router, devices[r], devices[p.next[r]], p.channel, salt,
                                      next_owner + r, owned);
        // Drains far from the horizon only (`drain_time` would throw at it; the pass answers).
        if (!path || path->latency.ps() >= horizon / 4 ||
            static_cast<double>(s + 1) * 1e12 / path->rate >= static_cast<double>(horizon / 4)) {
          ok = false;
          break;
        }
        const Time latency = path->latency;
        const double rate = path->rate;
        Sender& x = senders[r];
        x.route_at = static_cast<std::uint32_t>(routes_.size());
        x.hops = static_cast<std::uint32_t>(route_.size());
        routes_.insert(routes_.end(), route_.begin(), route_.end());
        const Bandwidth slowest = Bandwidth::bytes_per_second(rate);
        x.small_drain = net::drain_time(p.least, slowest).ps();
        x.large_drain = net::drain_time(Bytes(s + 1), slowest).ps();
        x.small_d = latency.ps() + x.small_drain;
        x.large_d = latency.ps() + x.large_drain;
        least_d = std::min(least_d, x.small_d);
        most_drain = std::max(most_drain, x.large_drain);
        most_gap = std::max(most_gap, x.large_drain - x.small_drain);
      }
      if (!ok) break;
      // Admission and growing arrivals: D − (K − 1)·Δ > M.
      const std::int64_t slack = least_d - most_drain;
      if (slack <= 0 || (most_gap > 0 && k - 1 > (slack - 1) / most_gap)) {
        ok = false;
        break;
      }
      // The last arrivals, cycle by cycle of the successor map.
      std::int64_t channel_end = 0;
      seen.assign(n, false);
      for (std::size_t start = 0; start < n && ok; ++start) {
        if (seen[start]) continue;
        cycle.clear();
        for (std::size_t r = start; !seen[r]; r = p.next[r]) {
          seen[r] = true;
          cycle.push_back(static_cast<std::uint32_t>(r));
        }
        values.clear();
        for (const std::uint32_t r : cycle) values.push_back(senders[r].small_d);
        ok = cyclic_windows(values, k, small_windows);
        values.clear();
        for (const std::uint32_t r : cycle) values.push_back(senders[r].large_d);
        ok = ok && cyclic_windows(values, k, large_windows);
        for (std::size_t i = 0; i < cycle.size() && ok; ++i) {
          const std::int64_t piece = p.carried[cycle[i]];
          if (piece != s && piece != s + 1) ok = false;
          channel_end = std::max(channel_end, piece == s ? small_windows[i] : large_windows[i]);
        }
      }
      if (!ok) break;
      end = std::max(end, Time::picoseconds(channel_end));
      run.events += 2 * static_cast<std::uint64_t>(k) * n;
      // Every link of rank r's route carries its K pieces, one at a time.
      for (std::size_t r = 0; r < n && ok; ++r) {
        const Sender& x = senders[r];
        if (s > (std::numeric_limits<std::int64_t>::max() - 1) / k) {
          ok = false;
          break;
        }
        const std::int64_t large = p.sent[r] - k * s;
        if (large < 0 || large > k) {
          ok = false;
          break;
        }
        // Below the channel's end (each flow drains after the one before it on the route).
        const Time busy = Time::picoseconds(x.small_drain * (k - large) + x.large_drain * large);
        ok = add_load(std::span(routes_).subspan(x.route_at, x.hops),
                      static_cast<double>(p.sent[r]), busy);
      }
      next_owner += n;
    }
    if (ok) run.durations.push_back(end);
  }
  return finish_derived(std::move(run), owned, ok);
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
