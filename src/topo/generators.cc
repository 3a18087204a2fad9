#include "nest/topo/generators.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"
#include "nest/topo/size.h"
#include "topo/connectivity.h"
#include "topo/layout.h"

namespace nest::topo {
namespace {

// Most torus dimensions and tree levels: more than 26 of size >= 2 pass the node limit anyway.
constexpr std::size_t kMaxLevels = 32;

void require(bool ok, std::string_view key, const std::string& value, std::string_view expected,
             const char* message = "out of range") {
  if (!ok) {
    throw Error::input(
        message, {.key = std::string(key), .value = value, .expected = std::string(expected)});
  }
}

void require_int(int v, int min, std::string_view key) {
  require(v >= min, key, std::to_string(v), fmt::format("an integer >= {}", min));
}

void require_rate(Bandwidth b, std::string_view key) {
  require(b.bytes_per_s() > 0, key, format_bandwidth(b), "a bandwidth > 0");
}

void require_latency(Time t, std::string_view key) {
  require(t > Time::zero(), key, format_time(t), "a duration > 0");
}

// `forwards`: true only where devices are the routers (torus, dimensions).
void add_devices(Topology& t, std::int64_t n, bool forwards = false) {
  for (std::int64_t i = 0; i < n; ++i) t.add_device(fmt::format("dev{}", i), forwards);
}

}  // namespace

Topology build_fat_tree(const FatTreeParams& p, std::string name, std::int64_t max_memory_bytes) {
  require(p.k >= 2 && p.k % 2 == 0 && p.k <= 1024, "k", std::to_string(p.k),
          "an even integer in [2, 1024]");
  require_int(p.devices_per_host, 1, "devices_per_host");
  require_rate(p.link_bandwidth, "link_bandwidth");
  require_latency(p.link_latency, "link_latency");
  require(p.edge_oversubscription >= 1, "edge_oversubscription",
          fmt::format("{}", p.edge_oversubscription), "a ratio >= 1");
  require(p.aggregation_oversubscription >= 1, "aggregation_oversubscription",
          fmt::format("{}", p.aggregation_oversubscription), "a ratio >= 1");
  if (p.devices_per_host > 1) {
    require_rate(p.scale_up_bandwidth, "scale_up_bandwidth");
    require_latency(p.scale_up_latency, "scale_up_latency");
  }
  check_size(size_of(p), max_memory_bytes, p.devices_per_host > 1 ? "devices_per_host" : "k");
  const detail::FatTreeLayout f(p);

  Topology t(std::move(name), Family::kFatTree);
  add_devices(t, f.devices);
  const int off = f.d > 1 ? 1 : 0;
  if (f.d > 1) {
    for (std::int64_t host = 0; host < f.hosts; ++host)
      t.add_switch(fmt::format("host{}", host), 1);
  }
  for (int pod = 0; pod < f.k; ++pod) {
    for (int e = 0; e < f.h; ++e) t.add_switch(fmt::format("edge{}.{}", pod, e), 1 + off);
  }
  for (int pod = 0; pod < f.k; ++pod) {
    for (int a = 0; a < f.h; ++a) t.add_switch(fmt::format("agg{}.{}", pod, a), 2 + off);
  }
  for (int a = 0; a < f.h; ++a) {
    for (int c = 0; c < f.h; ++c) t.add_switch(fmt::format("core{}.{}", a, c), 3 + off);
  }

  if (f.d > 1) {
    for (std::int64_t dev = 0; dev < f.devices; ++dev) {
      t.add_link(static_cast<NodeId>(dev), f.host_node(dev / f.d), p.scale_up_bandwidth,
                 p.scale_up_latency);
    }
  }
  for (std::int64_t host = 0; host < f.hosts; ++host) {
    const auto edge = static_cast<int>(host / f.h);  // global edge index = pod * h + e
    t.add_link(f.host_node(host), f.edge(edge / f.h, edge % f.h), p.link_bandwidth, p.link_latency);
  }
  const Bandwidth edge_up = p.link_bandwidth / p.edge_oversubscription;
  const Bandwidth agg_up = edge_up / p.aggregation_oversubscription;
  for (int pod = 0; pod < f.k; ++pod) {
    for (int e = 0; e < f.h; ++e) {
      for (int a = 0; a < f.h; ++a)
        t.add_link(f.edge(pod, e), f.agg(pod, a), edge_up, p.link_latency);
    }
  }
  for (int pod = 0; pod < f.k; ++pod) {
    for (int a = 0; a < f.h; ++a) {
      for (int c = 0; c < f.h; ++c) t.add_link(f.agg(pod, a), f.core(a, c), agg_up, p.link_latency);
    }
  }
  t.set_params(p);
  t.set_domain_sizes({f.d, f.d * f.h, f.d * f.h * f.h, static_cast<int>(f.devices)});
  validate(t);
  return t;
}

Topology build_spine_leaf(const SpineLeafParams& p, std::string name,
                          std::int64_t max_memory_bytes) {
  require_int(p.leaves, 1, "leaves");
  require_int(p.spines, 1, "spines");
  require_int(p.hosts_per_leaf, 1, "hosts_per_leaf");
  require_rate(p.host_bandwidth, "host_bandwidth");
  require_latency(p.host_latency, "host_latency");
  require_rate(p.uplink_bandwidth, "uplink_bandwidth");
  require_latency(p.uplink_latency, "uplink_latency");
  check_size(size_of(p), max_memory_bytes,
             p.spines > p.hosts_per_leaf ? "spines" : "hosts_per_leaf");
  const detail::SpineLeafLayout s(p);

  Topology t(std::move(name), Family::kSpineLeaf);
  add_devices(t, s.devices);
  for (int l = 0; l < s.leaves; ++l) t.add_switch(fmt::format("leaf{}", l), 1);
  for (int sp = 0; sp < s.spines; ++sp) t.add_switch(fmt::format("spine{}", sp), 2);
  for (std::int64_t dev = 0; dev < s.devices; ++dev) {
    t.add_link(static_cast<NodeId>(dev), s.leaf(static_cast<int>(dev / s.per_leaf)),
               p.host_bandwidth, p.host_latency);
  }
  for (int l = 0; l < s.leaves; ++l) {
    for (int sp = 0; sp < s.spines; ++sp) {
      t.add_link(s.leaf(l), s.spine(sp), p.uplink_bandwidth, p.uplink_latency);
    }
  }
  t.set_params(p);
  t.set_domain_sizes({s.per_leaf, static_cast<int>(s.devices)});
  validate(t);
  return t;
}

Topology build_torus(const TorusParams& p, std::string name, std::int64_t max_memory_bytes) {
  require(!p.dims.empty(), "dims", "[]", "at least one dimension");
  require(p.dims.size() <= kMaxLevels, "dims", fmt::format("{} dimensions", p.dims.size()),
          fmt::format("at most {} dimensions", kMaxLevels));
  for (std::size_t i = 0; i < p.dims.size(); ++i) {
    require_int(p.dims[i], 1, fmt::format("dims[{}]", i));
  }
  require_rate(p.link_bandwidth, "link_bandwidth");
  require_latency(p.link_latency, "link_latency");
  check_size(size_of(p), max_memory_bytes, "dims");
  const detail::TorusLayout tl(p);

  Topology t(std::move(name), Family::kTorus);
  add_devices(t, tl.devices, true);
  for (std::int64_t dev = 0; dev < tl.devices; ++dev) {
    for (std::size_t i = 0; i < tl.dims.size(); ++i) {
      const int m = tl.dims[i];
      const int x = tl.coord(dev, i);
      // A ring of 2 is one cable (added from x = 0); of 1, none.
      if (m == 1 || (m == 2 && x == 1)) continue;
      const std::int64_t next = dev + (x + 1 < m ? tl.stride[i] : -(m - 1) * tl.stride[i]);
      t.add_link(static_cast<NodeId>(dev), static_cast<NodeId>(next), p.link_bandwidth,
                 p.link_latency);
    }
  }
  t.set_params(p);
  std::vector<int> domains;
  std::int64_t prod = 1;
  for (const int m : tl.dims) {
    prod *= m;
    domains.push_back(static_cast<int>(prod));
  }
  t.set_domain_sizes(std::move(domains));
  validate(t);
  return t;
}

Topology build_rail_optimized(const RailOptimizedParams& p, std::string name,
                              std::int64_t max_memory_bytes) {
  require_int(p.nodes, 1, "nodes");
  require_int(p.gpus_per_node, 1, "gpus_per_node");
  require_int(p.nodes_per_leaf, 1, "nodes_per_leaf");
  require_int(p.spines, 1, "spines");
  if (p.gpus_per_node > 1) {
    require_rate(p.nvlink_bandwidth, "nvlink_bandwidth");
    require_latency(p.nvlink_latency, "nvlink_latency");
  }
  require_rate(p.nic_bandwidth, "nic_bandwidth");
  require_latency(p.nic_latency, "nic_latency");
  require_rate(p.spine_bandwidth, "spine_bandwidth");
  require_latency(p.spine_latency, "spine_latency");
  check_size(size_of(p), max_memory_bytes, p.spines > p.nodes ? "spines" : "nodes");
  const detail::RailLayout r(p);

  Topology t(std::move(name), Family::kRailOptimized);
  add_devices(t, r.devices);
  if (r.has_nvswitch()) {
    for (int node = 0; node < r.nodes; ++node) t.add_switch(fmt::format("nvswitch{}", node), 1);
  }
  for (int u = 0; u < r.units; ++u) {
    for (int rail = 0; rail < r.gpus; ++rail) t.add_switch(fmt::format("leaf{}.{}", u, rail), 2);
  }
  for (int s = 0; s < r.spines; ++s) t.add_switch(fmt::format("spine{}", s), 3);

  for (int node = 0; node < r.nodes; ++node) {
    for (int g = 0; g < r.gpus; ++g) {
      const auto dev = static_cast<NodeId>(std::int64_t{node} * r.gpus + g);
      if (r.has_nvswitch()) {
        t.add_link(dev, r.nvswitch(node), p.nvlink_bandwidth, p.nvlink_latency);
      }
      t.add_link(dev, r.leaf(node / r.per_leaf, g), p.nic_bandwidth, p.nic_latency);
    }
  }
  for (int u = 0; u < r.units; ++u) {
    for (int rail = 0; rail < r.gpus; ++rail) {
      for (int s = 0; s < r.spines; ++s) {
        t.add_link(r.leaf(u, rail), r.spine(s), p.spine_bandwidth, p.spine_latency);
      }
    }
  }
  t.set_params(p);
  const int unit = r.gpus * std::min(r.per_leaf, r.nodes);
  std::vector<int> domains = {r.gpus};
  if (r.nodes % std::min(r.per_leaf, r.nodes) == 0) domains.push_back(unit);
  domains.push_back(static_cast<int>(r.devices));
  t.set_domain_sizes(std::move(domains));
  validate(t);
  return t;
}

Topology build_hierarchical(const HierarchicalParams& p, std::string name,
                            std::int64_t max_memory_bytes) {
  const std::size_t n = p.devices_per_level.size();
  require(n >= 1, "devices_per_level", "[]", "at least one level");
  require(n <= kMaxLevels, "devices_per_level", fmt::format("{} levels", n),
          fmt::format("at most {} levels", kMaxLevels));
  require(p.bandwidth_per_level.size() == n, "bandwidth_per_level",
          std::to_string(p.bandwidth_per_level.size()) + " entries",
          fmt::format("{} entries, one per level of devices_per_level", n), "wrong length");
  require(p.latency_per_level.size() == n, "latency_per_level",
          std::to_string(p.latency_per_level.size()) + " entries",
          fmt::format("{} entries, one per level of devices_per_level", n), "wrong length");
  for (std::size_t i = 0; i < n; ++i) {
    require_int(p.devices_per_level[i], 1, fmt::format("devices_per_level[{}]", i));
    require_rate(p.bandwidth_per_level[i], fmt::format("bandwidth_per_level[{}]", i));
    require_latency(p.latency_per_level[i], fmt::format("latency_per_level[{}]", i));
  }
  check_size(size_of(p), max_memory_bytes, "devices_per_level");
  const detail::HierarchicalLayout h(p);

  Topology t(std::move(name), Family::kHierarchical);
  add_devices(t, h.devices);
  for (int j = 1; j <= h.levels(); ++j) {
    const std::int64_t count = h.devices / h.span[j];
    for (std::int64_t i = 0; i < count; ++i) t.add_switch(fmt::format("sw{}.{}", j, i), j);
  }
  for (int j = 0; j < h.levels(); ++j) {
    // Children of level j (devices when j = 0) each link to their level-(j+1) parent.
    const std::int64_t count = h.devices / h.span[j];
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t first_dev = i * h.span[j];
      const NodeId child = j == 0 ? static_cast<NodeId>(i) : h.above(first_dev, j);
      t.add_link(child, h.above(first_dev, j + 1), p.bandwidth_per_level[j],
                 p.latency_per_level[j]);
    }
  }
  t.set_params(p);
  std::vector<int> domains;
  for (std::size_t j = 1; j < h.span.size(); ++j) domains.push_back(static_cast<int>(h.span[j]));
  t.set_domain_sizes(std::move(domains));
  validate(t);
  return t;
}

Topology build_dragonfly(const DragonflyParams& p, std::string name,
                         std::int64_t max_memory_bytes) {
  require_int(p.groups, 1, "groups");
  require_int(p.routers_per_group, 1, "routers_per_group");
  require_int(p.hosts_per_router, 1, "hosts_per_router");
  require_int(p.global_links_per_router, p.groups > 1 ? 1 : 0, "global_links_per_router");
  // Sizes first: the port count below must not overflow.
  check_size(size_of(p), max_memory_bytes, "groups");
  if (p.groups > 1) {
    const std::int64_t ports = std::int64_t{p.routers_per_group} * p.global_links_per_router;
    require(ports % (p.groups - 1) == 0, "global_links_per_router",
            std::to_string(p.global_links_per_router),
            fmt::format("routers_per_group * global_links_per_router ({}) to be a multiple of "
                        "groups - 1 ({})",
                        ports, p.groups - 1));
  }
  require_rate(p.host_bandwidth, "host_bandwidth");
  require_latency(p.host_latency, "host_latency");
  if (p.routers_per_group > 1) {
    require_rate(p.local_bandwidth, "local_bandwidth");
    require_latency(p.local_latency, "local_latency");
  }
  if (p.groups > 1) {
    require_rate(p.global_bandwidth, "global_bandwidth");
    require_latency(p.global_latency, "global_latency");
  }
  const detail::DragonflyLayout d(p);

  Topology t(std::move(name), Family::kDragonfly);
  add_devices(t, d.devices);
  for (int g = 0; g < d.groups; ++g) {
    for (int r = 0; r < d.routers; ++r) t.add_switch(fmt::format("router{}.{}", g, r), 1);
  }
  for (std::int64_t dev = 0; dev < d.devices; ++dev) {
    const auto router = static_cast<int>(dev / d.hosts);
    t.add_link(static_cast<NodeId>(dev), d.router(router / d.routers, router % d.routers),
               p.host_bandwidth, p.host_latency);
  }
  for (int g = 0; g < d.groups; ++g) {
    for (int r = 0; r < d.routers; ++r) {
      for (int s = r + 1; s < d.routers; ++s) {
        t.add_link(d.router(g, r), d.router(g, s), p.local_bandwidth, p.local_latency);
      }
    }
  }
  for (int g = 0; g < d.groups; ++g) {
    for (int h = g + 1; h < d.groups; ++h) {
      for (int round = 0; round < d.rounds; ++round) {
        t.add_link(d.router(g, d.port_router(d.port_to(g, h, round))),
                   d.router(h, d.port_router(d.port_to(h, g, round))), p.global_bandwidth,
                   p.global_latency);
      }
    }
  }
  t.set_params(p);
  t.set_domain_sizes({d.hosts, d.hosts * d.routers, static_cast<int>(d.devices)});
  validate(t);
  return t;
}

Topology build_dimensions(const DimensionsParams& p, std::string name,
                          std::int64_t max_memory_bytes) {
  const std::size_t n = p.kinds.size();
  require(n >= 1, "topology", "[]", "at least one dimension");
  require(n <= kMaxLevels, "topology", fmt::format("{} dimensions", n),
          fmt::format("at most {} dimensions", kMaxLevels));
  const auto same_length = [n](std::size_t size, const char* key) {
    require(size == n, key, fmt::format("{} entries", size),
            fmt::format("{} entries, one per dimension of topology", n), "wrong length");
  };
  same_length(p.npus_count.size(), "npus_count");
  same_length(p.bandwidth.size(), "bandwidth");
  same_length(p.latency.size(), "latency");
  if (!p.algorithms.empty()) same_length(p.algorithms.size(), "collective_algorithms");
  for (std::size_t i = 0; i < n; ++i) {
    require_int(p.npus_count[i], 1, fmt::format("npus_count[{}]", i));
    require_rate(p.bandwidth[i], fmt::format("bandwidth[{}]", i));
    require_latency(p.latency[i], fmt::format("latency[{}]", i));
    if (!p.algorithms.empty() && p.algorithms[i] == DimensionAlgorithm::kHalvingDoubling) {
      const auto d = static_cast<unsigned>(p.npus_count[i]);
      require((d & (d - 1)) == 0, fmt::format("collective_algorithms[{}]", i), "halving_doubling",
              fmt::format("ring or direct on a dimension of {} devices (halving_doubling needs "
                          "a power of two)",
                          d),
              "halving_doubling on a dimension whose size is not a power of two");
    }
  }
  check_size(size_of(p), max_memory_bytes, "npus_count");

  std::vector<std::int64_t> stride(n + 1, 1);
  for (std::size_t i = 0; i < n; ++i) stride[i + 1] = stride[i] * p.npus_count[i];
  const std::int64_t devices = stride[n];
  Topology t(std::move(name), Family::kDimensions);
  add_devices(t, devices, true);
  // The lowest device of each group of dimension i (x_i = 0), in increasing order.
  const auto group_bases = [&](std::size_t i) {
    std::vector<std::int64_t> bases;
    for (std::int64_t dev = 0; dev < devices; ++dev) {
      if ((dev / stride[i]) % p.npus_count[i] == 0) bases.push_back(dev);
    }
    return bases;
  };
  std::vector<std::vector<NodeId>> switch_of(n);  // per Switch dimension, per group
  for (std::size_t i = 0; i < n; ++i) {
    if (p.kinds[i] != DimensionKind::kSwitch || p.npus_count[i] == 1) continue;
    const std::vector<std::int64_t> bases = group_bases(i);
    for (std::size_t g = 0; g < bases.size(); ++g) {
      switch_of[i].push_back(t.add_switch(fmt::format("sw{}.{}", i, g), static_cast<int>(i) + 1));
    }
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t m = p.npus_count[i];
    if (m == 1) continue;
    const std::vector<std::int64_t> bases = group_bases(i);
    const Bandwidth bw = p.bandwidth[i];
    const Time lat = p.latency[i];
    for (std::size_t g = 0; g < bases.size(); ++g) {
      const auto member = [&](std::int64_t x) {
        return static_cast<NodeId>(bases[g] + x * stride[i]);
      };
      switch (p.kinds[i]) {
        case DimensionKind::kRing:
          // A ring of 2 is one cable.
          for (std::int64_t x = 0; x < (m == 2 ? 1 : m); ++x) {
            t.add_link(member(x), member((x + 1) % m), bw, lat);
          }
          break;
        case DimensionKind::kFullyConnected:
          for (std::int64_t x = 0; x < m; ++x) {
            for (std::int64_t y = x + 1; y < m; ++y) t.add_link(member(x), member(y), bw, lat);
          }
          break;
        case DimensionKind::kSwitch:
          for (std::int64_t x = 0; x < m; ++x) t.add_link(member(x), switch_of[i][g], bw, lat);
          break;
      }
    }
  }
  t.set_params(p);
  std::vector<int> domains;
  for (std::size_t i = 1; i <= n; ++i) domains.push_back(static_cast<int>(stride[i]));
  t.set_domain_sizes(std::move(domains));
  validate(t);
  return t;
}

void validate(const Topology& t) {
  if (t.num_devices() == 0) throw Error::input("topology has no devices", {.key = "nodes"});
  std::unordered_set<std::string_view> names;
  names.reserve(t.num_nodes());
  for (NodeId id = 0; id < t.num_nodes(); ++id) {
    if (!names.insert(t.node(id).name).second) {
      throw Error::input("duplicate node name", {.key = fmt::format("nodes[{}]", id),
                                                 .value = t.node(id).name,
                                                 .expected = "names that are unique"});
    }
  }
  const auto links = t.links();
  for (std::size_t i = 0; i < links.size(); ++i) {
    const Link& l = links[i];
    const std::string key = fmt::format("links[{}]", i / 2);
    if (!(l.bandwidth.bytes_per_s() > 0)) {
      throw Error::input(
          "bandwidth must be positive",
          {.key = key, .value = format_bandwidth(l.bandwidth), .expected = "a bandwidth > 0"});
    }
    if (l.latency <= Time::zero()) {
      throw Error::input(
          "latency must be positive",
          {.key = key, .value = format_time(l.latency), .expected = "a duration > 0"});
    }
  }
  for (NodeId id = 0; id < t.num_devices(); ++id) {
    if (t.out_links(id).empty()) {
      throw Error::input("device has no link", {.key = fmt::format("nodes[{}]", id),
                                                .value = t.node(id).name,
                                                .expected = "every device on at least one link"});
    }
  }
  // Device 0 must reach every node.
  const std::vector<char> seen = detail::reachable(t, 0);
  for (NodeId id = 0; id < t.num_nodes(); ++id) {
    if (seen[id] == 0) {
      throw Error::input("graph is disconnected: node not reachable from " + t.node(0).name,
                         {.key = fmt::format("nodes[{}]", id),
                          .value = t.node(id).name,
                          .expected = "a connected graph"});
    }
  }
}

}  // namespace nest::topo
