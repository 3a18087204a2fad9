#pragma once
/// \file
/// ASTRA-sim's analytical network configs (astra-sim/astra-sim, inputs/network/analytical/*.yml
/// and examples/network/analytical/*.yml) as NEST topology files. Such a config is a map of four
/// lists, one entry per dimension, dimension 0 first:
///
///     topology: [ Ring, FullyConnected, Switch ]
///     npus_count: [ 2, 8, 4 ]
///     bandwidth: [ 200.0, 100.0, 50.0 ]  # GB/s
///     latency: [ 50.0, 500.0, 2000.0 ]   # ns
///
/// Its numbers carry no units: ASTRA-sim reads bandwidth in GB/s with 1 GB = 2^30 B and latency
/// in ns (astra-network-analytical, common/NetworkFunction: `bw_GBps_to_Bpns` multiplies by
/// 2^30 / 10^9), so the import writes "200 GiB/s" and "50 ns". The result is a `kind:
/// dimensions` file (nest/topo/loader.h, nest/topo/params.h DimensionsParams) with the same
/// device numbering (dimension 0 fastest) and each dimension's default collective algorithm.

#include <string>

namespace nest::config {
class Node;
}

namespace nest::topo {

/// The text of the NEST topology file equivalent to the ASTRA-sim config `root` (its file name
/// gives the topology's name, without folder and extension). Throws an input `Error` naming the
/// file, line and key when a key is unknown or missing, a dimension kind is not Ring,
/// FullyConnected or Switch, a count is not an integer >= 1, a bandwidth or latency is not a
/// number > 0 (ASTRA-sim's own files hold "tbd" in places), or the four lists differ in length.
/// The text is not checked against the size limits: load it (`load_topology_string`) for that.
[[nodiscard]] std::string import_astra_sim_network(const config::Node& root);

}  // namespace nest::topo
