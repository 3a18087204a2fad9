#pragma once
/// \file
/// Minimal-path routing with a per-router cache. ECMP on multi-path fabrics picks among equal-cost
/// paths by a deterministic hash of (flow key, seed); tori use dimension-order routing (shortest
/// direction per dimension); other graphs take the shortest path by latency, then hops.

#include <cstdint>
#include <memory>
#include <span>

#include "nest/topo/topology.h"

namespace nest::topo {

class Router {
 public:
  /// `topology` must outlive the router. `seed` varies the ECMP choice.
  explicit Router(const Topology& topology, std::uint64_t seed = 0);
  ~Router();
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;

  /// Directed links from device `src` to device `dst`, in path order (empty when src == dst).
  /// `flow` selects one of the equal-cost paths. The span stays valid for the router's life.
  /// Not thread-safe (the cache); give each thread its own router.
  [[nodiscard]] std::span<const LinkId> route(DeviceId src, DeviceId dst, std::uint64_t flow = 0);

  [[nodiscard]] const Topology& topology() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace nest::topo
