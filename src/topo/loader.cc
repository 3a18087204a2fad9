#include "nest/topo/loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "nest/config/node.h"
#include "nest/core/error.h"
#include "nest/topo/generators.h"
#include "nest/topo/size.h"
#include "topo/connectivity.h"

namespace nest::topo {
namespace {

constexpr std::int64_t kMaxCount = std::int64_t{1} << 26;

int count(const config::Node& map, std::string_view key, std::int64_t min = 1) {
  return static_cast<int>(map.at(key).as_int(min, kMaxCount));
}

int count_or(const config::Node& map, std::string_view key, int fallback, std::int64_t min = 1) {
  const auto n = map.find(key);
  return n ? static_cast<int>(n->as_int(min, kMaxCount)) : fallback;
}

std::vector<Bandwidth> bandwidths(const config::Node& list) {
  std::vector<Bandwidth> out;
  for (const config::Node& e : list.elements()) out.push_back(e.as_bandwidth());
  return out;
}

std::vector<Time> times(const config::Node& list) {
  std::vector<Time> out;
  for (const config::Node& e : list.elements()) out.push_back(e.as_time());
  return out;
}

std::vector<int> ints(const config::Node& list) {
  std::vector<int> out;
  for (const std::int64_t v : list.as_int_list(1, kMaxCount)) out.push_back(static_cast<int>(v));
  return out;
}

// A generator's error names a parameter ("k", "dims[1]"); point it at that key of the file.
Error locate(const Error& e, const config::Node& root) {
  if (e.kind() != ErrorKind::kInput || !e.context().file.empty()) return e;
  const std::string& key = e.context().key;
  const std::size_t bracket = key.find('[');
  std::optional<config::Node> node = root.find(key.substr(0, bracket));
  if (node && bracket != std::string::npos && node->is_sequence()) {
    const auto i = static_cast<std::size_t>(std::stoul(key.substr(bracket + 1)));
    const auto elements = node->elements();
    if (i < elements.size()) node = elements[i];
  }
  ErrorContext c = e.context();
  c.file = root.file();
  if (node) {
    c.line = node->line();
    c.key = node->path();
  }
  return Error::input(e.message(), std::move(c));
}

Topology fat_tree(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "k", "link_bandwidth", "link_latency",
                 "edge_oversubscription", "aggregation_oversubscription", "devices_per_host",
                 "scale_up_bandwidth", "scale_up_latency", "collectives", "nvlink_sharp"});
  FatTreeParams p;
  p.k = count(r, "k", 2);
  p.link_bandwidth = r.at("link_bandwidth").as_bandwidth();
  p.link_latency = r.at("link_latency").as_time();
  if (const auto n = r.find("edge_oversubscription")) p.edge_oversubscription = n->as_double(1);
  if (const auto n = r.find("aggregation_oversubscription")) {
    p.aggregation_oversubscription = n->as_double(1);
  }
  p.devices_per_host = count_or(r, "devices_per_host", 1);
  if (p.devices_per_host > 1) {
    p.scale_up_bandwidth = r.at("scale_up_bandwidth").as_bandwidth();
    p.scale_up_latency = r.at("scale_up_latency").as_time();
  } else if (const auto n = r.find("scale_up_bandwidth")) {
    throw n->error("only allowed with devices_per_host > 1");
  }
  return build_fat_tree(p, std::move(name), max_memory);
}

Topology spine_leaf(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "leaves", "spines", "hosts_per_leaf",
                 "host_bandwidth", "host_latency", "uplink_bandwidth", "uplink_latency",
                 "collectives", "nvlink_sharp"});
  SpineLeafParams p;
  p.leaves = count(r, "leaves");
  p.spines = count(r, "spines");
  p.hosts_per_leaf = count(r, "hosts_per_leaf");
  p.host_bandwidth = r.at("host_bandwidth").as_bandwidth();
  p.host_latency = r.at("host_latency").as_time();
  p.uplink_bandwidth = r.at("uplink_bandwidth").as_bandwidth();
  p.uplink_latency = r.at("uplink_latency").as_time();
  return build_spine_leaf(p, std::move(name), max_memory);
}

Topology torus(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "dims", "link_bandwidth", "link_latency",
                 "collectives", "nvlink_sharp"});
  TorusParams p;
  p.dims = ints(r.at("dims"));
  p.link_bandwidth = r.at("link_bandwidth").as_bandwidth();
  p.link_latency = r.at("link_latency").as_time();
  return build_torus(p, std::move(name), max_memory);
}

Topology rail_optimized(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "nodes", "gpus_per_node", "nodes_per_leaf",
                 "spines", "nvlink_bandwidth", "nvlink_latency", "nic_bandwidth", "nic_latency",
                 "spine_bandwidth", "spine_latency", "collectives", "nvlink_sharp"});
  RailOptimizedParams p;
  p.nodes = count(r, "nodes");
  p.gpus_per_node = count(r, "gpus_per_node");
  p.nodes_per_leaf = count(r, "nodes_per_leaf");
  p.spines = count(r, "spines");
  p.nvlink_bandwidth = r.at("nvlink_bandwidth").as_bandwidth();
  p.nvlink_latency = r.at("nvlink_latency").as_time();
  p.nic_bandwidth = r.at("nic_bandwidth").as_bandwidth();
  p.nic_latency = r.at("nic_latency").as_time();
  p.spine_bandwidth = r.at("spine_bandwidth").as_bandwidth();
  p.spine_latency = r.at("spine_latency").as_time();
  return build_rail_optimized(p, std::move(name), max_memory);
}

Topology hierarchical(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "devices_per_level", "bandwidth_per_level",
                 "latency_per_level", "collectives", "nvlink_sharp"});
  HierarchicalParams p;
  p.devices_per_level = ints(r.at("devices_per_level"));
  p.bandwidth_per_level = bandwidths(r.at("bandwidth_per_level"));
  p.latency_per_level = times(r.at("latency_per_level"));
  return build_hierarchical(p, std::move(name), max_memory);
}

Topology dragonfly(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "groups", "routers_per_group", "hosts_per_router",
                 "global_links_per_router", "host_bandwidth", "host_latency", "local_bandwidth",
                 "local_latency", "global_bandwidth", "global_latency", "collectives",
                 "nvlink_sharp"});
  DragonflyParams p;
  p.groups = count(r, "groups");
  p.routers_per_group = count(r, "routers_per_group");
  p.hosts_per_router = count(r, "hosts_per_router");
  p.global_links_per_router = count(r, "global_links_per_router", 0);
  p.host_bandwidth = r.at("host_bandwidth").as_bandwidth();
  p.host_latency = r.at("host_latency").as_time();
  p.local_bandwidth = r.at("local_bandwidth").as_bandwidth();
  p.local_latency = r.at("local_latency").as_time();
  p.global_bandwidth = r.at("global_bandwidth").as_bandwidth();
  p.global_latency = r.at("global_latency").as_time();
  return build_dragonfly(p, std::move(name), max_memory);
}

Topology dimensions(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "topology", "npus_count", "bandwidth", "latency",
                 "collective_algorithms", "collectives", "nvlink_sharp"});
  DimensionsParams p;
  for (const config::Node& e : r.at("topology").elements()) {
    const std::string k = e.as_choice({"Ring", "FullyConnected", "Switch"});
    p.kinds.push_back(k == "Ring"             ? DimensionKind::kRing
                      : k == "FullyConnected" ? DimensionKind::kFullyConnected
                                              : DimensionKind::kSwitch);
  }
  p.npus_count = ints(r.at("npus_count"));
  p.bandwidth = bandwidths(r.at("bandwidth"));
  p.latency = times(r.at("latency"));
  if (const auto a = r.find("collective_algorithms")) {
    for (const config::Node& e : a->elements()) {
      const std::string k =
          e.as_choice({"ring", "direct", "halving_doubling", "double_binary_tree"});
      p.algorithms.push_back(k == "ring"               ? DimensionAlgorithm::kRing
                             : k == "direct"           ? DimensionAlgorithm::kDirect
                             : k == "halving_doubling" ? DimensionAlgorithm::kHalvingDoubling
                                                       : DimensionAlgorithm::kDoubleBinaryTree);
    }
  }
  return build_dimensions(p, std::move(name), max_memory);
}

// Union-find over node ids.
class Components {
 public:
  explicit Components(std::size_t n) : parent_(n) {
    for (std::size_t i = 0; i < n; ++i) parent_[i] = static_cast<NodeId>(i);
  }
  NodeId find(NodeId x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void join(NodeId a, NodeId b) { parent_[find(a)] = find(b); }

 private:
  std::vector<NodeId> parent_;
};

// Devices that do not forward are endpoints only: every pair of devices must be joined by a
// path whose inner nodes all forward. Two devices are, iff they are cabled together or they
// touch a common component of the graph of forwarding nodes (a device that forwards touches
// its own). O(nodes + links) when one component touches every device (a fabric of switches);
// otherwise pair by pair, O(devices^2 x components touched), for up to 4,096 devices, and from
// the first device only above (the router names any other pair it cannot route).
void check_forwarding(const Topology& t, const std::vector<config::Node>& nodes,
                      const std::vector<std::size_t>& entry_of) {
  const std::size_t n = t.num_devices();
  Components c(t.num_nodes());
  bool all_forward = true;
  for (NodeId d = 0; d < n; ++d) all_forward = all_forward && t.forwards(d);
  if (all_forward) return;
  for (const Link& l : t.links()) {
    if (t.forwards(l.src) && t.forwards(l.dst)) c.join(l.src, l.dst);
  }
  std::vector<std::vector<NodeId>> touched(n);
  for (NodeId d = 0; d < n; ++d) {
    auto& s = touched[d];
    if (t.forwards(d)) {
      s.push_back(c.find(d));
    } else {
      for (const LinkId l : t.out_links(d)) {
        if (t.forwards(t.link(l).dst)) s.push_back(c.find(t.link(l).dst));
      }
    }
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  std::vector<NodeId> common = touched[0];
  for (NodeId d = 1; d < n && !common.empty(); ++d) {
    std::vector<NodeId> both;
    std::set_intersection(common.begin(), common.end(), touched[d].begin(), touched[d].end(),
                          std::back_inserter(both));
    common = std::move(both);
  }
  if (!common.empty()) return;
  const auto joined = [&](NodeId a, NodeId b) {
    if (t.find_link(a, b)) return true;
    const auto& x = touched[a];
    const auto& y = touched[b];
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < x.size() && j < y.size()) {
      if (x[i] == y[j]) return true;
      if (x[i] < y[j]) {
        ++i;
      } else {
        ++j;
      }
    }
    return false;
  };
  const NodeId sources = n <= 4096 ? static_cast<NodeId>(n) : 1;
  for (NodeId a = 0; a < sources; ++a) {
    for (NodeId b = a + 1; b < n; ++b) {
      if (joined(a, b)) continue;
      const config::Node& e = nodes[entry_of[b]];
      throw Error::input("no route from " + t.node(a).name + " to " + t.node(b).name +
                             " that does not pass through a device (devices do not forward)",
                         {.file = e.file(),
                          .line = e.line(),
                          .key = e.path(),
                          .value = t.node(b).name,
                          .expected = "a path through switches, or forwarding: true on the "
                                      "devices in between"});
    }
  }
}

Topology explicit_graph(const config::Node& r, std::string name, std::int64_t max_memory) {
  r.expect_keys({"kind", "name", "description", "nodes", "links", "domain_sizes", "collectives",
                 "nvlink_sharp"});
  const std::vector<config::Node> nodes = r.at("nodes").elements();
  const std::vector<config::Node> links = r.at("links").elements();
  check_size({.devices = static_cast<std::int64_t>(nodes.size()),
              .cables = static_cast<std::int64_t>(links.size())},
             max_memory, "links");

  // Devices first (in listed order), then switches; remember each node's entry.
  std::unordered_map<std::string, NodeId> ids;
  std::vector<std::size_t> entry_of;  // node id -> index in `nodes`
  std::vector<std::pair<std::string, int>> switches;
  std::vector<std::size_t> switch_entries;
  Topology t(std::move(name), Family::kExplicit);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    const config::Node& n = nodes[i];
    n.expect_keys({"name", "kind", "tier", "forwarding"});
    const std::string node_name = n.at("name").as_string();
    if (node_name.empty()) throw n.at("name").error("empty node name", "a non-empty name");
    if (ids.count(node_name) != 0) {
      throw n.at("name").error("duplicate node name", "names that are unique");
    }
    ids.emplace(node_name, 0);
    if (n.at("kind").as_choice({"device", "switch"}) == "device") {
      if (n.has("tier")) throw n.at("tier").error("only switches have a tier");
      const auto forwarding = n.find("forwarding");
      ids[node_name] = t.add_device(node_name, forwarding && forwarding->as_bool());
      entry_of.push_back(i);
    } else {
      if (const auto f = n.find("forwarding")) {
        throw f->error("only devices take forwarding (switches always forward)");
      }
      const auto tier = n.find("tier");
      switches.emplace_back(node_name, tier ? static_cast<int>(tier->as_int(1, 64)) : 1);
      switch_entries.push_back(i);
    }
  }
  if (t.num_devices() == 0) throw r.at("nodes").error("no node of kind device");
  for (std::size_t s = 0; s < switches.size(); ++s) {
    ids[switches[s].first] = t.add_switch(switches[s].first, switches[s].second);
    entry_of.push_back(switch_entries[s]);
  }

  for (const config::Node& l : links) {
    l.expect_keys({"a", "b", "bandwidth", "latency", "reverse_bandwidth", "reverse_latency"});
    NodeId ends[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      const config::Node end = l.at(k == 0 ? "a" : "b");
      const auto it = ids.find(end.as_string());
      if (it == ids.end()) throw end.error("unknown node", "a name listed under nodes");
      ends[k] = it->second;
    }
    if (ends[0] == ends[1]) throw l.at("b").error("link joins a node to itself", "another node");
    const Bandwidth bw = l.at("bandwidth").as_bandwidth();
    const Time lat = l.at("latency").as_time();
    const auto rbw = l.find("reverse_bandwidth");
    const auto rlat = l.find("reverse_latency");
    t.add_link(ends[0], ends[1], bw, lat, rbw ? rbw->as_bandwidth() : bw,
               rlat ? rlat->as_time() : lat);
  }

  for (NodeId d = 0; d < t.num_devices(); ++d) {
    if (t.out_links(d).empty()) {
      const config::Node& n = nodes[entry_of[d]];
      throw Error::input("device has no link", {.file = n.file(),
                                                .line = n.line(),
                                                .key = n.path(),
                                                .value = t.node(d).name,
                                                .expected = "every device on at least one link"});
    }
  }
  // Reachability from the first device; name the first listed node it misses.
  const std::vector<char> seen = detail::reachable(t, 0);
  std::optional<std::size_t> missed;
  for (NodeId id = 0; id < t.num_nodes(); ++id) {
    if (seen[id] == 0 && (!missed || entry_of[id] < *missed)) missed = entry_of[id];
  }
  if (missed) {
    const config::Node& n = nodes[*missed];
    throw Error::input("graph is disconnected: node not reachable from " + t.node(0).name,
                       {.file = n.file(),
                        .line = n.line(),
                        .key = n.path(),
                        .value = n.at("name").as_string(),
                        .expected = "a connected graph"});
  }

  check_forwarding(t, nodes, entry_of);

  if (const auto d = r.find("domain_sizes")) {
    const std::vector<int> sizes = ints(*d);
    int previous = 1;
    for (const int s : sizes) {
      if (s % previous != 0) throw d->error("each domain size must divide the next");
      previous = s;
    }
    if (sizes.empty() || sizes.back() != static_cast<int>(t.num_devices())) {
      throw d->error("the last domain size must be the number of devices",
                     fmt::format("a list ending in {}", t.num_devices()));
    }
    t.set_domain_sizes(sizes);
  }
  validate(t);
  return t;
}

// The keys every kind takes besides its own: the collective model (nest/topo/collective_model.h,
// files relative to the topology's folder) and whether the scale-up switches reduce in the
// switch (NVLink SHARP).
void collective_keys(const config::Node& root, Topology& t) {
  if (const auto n = root.find("nvlink_sharp")) t.set_nvlink_sharp(n->as_bool());
  if (const auto n = root.find("collectives")) {
    const std::string folder = std::filesystem::path(root.file()).parent_path().string();
    t.set_collective_model(
        std::make_shared<const CollectiveModel>(parse_collective_model(*n, folder)));
  }
}

std::string stem(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const std::size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

Topology load_kind(const config::Node& root, const config::Limits& limits) {
  if (!root.is_map()) throw root.error("expected a map", "a topology with a kind: key");
  const std::string kind =
      root.at("kind").as_choice({"fat_tree", "spine_leaf", "torus", "rail_optimized",
                                 "hierarchical", "dragonfly", "explicit", "dimensions"});
  const auto name_node = root.find("name");
  std::string name = name_node ? name_node->as_string() : stem(root.file());
  if (!is_utf8(name)) {
    // Names go into JSON and HDF5 text, which must be UTF-8.
    throw Error::input(
        "topology name is not UTF-8",
        {.file = root.file(),
         .key = "name",
         .value = name,
         .expected = name_node ? "a UTF-8 name" : "a name: key, or a UTF-8 file name"});
  }
  if (const auto d = root.find("description")) (void)d->as_string();
  try {
    if (kind == "fat_tree") return fat_tree(root, std::move(name), limits.max_memory_bytes);
    if (kind == "spine_leaf") return spine_leaf(root, std::move(name), limits.max_memory_bytes);
    if (kind == "torus") return torus(root, std::move(name), limits.max_memory_bytes);
    if (kind == "rail_optimized")
      return rail_optimized(root, std::move(name), limits.max_memory_bytes);
    if (kind == "hierarchical") return hierarchical(root, std::move(name), limits.max_memory_bytes);
    if (kind == "dragonfly") return dragonfly(root, std::move(name), limits.max_memory_bytes);
    if (kind == "dimensions") return dimensions(root, std::move(name), limits.max_memory_bytes);
    return explicit_graph(root, std::move(name), limits.max_memory_bytes);
  } catch (const Error& e) {
    throw locate(e, root);
  }
}

}  // namespace

Topology load_topology(const config::Node& root, const config::Limits& limits) {
  Topology t = load_kind(root, limits);
  collective_keys(root, t);
  return t;
}

Topology load_topology(const std::string& path, const config::Limits& limits) {
  return load_topology(config::Node::load_file(path, limits.max_input_bytes), limits);
}

Topology load_topology_string(std::string_view text, const std::string& file_name,
                              const config::Limits& limits) {
  return load_topology(config::Node::load_string(text, file_name), limits);
}

}  // namespace nest::topo
