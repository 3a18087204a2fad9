#pragma once
/// \file
/// Parameters of the topology generators. A generated `Topology` keeps the parameters that made
/// it (`Topology::params()`), so that routing and metrics can use the structure in closed form
/// instead of searching the graph. Every rate is per direction of a full-duplex cable.

#include <cstdint>
#include <variant>
#include <vector>

#include "nest/core/units.h"

namespace nest::topo {

/// k-ary three-tier fat-tree (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and k/2
/// aggregation switches, (k/2)^2 core switches, k/2 hosts per edge switch, k^3/4 hosts.
///
/// Device numbering: device = host * devices_per_host + local, host = (pod * k/2 + edge) * k/2 +
/// port. With devices_per_host > 1 each host is a scale-up switch (tier 1) joining its devices,
/// with one cable to its edge switch; otherwise a device is the host and links to its edge
/// switch directly. Switch tiers: scale-up 1 (if any), then edge, aggregation, core.
///
/// Oversubscription is the ratio of down to up capacity of a switch; it is realized by lowering
/// the rate of the up cables, so the switch counts stay those of the k-ary tree: edge-aggregation
/// cables run at link_bandwidth / edge_oversubscription, aggregation-core cables at
/// link_bandwidth / (edge_oversubscription * aggregation_oversubscription).
struct FatTreeParams {
  int k = 4;                                ///< switch radix, even, >= 2
  Bandwidth link_bandwidth;                 ///< host-edge cable rate (and fabric rate at 1:1)
  Time link_latency;                        ///< latency of every fabric cable
  double edge_oversubscription = 1;         ///< >= 1
  double aggregation_oversubscription = 1;  ///< >= 1
  int devices_per_host = 1;                 ///< >= 1
  Bandwidth scale_up_bandwidth;             ///< device to scale-up switch (devices_per_host > 1)
  Time scale_up_latency;                    ///< device to scale-up switch (devices_per_host > 1)
};

/// Two-tier leaf-spine: every leaf links to every spine once; hosts_per_leaf devices per leaf.
/// Device numbering: device = leaf * hosts_per_leaf + port. Switches: leaves (tier 1), spines
/// (tier 2).
struct SpineLeafParams {
  int leaves = 2;          ///< >= 1
  int spines = 1;          ///< >= 1
  int hosts_per_leaf = 1;  ///< >= 1
  Bandwidth host_bandwidth;
  Time host_latency;
  Bandwidth uplink_bandwidth;  ///< leaf-spine cable rate
  Time uplink_latency;
};

/// n-dimensional torus of devices (no switches), wrap-around in every dimension.
/// Device numbering: coordinates (x0, x1, ...) map to x0 + d0 * (x1 + d1 * (x2 + ...)), so x0
/// varies fastest. A dimension of size >= 3 is a ring of d cables; of size 2, one cable; of
/// size 1, none.
struct TorusParams {
  std::vector<int> dims;  ///< each >= 1
  Bandwidth link_bandwidth;
  Time link_latency;
};

/// Rail-optimized cluster of DGX-style nodes. Each node's GPUs link to one NVSwitch (modelled as
/// a single switch, tier 1). GPU r of every node links to the leaf switch of rail r that serves
/// its node; a leaf serves `nodes_per_leaf` consecutive nodes (a scalable unit), so there are
/// ceil(nodes / nodes_per_leaf) leaves per rail (tier 2). Every leaf links once to each of the
/// `spines` spine switches (tier 3); fewer spines than nodes_per_leaf oversubscribes the leaf
/// (nodes_per_leaf * nic_bandwidth down versus spines * spine_bandwidth up).
///
/// Device numbering: device = node * gpus_per_node + gpu. Switch order: NVSwitches by node, then
/// leaves by (unit, rail), then spines. Routes never pass through a GPU: different-rail traffic
/// between nodes goes leaf-spine-leaf (no PXN forwarding).
struct RailOptimizedParams {
  int nodes = 1;           ///< >= 1
  int gpus_per_node = 8;   ///< = number of rails, >= 1
  int nodes_per_leaf = 1;  ///< >= 1
  int spines = 1;          ///< >= 1
  Bandwidth nvlink_bandwidth;
  Time nvlink_latency;
  Bandwidth nic_bandwidth;  ///< GPU to rail leaf
  Time nic_latency;
  Bandwidth spine_bandwidth;  ///< leaf to spine
  Time spine_latency;
};

/// The NEST artifact's hierarchical network (scai-tech/Nest, nest/Estimator/utils/network.py):
/// a tree. Level 0 groups devices_per_level[0] devices under a level-1 switch with cables of
/// bandwidth_per_level[0] / latency_per_level[0]; level i groups devices_per_level[i] level-i
/// switches under a level-(i+1) switch with cables of bandwidth_per_level[i]; the last level has
/// a single root switch. Devices = product of devices_per_level; device numbering is the
/// natural one (devices of a level-1 switch are consecutive). Switch tier = level.
struct HierarchicalParams {
  std::vector<int> devices_per_level;  ///< each >= 1
  std::vector<Bandwidth> bandwidth_per_level;
  std::vector<Time> latency_per_level;
};

/// Dragonfly (Kim et al., ISCA 2008): `groups` groups of `routers_per_group` routers, all-to-all
/// inside a group; each router has `hosts_per_router` devices and `global_links_per_router`
/// global cables. Global port j of group g (on router j / global_links_per_router) goes to group
/// (g + 1 + j mod (groups - 1)) mod groups, so every pair of groups is joined by
/// routers_per_group * global_links_per_router / (groups - 1) cables (which must be whole).
/// Device numbering: device = (group * routers_per_group + router) * hosts_per_router + port.
/// Routing is the usual minimal routing: at most one global hop (local, global, local).
struct DragonflyParams {
  int groups = 2;                   ///< >= 1
  int routers_per_group = 1;        ///< >= 1
  int hosts_per_router = 1;         ///< >= 1
  int global_links_per_router = 1;  ///< >= 0 (>= 1 when groups > 1)
  Bandwidth host_bandwidth;
  Time host_latency;
  Bandwidth local_bandwidth;
  Time local_latency;
  Bandwidth global_bandwidth;
  Time global_latency;
};

/// A graph listed node by node (no structure known): routed by shortest latency, then hops.
struct ExplicitParams {};

/// The building block of one dimension of a `DimensionsParams` network, as ASTRA-sim's
/// analytical network names them (astra-sim/astra-network-analytical, `topology:` key).
enum class DimensionKind : std::uint8_t {
  kRing,            ///< bidirectional ring: member x cabled to x+1 (mod n); n = 2: one cable
  kFullyConnected,  ///< a cable between every pair of members
  kSwitch,          ///< one switch per group, a cable from every member to it (2 hops apart)
};

/// The collective algorithm a hierarchical collective runs on a dimension, with ASTRA-sim's
/// names (its system config `all-reduce-implementation: [ring, direct, ...]`).
enum class DimensionAlgorithm : std::uint8_t {
  kRing,              ///< "ring": d-1 steps to the next member
  kDirect,            ///< "direct": one step, every member to every member
  kHalvingDoubling,   ///< "halving_doubling": log2(d) steps (d a power of two)
  kDoubleBinaryTree,  ///< "double_binary_tree": allreduce of the dimension's segment by two
                      ///< trees (only on the outermost dimension of an allreduce)
};

/// ASTRA-sim's multi-dimensional network (`topology: [Ring, FullyConnected, Switch]`,
/// `npus_count: [2, 8, 4]`): devices = product of npus_count, numbered with dimension 0
/// fastest, device = x0 + n0 * (x1 + n1 * (x2 + ...)). In dimension i the devices that share
/// every other coordinate form a group of npus_count[i] members joined by that dimension's
/// building block with cables of bandwidth[i] / latency[i] (per direction). Switches: one per
/// group of each Switch dimension (tier = i + 1), in dimension order, groups by their lowest
/// device. Devices forward (a ring's and a dimension change's paths pass through them), as in
/// ASTRA-sim.
struct DimensionsParams {
  std::vector<DimensionKind> kinds;  ///< one per dimension, dimension 0 first
  std::vector<int> npus_count;       ///< each >= 1
  std::vector<Bandwidth> bandwidth;  ///< per link and direction
  std::vector<Time> latency;         ///< per link
  /// The algorithm of each dimension in hierarchical collectives (empty: the kind's default,
  /// `default_dimension_algorithm`).
  std::vector<DimensionAlgorithm> algorithms;
};

/// The algorithm a dimension runs unless its file says otherwise: ring on Ring and Switch,
/// direct on FullyConnected (a ring there would use 2 of each member's n-1 links).
[[nodiscard]] constexpr DimensionAlgorithm default_dimension_algorithm(DimensionKind k) noexcept {
  return k == DimensionKind::kFullyConnected ? DimensionAlgorithm::kDirect
                                             : DimensionAlgorithm::kRing;
}

/// The parameters of whichever generator made a topology.
using TopologyParams =
    std::variant<ExplicitParams, FatTreeParams, SpineLeafParams, TorusParams, RailOptimizedParams,
                 HierarchicalParams, DragonflyParams, DimensionsParams>;

}  // namespace nest::topo
