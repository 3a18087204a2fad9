#pragma once
/// \file
/// Minimal-path routing with a per-router cache.
///
/// - Fat-tree, spine-leaf, rail-optimized, dragonfly: equal-cost multipath. The path between two
///   devices is chosen among the equal-cost minimal paths by
///   `hash_mix(hash_mix(seed, flow), src << 32 | dst) % path_count(src, dst)`: the flow key plays
///   the role of a packet's port numbers, so different flows of one pair spread over the paths
///   and a given (seed, flow, src, dst) always takes the same path. Paths are computed in closed
///   form from the generator's structure (no graph search). Routes never pass through a device
///   (no PXN forwarding) on these families. Dragonfly uses the usual minimal routing (local,
///   global, local: one global hop), which can be one hop longer than a two-global-hop detour.
/// - Torus: dimension-order routing, dimension 0 first, the shorter direction in each dimension;
///   where both directions are equally short (ring of even size, distance size/2) both are
///   minimal and the hash picks one, so path_count = 2^(number of such dimensions).
/// - Hierarchical: the unique tree path (up to the lowest common switch and down).
/// - Explicit: the path of least total latency, then fewest hops (Dijkstra on a Boost.Graph
///   view, one shortest-path tree per source, computed on first use); one path per pair.
///
/// route() computes each (src, dst, path index) once and keeps it, so that its span stays valid:
/// memory grows with the distinct routes asked for (about 4 bytes per hop plus ~60 bytes per
/// route), never with unused pairs. route_into() copies the route out instead and keeps only a
/// fixed-size table of recent ones (bounded memory, for routes used once).

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "nest/topo/topology.h"

namespace nest::topo {

class Router {
 public:
  /// `topology` must outlive the router. `seed` varies the ECMP choice. O(links log degree).
  explicit Router(const Topology& topology, std::uint64_t seed = 0);
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  /// Directed links from device `src` to device `dst`, in path order (empty when src == dst).
  /// `flow` selects one of the equal-cost paths. The span stays valid for the router's life.
  /// Not thread-safe (the cache); give each thread its own router. Throws Error (internal) when
  /// a device id is out of range.
  [[nodiscard]] std::span<const LinkId> route(DeviceId src, DeviceId dst, std::uint64_t flow = 0);

  /// The route that route(src, dst, flow) returns, written to `out` (its old contents replaced)
  /// instead of the route cache: for routes used once, such as an all-to-all's n(n-1) pairs,
  /// whose spans would hold ~100 bytes each for the router's life. Memory stays bounded: the
  /// last routes computed this way are kept in a fixed 256 KiB table, so repeated pairs (a
  /// ring's neighbours) are copied rather than recomputed; fat-tree routes, a few reads of
  /// per-switch link tables, skip it. Same errors as route().
  void route_into(DeviceId src, DeviceId dst, std::uint64_t flow, std::vector<LinkId>& out);

  /// Number of equal-cost minimal paths the router chooses among for (src, dst); >= 1. O(1)
  /// except on dragonflies (O(cables between the two groups)) and explicit graphs (1).
  [[nodiscard]] std::uint64_t path_count(DeviceId src, DeviceId dst) const;

  /// The `index`-th of the path_count(src, dst) paths (index taken modulo the count); cached like
  /// route(). Paths of different indices differ in at least one link.
  [[nodiscard]] std::span<const LinkId> route_path(DeviceId src, DeviceId dst, std::uint64_t index);

  /// The index that route(src, dst, flow) uses.
  [[nodiscard]] std::uint64_t path_index(DeviceId src, DeviceId dst, std::uint64_t flow) const;

  /// Routes held in the cache.
  [[nodiscard]] std::size_t cached_routes() const noexcept;
  [[nodiscard]] std::uint64_t seed() const noexcept;
  [[nodiscard]] const Topology& topology() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::topo
