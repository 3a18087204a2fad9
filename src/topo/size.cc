#include "nest/topo/size.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::topo {
namespace {

constexpr std::int64_t kSaturated = std::numeric_limits<std::int64_t>::max();

// Saturating arithmetic on non-negative counts.
std::int64_t add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kSaturated : r;
}
std::int64_t mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
std::int64_t at_least(std::int64_t v, std::int64_t min) { return std::max(v, min); }

// 1234567 -> "1,234,567".
std::string grouped(std::int64_t v) {
  if (v == kSaturated) return "more than 9.2e18";
  std::string digits = std::to_string(v);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) {
    digits.insert(static_cast<std::size_t>(i), ",");
  }
  return digits;
}

std::string format_memory(std::int64_t bytes) {
  if (bytes == kSaturated) return "more than 8 EiB";
  return format_bytes(Bytes(bytes));
}

}  // namespace

std::int64_t TopologySize::nodes() const noexcept { return add(devices, switches); }

std::int64_t TopologySize::estimated_bytes() const noexcept {
  return add(mul(kBytesPerNode, nodes()), mul(kBytesPerCable, cables));
}

TopologySize size_of(const FatTreeParams& p) noexcept {
  const std::int64_t k = at_least(p.k, 2);
  const std::int64_t h = k / 2;
  const std::int64_t d = at_least(p.devices_per_host, 1);
  const std::int64_t hosts = mul(mul(k, h), h);
  TopologySize s;
  s.devices = mul(hosts, d);
  s.switches = add(add(d > 1 ? hosts : 0, mul(2 * k, h)), mul(h, h));
  // Host cables, edge-aggregation and aggregation-core (k^3/4 each), device cables when d > 1.
  s.cables = add(add(d > 1 ? s.devices : 0, hosts), mul(2, hosts));
  return s;
}

TopologySize size_of(const SpineLeafParams& p) noexcept {
  const std::int64_t leaves = at_least(p.leaves, 1);
  const std::int64_t spines = at_least(p.spines, 1);
  TopologySize s;
  s.devices = mul(leaves, at_least(p.hosts_per_leaf, 1));
  s.switches = add(leaves, spines);
  s.cables = add(s.devices, mul(leaves, spines));
  return s;
}

TopologySize size_of(const TorusParams& p) noexcept {
  TopologySize s;
  s.devices = 1;
  for (const int m : p.dims) s.devices = mul(s.devices, at_least(m, 1));
  // A ring of m >= 3 has one cable per device, of 2 one per pair, of 1 none.
  for (const int m : p.dims) {
    if (m >= 3) s.cables = add(s.cables, s.devices);
    if (m == 2) s.cables = add(s.cables, s.devices / 2);
  }
  return s;
}

TopologySize size_of(const RailOptimizedParams& p) noexcept {
  const std::int64_t nodes = at_least(p.nodes, 1);
  const std::int64_t gpus = at_least(p.gpus_per_node, 1);
  const std::int64_t per_leaf = at_least(p.nodes_per_leaf, 1);
  const std::int64_t spines = at_least(p.spines, 1);
  const std::int64_t units = (nodes + per_leaf - 1) / per_leaf;
  const std::int64_t leaves = mul(units, gpus);
  TopologySize s;
  s.devices = mul(nodes, gpus);
  s.switches = add(add(gpus > 1 ? nodes : 0, leaves), spines);
  s.cables = add(mul(s.devices, gpus > 1 ? 2 : 1), mul(leaves, spines));
  return s;
}

TopologySize size_of(const HierarchicalParams& p) noexcept {
  TopologySize s;
  s.devices = 1;
  for (const int f : p.devices_per_level) s.devices = mul(s.devices, at_least(f, 1));
  if (s.devices == kSaturated) {
    s.switches = s.cables = kSaturated;
    return s;
  }
  // Level j has devices / span_j switches; each child of every level has one cable up.
  std::int64_t span = 1;
  for (const int f : p.devices_per_level) {
    s.cables = add(s.cables, s.devices / span);
    span *= at_least(f, 1);  // <= devices: no overflow
    s.switches = add(s.switches, s.devices / span);
  }
  return s;
}

TopologySize size_of(const DragonflyParams& p) noexcept {
  const std::int64_t groups = at_least(p.groups, 1);
  const std::int64_t routers = at_least(p.routers_per_group, 1);
  const std::int64_t globals = std::max(p.global_links_per_router, 0);
  TopologySize s;
  s.switches = mul(groups, routers);
  s.devices = mul(s.switches, at_least(p.hosts_per_router, 1));
  const std::int64_t local = mul(groups, mul(routers, routers - 1) / 2);
  // Every global port of every group has one cable; each cable joins two ports.
  const std::int64_t global = groups > 1 ? mul(s.switches, globals) / 2 : 0;
  s.cables = add(add(s.devices, local), global);
  return s;
}

TopologySize size_of(const DimensionsParams& p) noexcept {
  TopologySize s;
  s.devices = 1;
  for (const int n : p.npus_count) s.devices = mul(s.devices, at_least(n, 1));
  if (s.devices == kSaturated) {
    s.switches = s.cables = kSaturated;
    return s;
  }
  for (std::size_t i = 0; i < p.npus_count.size() && i < p.kinds.size(); ++i) {
    const std::int64_t n = at_least(p.npus_count[i], 1);
    const std::int64_t groups = s.devices / n;
    if (n == 1) continue;
    switch (p.kinds[i]) {
      case DimensionKind::kRing:
        s.cables = add(s.cables, mul(groups, n == 2 ? 1 : n));
        break;
      case DimensionKind::kFullyConnected:
        s.cables = add(s.cables, mul(groups, mul(n, n - 1) / 2));
        break;
      case DimensionKind::kSwitch:
        s.switches = add(s.switches, groups);
        s.cables = add(s.cables, s.devices);
        break;
    }
  }
  return s;
}

void check_size(const TopologySize& size, std::int64_t max_memory_bytes, const std::string& key) {
  const std::string what =
      fmt::format("{} cables and {} nodes", grouped(size.cables), grouped(size.nodes()));
  if (size.nodes() > kMaxTopologyNodes) {
    throw Error::input("too many nodes",
                       {.key = key,
                        .value = what,
                        .expected = fmt::format("at most {} nodes", grouped(kMaxTopologyNodes))});
  }
  if (size.cables > kMaxTopologyCables) {
    throw Error::input("too many cables",
                       {.key = key,
                        .value = what,
                        .expected = fmt::format("at most {} cables", grouped(kMaxTopologyCables))});
  }
  const std::int64_t bytes = size.estimated_bytes();
  if (bytes > max_memory_bytes) {
    throw Error::input("topology too large for the memory limit",
                       {.key = key,
                        .value = fmt::format("{}: an estimated {}", what, format_memory(bytes)),
                        .expected = fmt::format("at most {} (--max-memory raises the limit)",
                                                format_memory(max_memory_bytes))});
  }
}

}  // namespace nest::topo
