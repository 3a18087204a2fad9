#include "nest/placer/comm_cost.h"

#include <fmt/format.h>

#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/core/unit_parse.h"

namespace nest::placer {

topo::DeviceId GroupLayout::device(int group, int member_index) const noexcept {
  const auto g0 = static_cast<std::uint32_t>(group % groups[0].count);
  const int rest = group / groups[0].count;
  const auto g1 = static_cast<std::uint32_t>(rest % groups[1].count);
  const auto g2 = static_cast<std::uint32_t>(rest / groups[1].count);
  return base + g0 * groups[0].stride + g1 * groups[1].stride + g2 * groups[2].stride +
         static_cast<std::uint32_t>(member_index) * member.stride;
}

std::vector<std::vector<topo::DeviceId>> GroupLayout::expand() const {
  std::vector<std::vector<topo::DeviceId>> out(static_cast<std::size_t>(group_count()));
  for (int g = 0; g < group_count(); ++g) {
    auto& members = out[static_cast<std::size_t>(g)];
    members.reserve(static_cast<std::size_t>(member.count));
    for (int m = 0; m < member.count; ++m) members.push_back(device(g, m));
  }
  return out;
}

topo::DeviceId GroupLayout::end() const noexcept {
  // Every stride is non-negative, so the last digit of every axis gives the largest device.
  return device(group_count() - 1, member.count - 1) + 1;
}

std::uint64_t GroupLayout::hash() const noexcept {
  std::uint64_t h = hash_mix(base, static_cast<std::uint64_t>(member.count));
  h = hash_mix(h, member.stride);
  for (const auto& axis : groups) {
    h = hash_mix(h, static_cast<std::uint64_t>(axis.count));
    h = hash_mix(h, axis.stride);
  }
  return h;
}

LayoutKey LayoutKey::of(int kind, int op, std::int64_t size, const GroupLayout& a,
                        const GroupLayout& b) noexcept {
  LayoutKey key{.kind = kind, .op = op, .size = size, .a = a, .b = b};
  std::uint64_t h =
      hash_mix(static_cast<std::uint64_t>(key.kind), static_cast<std::uint64_t>(key.op));
  h = hash_mix(h, static_cast<std::uint64_t>(key.size));
  h = hash_mix(h, key.a.hash());
  key.hash = hash_mix(h, key.b.hash());
  return key;
}

Time CommCost::collective_bound(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
  if (!(injection_bound().bytes_per_s() > 0)) return Time::zero();
  FlatCommCost flat(injection_bound() * (1 + 1e-6), Time::zero());
  return flat.collective(op, size, layout);
}

Time CommCost::transfer_bound(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  if (!(injection_bound().bytes_per_s() > 0)) return Time::zero();
  FlatCommCost flat(injection_bound() * (1 + 1e-6), Time::zero());
  return flat.transfer(size, from, to);
}

FlatCommCost::FlatCommCost(Bandwidth bandwidth, Time latency, int scale_up_size)
    : bandwidth_(bandwidth), latency_(latency), scale_up_size_(scale_up_size) {
  if (!(bandwidth.bytes_per_s() > 0)) {
    throw Error::input(
        "the flat network needs a positive bandwidth",
        {.key = "bandwidth", .value = format_bandwidth(bandwidth), .expected = "a rate > 0"});
  }
}

Time FlatCommCost::collective(workload::CollectiveOp op, Bytes size, const GroupLayout& layout) {
  const int n = layout.group_size();
  if (n <= 1 || size.count() <= 0) return Time::zero();
  const double steps = n - 1;
  const double share = steps / n * size.as_double() / bandwidth_.bytes_per_s();
  switch (op) {
    case workload::CollectiveOp::kAllReduce:
      return latency_ * static_cast<std::int64_t>(2 * (n - 1)) + Time::seconds(2 * share);
    case workload::CollectiveOp::kAllGather:
    case workload::CollectiveOp::kReduceScatter:
    case workload::CollectiveOp::kAllToAll:
      return latency_ * static_cast<std::int64_t>(n - 1) + Time::seconds(share);
  }
  throw Error::internal("unknown collective operation");
}

Time FlatCommCost::transfer(Bytes size, const GroupLayout& from, const GroupLayout& to) {
  if (size.count() <= 0 || from == to) return Time::zero();
  return latency_ + serialization_time(size, bandwidth_);
}

std::string FlatCommCost::describe() const {
  return fmt::format("flat network ({} per device, {} per step)", format_bandwidth(bandwidth_),
                     format_time(latency_));
}

}  // namespace nest::placer
