#pragma once
/// \file
/// Topology generators, one per family of nest/topo/params.h. Each checks its parameters
/// (throwing an input `Error` whose key is the parameter's name, e.g. "k"), builds the graph in
/// the documented node order, records its parameters and its domain sizes, and returns a
/// validated topology. Time and memory are linear in the number of cables. Before building,
/// each computes its node and cable counts (nest/topo/size.h) and refuses, with an input error
/// naming the parameter that sets the size, more than 2^26 nodes, 2^31 - 1 cables or an
/// estimated memory over `max_memory_bytes`.

#include <cstdint>
#include <string>

#include "nest/config/limits.h"
#include "nest/topo/params.h"
#include "nest/topo/topology.h"

namespace nest::topo {

/// k-ary three-tier fat-tree: k^3/4 hosts, 5k^2/4 edge+aggregation+core switches, k^3/4
/// host cables + k^3/4 edge-aggregation + k^3/4 aggregation-core cables (+ one per device
/// when devices_per_host > 1). Domains: {devices_per_host, per edge, per pod, all}.
[[nodiscard]] Topology build_fat_tree(
    const FatTreeParams& params, std::string name = "fat_tree",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// Leaf-spine. Domains: {hosts_per_leaf, all}.
[[nodiscard]] Topology build_spine_leaf(
    const SpineLeafParams& params, std::string name = "spine_leaf",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// Torus with wrap-around. Domains: running products of the dims {d0, d0*d1, ..., all}.
[[nodiscard]] Topology build_torus(const TorusParams& params, std::string name = "torus",
                                   std::int64_t max_memory_bytes = config::machine_memory_limit());

/// Rail-optimized cluster. Domains: {gpus_per_node, gpus_per_node * nodes_per_leaf, all}.
[[nodiscard]] Topology build_rail_optimized(
    const RailOptimizedParams& params, std::string name = "rail_optimized",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// The NEST artifact's hierarchical tree. Domains: running products of devices_per_level.
[[nodiscard]] Topology build_hierarchical(
    const HierarchicalParams& params, std::string name = "hierarchical",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// Dragonfly. Domains: {hosts_per_router, per group, all}.
[[nodiscard]] Topology build_dragonfly(
    const DragonflyParams& params, std::string name = "dragonfly",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// ASTRA-sim's multi-dimensional network (`kind: dimensions`). Domains: running products of
/// npus_count {n0, n0*n1, ..., all}. npus_count, bandwidth and latency must have one entry per
/// dimension of kinds (`topology:`; key of the error: the list that does not), algorithms none
/// or one per dimension; halving_doubling needs a power-of-two dimension.
[[nodiscard]] Topology build_dimensions(
    const DimensionsParams& params, std::string name = "dimensions",
    std::int64_t max_memory_bytes = config::machine_memory_limit());

/// Checks a built topology: at least one device; unique node names; every rate and latency
/// > 0; every device has a link; the graph is connected. Throws an input `Error` naming the
/// offending node (key "nodes[i]") or link (key "links[i]", i = cable index); the loader of
/// explicit graphs maps these keys to the lines of its file. O(nodes + links).
void validate(const Topology& topology);

}  // namespace nest::topo
