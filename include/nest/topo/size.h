#pragma once
/// \file
/// The size of a topology before it is built: node and cable counts from a generator's
/// parameters (computed with overflow checks), and the memory the built topology needs. The
/// generators call `check_size` first, so that a small file cannot ask for billions of links.

#include <cstdint>
#include <string>

#include "nest/topo/params.h"

namespace nest::topo {

/// Most nodes (devices + switches) of a topology: ids stay well inside 32 bits.
inline constexpr std::int64_t kMaxTopologyNodes = std::int64_t{1} << 26;
/// Most cables: directed link ids (two per cable) fit 32 bits.
inline constexpr std::int64_t kMaxTopologyCables = (std::int64_t{1} << 31) - 1;
/// Estimated bytes per node of a built topology (name, kind, tier, its list of links) and of
/// the name index that validation builds. Measured: see `estimated_bytes`.
inline constexpr std::int64_t kBytesPerNode = 160;
/// Estimated bytes per cable: two directed links of 24 bytes, their entries in the two nodes'
/// link lists, and the spare capacity of growing arrays.
inline constexpr std::int64_t kBytesPerCable = 128;

/// What a generator would build. Counts saturate at INT64_MAX when they overflow (a size that
/// large is refused by `check_size` anyway).
struct TopologySize {
  std::int64_t devices = 0;
  std::int64_t switches = 0;
  std::int64_t cables = 0;

  /// devices + switches (saturating).
  [[nodiscard]] std::int64_t nodes() const noexcept;
  /// kBytesPerNode · nodes + kBytesPerCable · cables (saturating). Against `nest topology
  /// describe`'s peak resident memory: 454 MB for a 2,048 × 2,048 spine-leaf with 16 hosts per
  /// leaf (36,864 nodes, 4,227,072 cables; estimate 547 MB) and 667 MB for a 128^3 torus
  /// (2,097,152 nodes, 6,291,456 cables; estimate 1.14 GB).
  [[nodiscard]] std::int64_t estimated_bytes() const noexcept;
};

/// The sizes each generator of nest/topo/generators.h builds from valid parameters (counts of
/// parameters below their minimum are taken as the minimum). O(1), O(dims) or O(levels).
[[nodiscard]] TopologySize size_of(const FatTreeParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const SpineLeafParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const TorusParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const RailOptimizedParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const HierarchicalParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const DragonflyParams& p) noexcept;
[[nodiscard]] TopologySize size_of(const DimensionsParams& p) noexcept;

/// Throws an input `Error` whose key is `key` (the parameter that sets the size) when `size`
/// has more than kMaxTopologyNodes nodes or kMaxTopologyCables cables, or when its estimated
/// memory is over `max_memory_bytes`; the message names the count and the estimate, e.g.
/// `topology too large (got "67,125,248 cables and 16,384 nodes: an estimated 8.00 GiB";
/// expected at most 11.7 GiB (--max-memory raises the limit))`.
void check_size(const TopologySize& size, std::int64_t max_memory_bytes, const std::string& key);

}  // namespace nest::topo
