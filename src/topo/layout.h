#pragma once
// Node numbering of the generated families, shared by the generators (which add nodes in this
// order) and the router (which computes paths from it in closed form). Private to src/topo.

#include <cstdint>
#include <vector>

#include "nest/topo/params.h"
#include "nest/topo/topology.h"

namespace nest::topo::detail {

struct FatTreeLayout {
  explicit FatTreeLayout(const FatTreeParams& p)
      : k(p.k),
        h(p.k / 2),
        d(p.devices_per_host),
        hosts(std::int64_t{p.k} * h * h),
        devices(hosts * d) {
    su_base = static_cast<NodeId>(devices);
    edge_base = static_cast<NodeId>(su_base + (d > 1 ? hosts : 0));
    agg_base = static_cast<NodeId>(edge_base + k * h);
    core_base = static_cast<NodeId>(agg_base + k * h);
  }
  // The node a host's cable to its edge switch starts from: its scale-up switch or its device.
  [[nodiscard]] NodeId host_node(std::int64_t host) const {
    return static_cast<NodeId>(d > 1 ? su_base + host : host);
  }
  [[nodiscard]] NodeId edge(int pod, int e) const { return edge_base + pod * h + e; }
  [[nodiscard]] NodeId agg(int pod, int a) const { return agg_base + pod * h + a; }
  // Core group a joins aggregation switch a of every pod.
  [[nodiscard]] NodeId core(int a, int c) const { return core_base + a * h + c; }
  [[nodiscard]] std::int64_t num_nodes() const { return core_base + std::int64_t{h} * h; }

  int k, h, d;
  std::int64_t hosts, devices;
  NodeId su_base, edge_base, agg_base, core_base;
};

struct SpineLeafLayout {
  explicit SpineLeafLayout(const SpineLeafParams& p)
      : leaves(p.leaves),
        spines(p.spines),
        per_leaf(p.hosts_per_leaf),
        devices(std::int64_t{p.leaves} * p.hosts_per_leaf) {}
  [[nodiscard]] NodeId leaf(int l) const { return static_cast<NodeId>(devices + l); }
  [[nodiscard]] NodeId spine(int s) const { return static_cast<NodeId>(devices + leaves + s); }

  int leaves, spines, per_leaf;
  std::int64_t devices;
};

struct RailLayout {
  explicit RailLayout(const RailOptimizedParams& p)
      : nodes(p.nodes),
        gpus(p.gpus_per_node),
        per_leaf(p.nodes_per_leaf),
        spines(p.spines),
        units((p.nodes + p.nodes_per_leaf - 1) / p.nodes_per_leaf),
        devices(std::int64_t{p.nodes} * p.gpus_per_node) {
    nvs_base = static_cast<NodeId>(devices);
    leaf_base = static_cast<NodeId>(nvs_base + (has_nvswitch() ? nodes : 0));
    spine_base = static_cast<NodeId>(leaf_base + units * gpus);
  }
  // A node of one GPU needs no NVSwitch.
  [[nodiscard]] bool has_nvswitch() const { return gpus > 1; }
  [[nodiscard]] NodeId nvswitch(int node) const { return nvs_base + node; }
  [[nodiscard]] NodeId leaf(int unit, int rail) const { return leaf_base + unit * gpus + rail; }
  [[nodiscard]] NodeId spine(int s) const { return spine_base + s; }

  int nodes, gpus, per_leaf, spines, units;
  std::int64_t devices;
  NodeId nvs_base, leaf_base, spine_base;
};

struct HierarchicalLayout {
  explicit HierarchicalLayout(const HierarchicalParams& p) : fanout(p.devices_per_level) {
    span.push_back(1);
    for (const int f : fanout) span.push_back(span.back() * f);
    devices = span.back();
    std::int64_t next = devices;
    for (std::size_t j = 1; j < span.size(); ++j) {
      base.push_back(static_cast<NodeId>(next));
      next += devices / span[j];
    }
  }
  [[nodiscard]] int levels() const { return static_cast<int>(fanout.size()); }
  // The level-j switch (j >= 1) above device `dev`.
  [[nodiscard]] NodeId above(std::int64_t dev, int j) const {
    return static_cast<NodeId>(base[j - 1] + dev / span[j]);
  }

  std::vector<int> fanout;
  std::vector<std::int64_t> span;  // span[j] = devices under one level-j switch (span[0] = 1)
  std::vector<NodeId> base;        // base[j - 1] = id of the first level-j switch
  std::int64_t devices = 1;
};

struct DragonflyLayout {
  explicit DragonflyLayout(const DragonflyParams& p)
      : groups(p.groups),
        routers(p.routers_per_group),
        hosts(p.hosts_per_router),
        globals(p.global_links_per_router),
        devices(std::int64_t{p.groups} * p.routers_per_group * p.hosts_per_router) {
    rounds = groups > 1 ? routers * globals / (groups - 1) : 0;
  }
  [[nodiscard]] NodeId router(int g, int r) const {
    return static_cast<NodeId>(devices + std::int64_t{g} * routers + r);
  }
  // The router of group g that owns global port j.
  [[nodiscard]] int port_router(int j) const { return j / globals; }
  // Global port of group `from` used by the `round`-th cable to group `to`.
  [[nodiscard]] int port_to(int from, int to, int round) const {
    const int offset = ((to - from - 1) % groups + groups) % groups;
    return round * (groups - 1) + offset;
  }

  int groups, routers, hosts, globals, rounds;
  std::int64_t devices;
};

// Torus coordinates: x0 varies fastest.
struct TorusLayout {
  explicit TorusLayout(const TorusParams& p) : dims(p.dims) {
    for (const int m : dims) {
      stride.push_back(devices);
      devices *= m;
    }
  }
  [[nodiscard]] int coord(std::int64_t dev, std::size_t i) const {
    return static_cast<int>(dev / stride[i] % dims[i]);
  }

  std::vector<int> dims;
  std::vector<std::int64_t> stride;
  std::int64_t devices = 1;
};

}  // namespace nest::topo::detail
