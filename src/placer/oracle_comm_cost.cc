#include "nest/placer/oracle_comm_cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "nest/core/error.h"

namespace nest::placer {
namespace {

constexpr Bytes kLowSize = Bytes::mebibytes(64);
constexpr Bytes kHighSize = Bytes::mebibytes(256);

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

// The time at `size` on the line through (low, t_low) and (high, t_high), rounded to 1 ps.
Time on_line(Time t_low, Time t_high, Bytes size) {
  const double slope =
      static_cast<double>((t_high - t_low).ps()) / (kHighSize - kLowSize).as_double();
  const double t = static_cast<double>(t_low.ps()) + slope * (size - kLowSize).as_double();
  return Time::picoseconds(std::max<std::int64_t>(0, std::llround(t)));
}

void check_range(const GroupLayout& layout, const topo::Topology& topology) {
  if (layout.end() > topology.num_devices()) {
    throw Error::input("a device group lies beyond the topology's devices",
                       {.key = "devices",
                        .value = std::to_string(layout.end()),
                        .expected = fmt::format("at most {}", topology.num_devices())});
  }
}

}  // namespace

OracleCommCost::OracleCommCost(const topo::Topology& topology, OracleOptions options)
    : topology_(topology),
      oracle_(topology, options.seed),
      options_(options),
      injection_bound_(largest_injection(topology)) {}

Time OracleCommCost::exact_collective(const coll::CollectiveSpec& spec, const GroupLayout& layout) {
  const auto groups = layout.expand();
  return oracle_.collective(spec, groups).slowest;
}

Time OracleCommCost::collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
  if (layout.group_size() <= 1 || size.count() <= 0) return Time::zero();
  check_range(layout, topology_);
  coll::CollectiveSpec spec;
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      spec.op = coll::Operation::kAllReduce;
      spec.algorithm = options_.allreduce;
      break;
    case workload::CollectiveOp::kAllGather:
      spec.op = coll::Operation::kAllGather;
      spec.algorithm = options_.all_gather;
      break;
    case workload::CollectiveOp::kReduceScatter:
      spec.op = coll::Operation::kReduceScatter;
      spec.algorithm = options_.reduce_scatter;
      break;
    case workload::CollectiveOp::kAllToAll:
      spec.op = coll::Operation::kAllToAll;
      spec.algorithm = options_.all_to_all;
      break;
  }
  if (!options_.interpolate_sizes) {
    spec.size = size;
    return exact_collective(spec, layout);
  }
  spec.size = kLowSize;
  const Time low = exact_collective(spec, layout);
  spec.size = kHighSize;
  const Time high = exact_collective(spec, layout);
  return on_line(low, high, size);
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
  return oracle_.transfers(size, src, dst);
}

Time OracleCommCost::transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  if (size.count() <= 0) return Time::zero();
  check_range(from, topology_);
  check_range(to, topology_);
  if (!options_.interpolate_sizes) return exact_transfer(size, from, to);
  return on_line(exact_transfer(kLowSize, from, to), exact_transfer(kHighSize, from, to), size);
}

int OracleCommCost::scale_up_size() const noexcept { return topology_.domain_sizes().front(); }

std::string OracleCommCost::describe() const {
  return fmt::format("collective oracle on {} ({} devices)", topology_.name(),
                     topology_.num_devices());
}

}  // namespace nest::placer
