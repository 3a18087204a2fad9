#pragma once
/// \file
/// Topology files (YAML). Every file is a map with `kind:` (fat_tree, spine_leaf, torus,
/// rail_optimized, hierarchical, dragonfly, explicit, dimensions), an optional `name:` (default:
/// the file name without directory and extension) and `description:`, and the keys of its kind.
/// Reading is strict: unknown keys, missing keys, numbers without units, non-positive rates or
/// latencies, and out-of-range counts are input errors naming file:line and the key. Keys per kind
/// (every bandwidth and latency is a string with its unit, e.g. "400 Gb/s", "1 us"):
///
/// - fat_tree: k, link_bandwidth, link_latency; optional edge_oversubscription,
///   aggregation_oversubscription (ratios >= 1, default 1), devices_per_host (default 1) with
///   scale_up_bandwidth and scale_up_latency (required when devices_per_host > 1).
/// - spine_leaf: leaves, spines, hosts_per_leaf, host_bandwidth, host_latency,
///   uplink_bandwidth, uplink_latency.
/// - torus: dims (list), link_bandwidth, link_latency.
/// - rail_optimized: nodes, gpus_per_node, nodes_per_leaf, spines, nvlink_bandwidth,
///   nvlink_latency, nic_bandwidth, nic_latency, spine_bandwidth, spine_latency.
/// - hierarchical: devices_per_level, bandwidth_per_level, latency_per_level (lists of equal
///   length).
/// - dragonfly: groups, routers_per_group, hosts_per_router, global_links_per_router,
///   host_/local_/global_bandwidth and host_/local_/global_latency.
/// - explicit: `nodes:` a list of {name, kind: device|switch, tier (switches, default 1)};
///   `links:` a list of {a, b, bandwidth, latency, optional reverse_bandwidth,
///   reverse_latency (the b -> a direction; default: the same)}; optional `domain_sizes:`.
///   Devices are numbered in the order they are listed, switches follow. Devices do not forward:
///   a route never passes through a device unless it is marked `forwarding: true` (a GPU is an
///   endpoint; a flow between nodes takes the rail and spine switches, never another GPU's
///   NVLink and NIC). A graph in which two devices are joined only through devices that do not
///   forward is refused, naming the pair.
/// - dimensions: ASTRA-sim's notation, one entry per dimension, dimension 0 first:
///   `topology:` (Ring, FullyConnected or Switch), `npus_count:`, `bandwidth:`, `latency:`
///   (with units, unlike ASTRA-sim's files: `nest topology import` converts those, see
///   nest/topo/astra_sim.h), optional `collective_algorithms:` (ring, direct,
///   halving_doubling, double_binary_tree; default ring, direct on FullyConnected).
///
/// Every kind also takes `collectives:` (a collective model: a `kind: collective_model` file, a
/// list of them merged, or an inline map, files relative to the topology file's folder; see
/// nest/topo/collective_model.h; `Topology::collective_model()`) and `nvlink_sharp:` (true when
/// the scale-up switches reduce in the switch; `Topology::nvlink_sharp()`).
///
/// The parameter meanings and device numbering are those of nest/topo/params.h.

#include <string>
#include <string_view>

#include "nest/config/limits.h"
#include "nest/topo/topology.h"

namespace nest::config {
class Node;
}

namespace nest::topo {

/// Loads and validates the topology file at `path`. Throws Error (input) on any problem: the
/// file is read by `config::read_input_file` (at most `limits.max_input_bytes`), and a
/// topology whose node or cable counts or estimated memory pass the limits of
/// nest/topo/size.h (`limits.max_memory_bytes`) is refused before it is built.
[[nodiscard]] Topology load_topology(const std::string& path, const config::Limits& limits = {});

/// Same from YAML text; `file_name` stands for the file in messages and gives the default name.
[[nodiscard]] Topology load_topology_string(std::string_view text, const std::string& file_name,
                                            const config::Limits& limits = {});

/// Same from a loaded document (its file name gives the default name).
[[nodiscard]] Topology load_topology(const config::Node& root, const config::Limits& limits = {});

}  // namespace nest::topo
