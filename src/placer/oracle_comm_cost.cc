#include "nest/placer/oracle_comm_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nest/coll/closed_form.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/topo/metrics.h"
#include "nest/topo/router.h"

namespace nest::placer {
namespace {

// The layout bounds kept (`OracleCommCost::bounds_`, ~140 bytes each with the table's node and
// bucket): ~36 MB at most.
constexpr std::size_t kBoundsKept = std::size_t{1} << 18;

constexpr Bytes kLowSize = Bytes::mebibytes(64);
constexpr Bytes kHighSize = Bytes::mebibytes(256);

coll::Operation to_operation(workload::CollectiveOp op) {
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      return coll::Operation::kAllReduce;
    case workload::CollectiveOp::kAllGather:
      return coll::Operation::kAllGather;
    case workload::CollectiveOp::kReduceScatter:
      return coll::Operation::kReduceScatter;
    case workload::CollectiveOp::kAllToAll:
      return coll::Operation::kAllToAll;
  }
  return coll::Operation::kAllReduce;
}

// The largest sum of link rates into or out of one device.
Bandwidth largest_injection(const topo::Topology& t) {
  std::vector<double> in(t.num_devices(), 0);
  std::vector<double> out(t.num_devices(), 0);
  for (const auto& link : t.links()) {
    if (t.is_device(link.src)) out[link.src] += link.bandwidth.bytes_per_s();
    if (t.is_device(link.dst)) in[link.dst] += link.bandwidth.bytes_per_s();
  }
  double best = 0;
  for (std::size_t d = 0; d < t.num_devices(); ++d) best = std::max({best, in[d], out[d]});
  return Bandwidth::bytes_per_second(best);
}

// A bound of `seconds` in whole picoseconds, rounded down (and a billionth below) so that it
// stays a lower bound. Throws `Error` (input) beyond 2^62 ps.
Time lower_bound_ps(double seconds) {
  return Time::picoseconds(
      static_cast<std::int64_t>(std::floor(checked_ps(seconds * 1e12 * (1 - 1e-9)))));
}

// The time at `size` on the line through (low, t_low) and (high, t_high), rounded to 1 ps.
Time on_line(Time t_low, Time t_high, Bytes size) {
  const double slope =
      static_cast<double>((t_high - t_low).ps()) / (kHighSize - kLowSize).as_double();
  const double t = static_cast<double>(t_low.ps()) + slope * (size - kLowSize).as_double();
  return Time::picoseconds(rounded_ps(t));
}

void check_range(const GroupLayout& layout, const topo::Topology& topology) {
  if (layout.end() > topology.num_devices()) {
    throw Error::input("a device group lies beyond the topology's devices",
                       {.key = "devices",
                        .value = std::to_string(layout.end()),
                        .expected = fmt::format("at most {}", topology.num_devices())});
  }
}

// Calls f(first device of group g) for g = 0, 1, ... in order, without a division per device.
template <class F>
void for_each_group(const GroupLayout& layout, F&& f) {
  const auto& ax = layout.groups;
  for (int g2 = 0; g2 < ax[2].count; ++g2) {
    const topo::DeviceId b2 = layout.base + static_cast<std::uint32_t>(g2) * ax[2].stride;
    for (int g1 = 0; g1 < ax[1].count; ++g1) {
      const topo::DeviceId b1 = b2 + static_cast<std::uint32_t>(g1) * ax[1].stride;
      for (int g0 = 0; g0 < ax[0].count; ++g0)
        f(b1 + static_cast<std::uint32_t>(g0) * ax[0].stride);
    }
  }
}

}  // namespace

OracleCommCost::OracleCommCost(const topo::Topology& topology, OracleOptions options)
    : topology_(topology),
      oracle_(topology,
              coll::OracleSettings{
                  .seed = options.seed, .ideal = options.ideal, .threads = options.threads}),
      options_(options),
      injection_bound_(largest_injection(topology)) {
  const int d0 = topology.domain_sizes().front();
  const auto devices = topology.num_devices();
  if (d0 <= 0 || static_cast<std::size_t>(d0) >= devices) return;
  domain_size_ = d0;
  // A node's domain: its own for a device; for a switch, the domain of its devices when all its
  // links lead to devices of one domain (an NVSwitch); none otherwise.
  std::vector<int> domain(topology.num_nodes(), -1);
  for (std::size_t v = 0; v < devices; ++v) domain[v] = static_cast<int>(v) / d0;
  for (std::size_t v = devices; v < topology.num_nodes(); ++v) {
    int only = -1;
    bool exclusive = true;
    for (const auto l : topology.out_links(static_cast<topo::NodeId>(v))) {
      const auto w = topology.link(l).dst;
      if (!topology.is_device(w)) {
        exclusive = false;
        break;
      }
      const int dw = static_cast<int>(w) / d0;
      if (only >= 0 && dw != only) {
        exclusive = false;
        break;
      }
      only = dw;
    }
    if (exclusive) domain[v] = only;
  }
  const std::size_t domains = devices / static_cast<std::size_t>(d0);
  exit_out_.assign(domains, 0);
  exit_in_.assign(domains, 0);
  out_.assign(domains, 0);
  in_.assign(domains, 0);
  dirty_.assign(domains, 0);
  members_.assign(domains, 0);
  pair_count_.assign(domains, 0);
  for (const auto& link : topology.links()) {
    const int a = domain[link.src];
    const int b = domain[link.dst];
    if (a == b) continue;
    if (a >= 0) exit_out_[static_cast<std::size_t>(a)] += link.bandwidth.bytes_per_s();
    if (b >= 0) exit_in_[static_cast<std::size_t>(b)] += link.bandwidth.bytes_per_s();
  }
  // A device's own exit links bound its traffic out of the domain only when no route passes
  // through another device: the rail-optimized generator guarantees it; a device with one link
  // cannot forward.
  bool single_links = true;
  for (std::size_t v = 0; v < devices && single_links; ++v) {
    single_links = topology.out_links(static_cast<topo::NodeId>(v)).size() == 1;
  }
  if (topology.family() != topo::Family::kRailOptimized && !single_links) return;
  device_out_.assign(devices, 0);
  device_in_.assign(devices, 0);
  for (const auto& link : topology.links()) {
    if (domain[link.src] == domain[link.dst]) continue;
    if (topology.is_device(link.src)) device_out_[link.src] += link.bandwidth.bytes_per_s();
    if (topology.is_device(link.dst)) device_in_[link.dst] += link.bandwidth.bytes_per_s();
  }
}

double OracleCommCost::device_seconds(topo::DeviceId a, topo::DeviceId b, double bytes_out,
                                      double bytes_in) const {
  if (device_out_.empty()) return 0;
  double seconds = 0;
  if (device_out_[a] > 0) seconds = std::max(seconds, bytes_out / device_out_[a]);
  if (device_in_[b] > 0) seconds = std::max(seconds, bytes_in / device_in_[b]);
  return seconds;
}

void OracleCommCost::add_out(std::uint32_t x, double bytes) {
  if (!dirty_[x]) {
    dirty_[x] = 1;
    dirty_list_.push_back(x);
  }
  out_[x] += bytes;
}

void OracleCommCost::add_in(std::uint32_t x, double bytes) {
  if (!dirty_[x]) {
    dirty_[x] = 1;
    dirty_list_.push_back(x);
  }
  in_[x] += bytes;
}

Time OracleCommCost::exit_bound() {
  // The maximum over the domains a query touched: untouched domains hold zero bytes and
  // contributed nothing to the maximum over all domains, and a maximum does not depend on the
  // order it is taken in. Resets the buffers for the next query.
  double seconds = 0;
  for (const auto x : dirty_list_) {
    if (out_[x] > 0 && exit_out_[x] > 0) seconds = std::max(seconds, out_[x] / exit_out_[x]);
    if (in_[x] > 0 && exit_in_[x] > 0) seconds = std::max(seconds, in_[x] / exit_in_[x]);
    out_[x] = 0;
    in_[x] = 0;
    dirty_[x] = 0;
  }
  dirty_list_.clear();
  return lower_bound_ps(seconds);
}

std::optional<coll::Algorithm> OracleCommCost::fixed_algorithm(
    workload::CollectiveOp op, std::span<const std::vector<topo::DeviceId>> groups) const {
  std::optional<coll::Algorithm> fixed;
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      fixed = options_.allreduce;
      break;
    case workload::CollectiveOp::kAllGather:
      fixed = options_.all_gather;
      break;
    case workload::CollectiveOp::kReduceScatter:
      fixed = options_.reduce_scatter;
      break;
    case workload::CollectiveOp::kAllToAll:
      fixed = options_.all_to_all;
      break;
  }
  if (!fixed && !oracle_.calibrated())
    fixed = coll::default_algorithm(topology_, to_operation(op), groups);
  return fixed;
}

// Under a collective model the algorithm is the tuner's (or runs in several channels), so the
// bounds hold for every algorithm: what information must cross. Allreduce: every rank receives
// at least (n-1)/n of the buffer (the flat all-gather bound), and every domain a group spans,
// when it spans several, imports and exports at least the whole buffer (each element of its
// result needs the others' contributions, theirs its own). All-gather (reduce-scatter): a
// domain imports (exports) the chunks of the members outside it. All-to-all: exactly the bytes
// its members send out of (receive into) it, which also bound each device's own links.
//
// Cost: O(devices of the layout) additions into buffers the object owns (no allocation once
// they have grown to the largest group), and the maximum over the domains the layout touches.
Time OracleCommCost::calibrated_bound(workload::CollectiveOp op, Bytes size,
                                      const GroupLayout& layout) {
  const workload::CollectiveOp flat_op =
      op == workload::CollectiveOp::kAllReduce ? workload::CollectiveOp::kAllGather : op;
  const Time flat = CommCost::collective_bound(flat_op, size, layout);
  const int n = layout.group_size();
  if (domain_size_ == 0 || n <= 1 || size.count() <= 0) return flat;
  if (layout.end() > topology_.num_devices()) return flat;
  double device = 0;
  const auto d0 = static_cast<std::uint32_t>(domain_size_);
  const double s = size.as_double();
  const bool all_to_all = op == workload::CollectiveOp::kAllToAll;
  // crossing_[k]: k additions of s/n from zero, the bytes a member with k peers outside its
  // domain sends out of it, summed as the peers are visited one by one.
  if (all_to_all) fill_crossing(s / n, n);
  const std::uint32_t stride = layout.member.stride;
  for_each_group(layout, [&](std::uint32_t first) {
    group_touched_.clear();
    for (int m = 0; m < n; ++m) {
      const auto x = (first + static_cast<std::uint32_t>(m) * stride) / d0;
      if (members_[x]++ == 0) group_touched_.push_back(x);
    }
    for (const auto x : group_touched_) {
      const double outside = static_cast<double>(n - members_[x]) / n;
      if (outside > 0) {
        switch (op) {
          case workload::CollectiveOp::kAllReduce:
            add_out(x, s);
            add_in(x, s);
            break;
          case workload::CollectiveOp::kAllGather:
            add_in(x, outside * s);
            break;
          case workload::CollectiveOp::kReduceScatter:
            add_out(x, outside * s);
            break;
          case workload::CollectiveOp::kAllToAll:
            add_out(x, members_[x] * outside * s);
            add_in(x, members_[x] * outside * s);
            break;
        }
      }
    }
    if (all_to_all) {
      // Member m's peers outside its domain: n minus the members in it (m among them).
      for (int m = 0; m < n; ++m) {
        const auto a = first + static_cast<std::uint32_t>(m) * stride;
        const double crossing = crossing_[static_cast<std::size_t>(n - members_[a / d0])];
        device = std::max(device, device_seconds(a, a, crossing, crossing));
      }
    }
    for (const auto x : group_touched_) members_[x] = 0;
  });
  // The exit bound first: it clears the buffers, which the device bound's range error would
  // otherwise leave holding this query's bytes for the next one.
  const Time exit = exit_bound();
  return std::max({flat, exit, lower_bound_ps(device)});
}

void OracleCommCost::fill_crossing(double step, int n) {
  crossing_.resize(static_cast<std::size_t>(n) + 1);
  double sum = 0;
  crossing_[0] = 0;
  for (int k = 1; k <= n; ++k) {
    sum += step;
    crossing_[static_cast<std::size_t>(k)] = sum;
  }
}

Time OracleCommCost::collective_bound(workload::CollectiveOp op, Bytes size,
                                      const GroupLayout& layout) {
  const LayoutKey key = LayoutKey::of(0, static_cast<int>(op), size.count(), layout);
  if (const auto it = bounds_.find(key); it != bounds_.end()) return it->second;
  const Time bound = layout_bound(op, size, layout);
  if (bounds_.size() >= kBoundsKept) bounds_.clear();
  bounds_.emplace(key, bound);
  return bound;
}

Time OracleCommCost::layout_bound(workload::CollectiveOp op, Bytes size,
                                  const GroupLayout& layout) {
  if (oracle_.calibrated()) return calibrated_bound(op, size, layout);
  const Time flat = CommCost::collective_bound(op, size, layout);
  const int n = layout.group_size();
  if (domain_size_ == 0 || n <= 1 || size.count() <= 0) return flat;
  if (layout.end() > topology_.num_devices()) return flat;
  const bool ring_family = op != workload::CollectiveOp::kAllToAll;
  const coll::Algorithm algorithm = *fixed_algorithm(op);
  double per_hop = 0;
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      per_hop = 2.0 * (n - 1) / n * size.as_double();
      break;
    case workload::CollectiveOp::kAllGather:
    case workload::CollectiveOp::kReduceScatter:
      per_hop = 1.0 * (n - 1) / n * size.as_double();
      break;
    case workload::CollectiveOp::kAllToAll:
      per_hop = size.as_double() / n;
      break;
  }
  if (ring_family ? algorithm != coll::Algorithm::kRing : algorithm != coll::Algorithm::kPairwise) {
    return flat;
  }
  double device = 0;  // seconds, the device-exit bound
  const auto d0 = static_cast<std::uint32_t>(domain_size_);
  const std::uint32_t stride = layout.member.stride;
  if (ring_family) {
    for_each_group(layout, [&](std::uint32_t first) {
      for (int m = 0; m < n; ++m) {
        // Each member sends one ring hop (and receives one).
        const auto a = first + static_cast<std::uint32_t>(m) * stride;
        const auto b = first + static_cast<std::uint32_t>((m + 1) % n) * stride;
        if (a / d0 == b / d0) continue;
        add_out(a / d0, per_hop);
        add_in(b / d0, per_hop);
        device = std::max(device, device_seconds(a, b, per_hop, per_hop));
      }
    });
  } else {
    // Pairwise: member a sends per_hop to each of its n - members(a's domain) peers outside
    // its domain, and each of them receives per_hop from a. Every addition into a domain's
    // sum adds the same per_hop, so a sum depends only on how many there are: they are
    // counted per domain (members · outsiders per group) and summed one by one at the end, the
    // same additions in the same values as pair by pair.
    fill_crossing(per_hop, n);
    for_each_group(layout, [&](std::uint32_t first) {
      group_touched_.clear();
      for (int m = 0; m < n; ++m) {
        const auto x = (first + static_cast<std::uint32_t>(m) * stride) / d0;
        if (members_[x]++ == 0) group_touched_.push_back(x);
      }
      for (int m = 0; m < n; ++m) {
        const auto a = first + static_cast<std::uint32_t>(m) * stride;
        const double crossing = crossing_[static_cast<std::size_t>(n - members_[a / d0])];
        device = std::max(device, device_seconds(a, a, crossing, crossing));
      }
      for (const auto x : group_touched_) {
        const auto pairs =
            static_cast<std::uint64_t>(members_[x]) * static_cast<std::uint64_t>(n - members_[x]);
        if (pairs > 0) {
          add_out(x, 0);
          add_in(x, 0);
          pair_count_[x] += pairs;
        }
        members_[x] = 0;
      }
    });
    for (const auto x : dirty_list_) {
      double sum = 0;
      for (std::uint64_t k = 0; k < pair_count_[x]; ++k) sum += per_hop;
      out_[x] = sum;
      in_[x] = sum;
      pair_count_[x] = 0;
    }
  }
  // The exit bound first: it clears the buffers, which the device bound's range error would
  // otherwise leave holding this query's bytes for the next one.
  const Time exit = exit_bound();
  return std::max({flat, exit, lower_bound_ps(device)});
}

Time OracleCommCost::transfer_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  const LayoutKey key = LayoutKey::of(1, 0, size.count(), from, to);
  if (const auto it = bounds_.find(key); it != bounds_.end()) return it->second;
  const Time bound = pairs_bound(size, from, to);
  if (bounds_.size() >= kBoundsKept) bounds_.clear();
  bounds_.emplace(key, bound);
  return bound;
}

Time OracleCommCost::pairs_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  const Time flat = CommCost::transfer_bound(size, from, to);
  if (domain_size_ == 0 || size.count() <= 0) return flat;
  if (from.end() > topology_.num_devices() || to.end() > topology_.num_devices()) return flat;
  double device = 0;
  const auto d0 = static_cast<std::uint32_t>(domain_size_);
  const double bytes = size.as_double();
  // Several groups are priced at a class's mean wait (`transfer`), which a domain's exit, shared
  // by the groups, does not bound; every pair's own device links still bound its group's wait,
  // and so the wait of every group whose routes cross the same rates.
  const bool exits = from.group_count() == 1;
  int g = 0;
  for_each_group(from, [&](std::uint32_t first) {
    const auto to_first = to.device(g++, 0);
    for (int m = 0; m < from.group_size(); ++m) {
      const auto a = first + static_cast<std::uint32_t>(m) * from.member.stride;
      const auto b = to_first + static_cast<std::uint32_t>(m) * to.member.stride;
      if (a / d0 == b / d0) continue;
      if (exits) {
        add_out(a / d0, bytes);
        add_in(b / d0, bytes);
      }
      device = std::max(device, device_seconds(a, b, bytes, bytes));
    }
  });
  // The exit bound first: it clears the buffers, which the device bound's range error would
  // otherwise leave holding this query's bytes for the next one.
  const Time exit = exit_bound();
  return std::max({flat, exit, lower_bound_ps(device)});
}

Time OracleCommCost::exact_collective(workload::CollectiveOp op, const coll::CollectiveSpec& spec,
                                      const GroupLayout& layout) {
  const auto groups = layout.expand();
  const std::optional<coll::Algorithm> fixed = fixed_algorithm(op, groups);
  GroupChoice choice{op, spec.size, layout};
  coll::OracleChoice c;
  if (fixed) {
    coll::CollectiveSpec s = spec;
    s.algorithm = *fixed;
    c = oracle_.priced(s, groups);
  } else {
    c = oracle_.fastest(spec, groups);
    choice.tuned = true;
  }
  choice.algorithm = c.algorithm;
  choice.protocol = c.protocol;
  choice.channels = c.channels;
  choice.time = c.answer.slowest;
  const ChoiceKey key{static_cast<int>(op), spec.size.count(), layout};
  if (choices_.insert_or_assign(key, choice).second) asked_.push_back(key);
  return choice.time;
}

Time OracleCommCost::collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
  if (layout.group_size() <= 1 || size.count() <= 0) return Time::zero();
  if (!options_.interpolate_sizes) {
    // Asked before: the time recorded with its choice (what `exact_collective` returned).
    const auto it = choices_.find(ChoiceKey{static_cast<int>(op), size.count(), layout});
    if (it != choices_.end()) return it->second.time;
  }
  check_range(layout, topology_);
  coll::CollectiveSpec spec = spec_of(op, size);
  if (!options_.interpolate_sizes) return exact_collective(op, spec, layout);
  spec.size = kLowSize;
  const Time low = exact_collective(op, spec, layout);
  spec.size = kHighSize;
  const Time high = exact_collective(op, spec, layout);
  if (auto it = choices_.find(ChoiceKey{static_cast<int>(op), kHighSize.count(), layout});
      it != choices_.end()) {
    GroupChoice c = it->second;
    c.size = size;
    c.time = on_line(low, high, size);
    const ChoiceKey key{static_cast<int>(op), size.count(), layout};
    if (choices_.insert_or_assign(key, c).second) asked_.push_back(key);
  }
  return on_line(low, high, size);
}

coll::CollectiveSpec OracleCommCost::spec_of(workload::CollectiveOp op, Bytes size) const {
  coll::CollectiveSpec spec;
  spec.op = to_operation(op);
  spec.algorithm = coll::default_algorithm(spec.op);
  spec.size = size;
  // Under a collective model resolve chooses pipelining and channels as NCCL would.
  if (oracle_.calibrated()) {
    spec.chunks = 0;
    spec.channels = 0;
  }
  return spec;
}

Time OracleCommCost::collective_pass_bound(workload::CollectiveOp op, Bytes size,
                                           const GroupLayout& layout) {
  if (layout.group_size() <= 1 || size.count() <= 0) return Time::zero();
  if (options_.interpolate_sizes) return collective_bound(op, size, layout);
  const ChoiceKey key{static_cast<int>(op), size.count(), layout};
  // The answer once known; a bound once computed (it stays a bound as answers become known).
  if (const auto it = choices_.find(key); it != choices_.end()) return it->second.time;
  if (const auto it = pass_bounds_.find(key); it != pass_bounds_.end()) return it->second;
  const Time cheap = collective_bound(op, size, layout);
  check_range(layout, topology_);
  coll::CollectiveSpec spec = spec_of(op, size);
  const auto groups = layout.expand();
  const std::optional<coll::Algorithm> fixed = fixed_algorithm(op, groups);
  if (fixed) spec.algorithm = *fixed;
  const Time bound = std::max(
      cheap, fixed ? oracle_.lower_bound(spec, groups) : oracle_.fastest_lower_bound(spec, groups));
  pass_bounds_.emplace(key, bound);
  return bound;
}

std::optional<Time> OracleCommCost::collective_within(workload::CollectiveOp op, Bytes size,
                                                      const GroupLayout& layout, Time within) {
  if (options_.interpolate_sizes || layout.group_size() <= 1 || size.count() <= 0) {
    return CommCost::collective_within(op, size, layout, within);
  }
  check_range(layout, topology_);
  coll::CollectiveSpec spec = spec_of(op, size);
  const auto groups = layout.expand();
  if (const std::optional<coll::Algorithm> fixed = fixed_algorithm(op, groups)) {
    spec.algorithm = *fixed;
    const auto answer = oracle_.collective_within(spec, groups, within);
    return answer ? std::optional<Time>(answer->slowest) : std::nullopt;
  }
  const auto choice = oracle_.fastest_within(spec, groups, within);
  return choice ? std::optional<Time>(choice->answer.slowest) : std::nullopt;
}

coll::CollectiveSpec OracleCommCost::like_spec(workload::CollectiveOp op, Bytes size,
                                               const GroupLayout& like) {
  (void)collective(op, size, like);
  const std::optional<GroupChoice> alone = choice(op, size, like);
  if (!alone) throw Error::internal("collective_like: no choice recorded for the layout alone");
  coll::CollectiveSpec spec = spec_of(op, size);
  if (alone->tuned) return coll::tuner_candidate(spec, alone->algorithm);
  spec.algorithm = alone->algorithm;  // as `exact_collective` runs a fixed algorithm
  return spec;
}

Time OracleCommCost::collective_like(workload::CollectiveOp op, Bytes size,
                                     const GroupLayout& layout, const GroupLayout& like) {
  if (layout.group_size() <= 1 || size.count() <= 0) return Time::zero();
  const LayoutKey key = LayoutKey::of(0, static_cast<int>(op), size.count(), layout, like);
  if (const auto it = joint_.find(key); it != joint_.end()) return it->second;
  check_range(layout, topology_);
  const coll::CollectiveSpec spec = like_spec(op, size, like);
  const Time time = oracle_.priced(spec, layout.expand()).answer.slowest;
  joint_.emplace(key, time);
  return time;
}

Time OracleCommCost::collective_like_bound(workload::CollectiveOp op, Bytes size,
                                           const GroupLayout& layout, const GroupLayout& like) {
  if (layout.group_size() <= 1 || size.count() <= 0) return Time::zero();
  if (options_.interpolate_sizes) return collective_bound(op, size, layout);
  const LayoutKey key = LayoutKey::of(0, static_cast<int>(op), size.count(), layout, like);
  if (const auto it = joint_.find(key); it != joint_.end()) return it->second;
  if (const auto it = joint_bounds_.find(key); it != joint_bounds_.end()) return it->second;
  check_range(layout, topology_);
  const coll::CollectiveSpec spec = like_spec(op, size, like);
  const Time bound =
      std::max(collective_bound(op, size, layout), oracle_.lower_bound(spec, layout.expand()));
  joint_bounds_.emplace(key, bound);
  return bound;
}

bool OracleCommCost::groups_apart(workload::CollectiveOp op, Bytes size, const GroupLayout& layout,
                                  int per_part) {
  if (options_.interpolate_sizes || per_part <= 0) return false;
  if (layout.group_size() <= 1 || size.count() <= 0 || layout.group_count() <= per_part) {
    return true;
  }
  const ApartKey key{ChoiceKey{static_cast<int>(op), size.count(), layout}, per_part};
  if (const auto it = apart_.find(key); it != apart_.end()) return it->second;
  check_range(layout, topology_);
  const auto groups = layout.expand();
  const auto n = static_cast<std::size_t>(per_part);
  const coll::CollectiveSpec spec = spec_of(op, size);
  bool apart = true;
  try {
    // Fixed algorithms (the options', or the default of an uncalibrated network, per part's
    // groups, as `exact_collective` fixes them for `like`), else every tuner candidate.
    std::vector<coll::Algorithm> fixed;
    bool tuned = false;
    for (std::size_t first = 0; first < groups.size(); first += n) {
      const auto a =
          fixed_algorithm(op, std::span(groups).subspan(first, std::min(n, groups.size() - first)));
      if (!a) {
        tuned = true;
      } else if (std::find(fixed.begin(), fixed.end(), *a) == fixed.end()) {
        fixed.push_back(*a);
      }
    }
    if (tuned) apart = oracle_.parts_apart(spec, groups, n, true);
    for (std::size_t i = 0; i < fixed.size() && apart; ++i) {
      coll::CollectiveSpec s = spec;
      s.algorithm = fixed[i];
      apart = oracle_.parts_apart(s, groups, n);
    }
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInput) throw;
    apart = false;  // priced as before, which reports it
  }
  apart_.emplace(key, apart);
  return apart;
}

std::optional<GroupChoice> OracleCommCost::choice(workload::CollectiveOp op, Bytes size,
                                                  const GroupLayout& layout) const {
  const auto it = choices_.find(ChoiceKey{static_cast<int>(op), size.count(), layout});
  if (it == choices_.end()) return std::nullopt;
  return it->second;
}

std::vector<GroupChoice> OracleCommCost::choices() const {
  std::vector<GroupChoice> out;
  out.reserve(asked_.size());
  for (const ChoiceKey& k : asked_) out.push_back(choices_.at(k));
  return out;
}

std::size_t OracleCommCost::ChoiceKeyHash::operator()(const ChoiceKey& k) const noexcept {
  return hash_mix(hash_mix(k.layout.hash(), static_cast<std::uint64_t>(k.op)),
                  static_cast<std::uint64_t>(k.size));
}

std::size_t OracleCommCost::ApartKeyHash::operator()(const ApartKey& k) const noexcept {
  return hash_mix(ChoiceKeyHash{}(k.choice), static_cast<std::uint64_t>(k.per_part));
}

Time OracleCommCost::exact_transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  std::vector<topo::DeviceId> src;
  std::vector<topo::DeviceId> dst;
  for (int g = 0; g < from.group_count(); ++g) {
    for (int m = 0; m < from.group_size(); ++m) {
      src.push_back(from.device(g, m));
      dst.push_back(to.device(g, m));
    }
  }
  // A replica's next stage waits for that replica's shards only (see `transfers`).
  return oracle_.transfers(size, src, dst, static_cast<std::size_t>(from.group_size()));
}

Time OracleCommCost::transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  if (size.count() <= 0) return Time::zero();
  check_range(from, topology_);
  check_range(to, topology_);
  if (!options_.interpolate_sizes) {
    const LayoutKey key = LayoutKey::of(0, 0, size.count(), from, to);
    if (const auto it = transfers_.find(key); it != transfers_.end()) return it->second;
    const Time time = exact_transfer(size, from, to);
    transfers_.emplace(key, time);
    return time;
  }
  return on_line(exact_transfer(kLowSize, from, to), exact_transfer(kHighSize, from, to), size);
}

int OracleCommCost::scale_up_size() const noexcept { return topology_.domain_sizes().front(); }

std::string OracleCommCost::describe() const {
  return fmt::format("collective oracle on {} ({} devices)", topology_.name(),
                     topology_.num_devices());
}

FlatCommCost flat_network_for(const topo::Topology& topology, int scale_up_size) {
  const double share = topo::bisection_bandwidth(topology).bytes_per_s() /
                       std::max<double>(1, static_cast<double>(topology.num_devices() / 2));
  topo::Router router(topology);
  const auto route = router.route(0, static_cast<topo::DeviceId>(topology.num_devices() - 1));
  return FlatCommCost(Bandwidth::bytes_per_second(share),
                      coll::route_properties(topology, route).latency, scale_up_size);
}

}  // namespace nest::placer
