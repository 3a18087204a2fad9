#pragma once
/// \file
/// The interconnect: devices (accelerators, ids 0..N-1) and switches joined by full-duplex links.
/// Each link is two directed links with their own bandwidth and latency. This header keeps the
/// flat arrays that the simulator's hot path reads; graph algorithms (shortest paths, max-flow,
/// connectivity) run on a Boost.Graph view built in src/topo/ only.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nest/core/units.h"

namespace nest::topo {

/// A node: devices are 0..num_devices()-1, switches follow.
using NodeId = std::uint32_t;
/// A device (accelerator) id, equal to its NodeId.
using DeviceId = std::uint32_t;
/// A directed link; the two directions of a cable have consecutive ids (2i, 2i+1).
using LinkId = std::uint32_t;

enum class NodeKind : std::uint8_t { kDevice, kSwitch };

/// One node. `tier` is 0 for devices, and for switches the level in the generator's hierarchy
/// (1 = the switch devices attach to, e.g. NVSwitch or edge; higher = further up).
struct Node {
  std::string name;
  NodeKind kind = NodeKind::kDevice;
  int tier = 0;
};

/// One direction of a cable.
struct Link {
  NodeId src = 0;
  NodeId dst = 0;
  Bandwidth bandwidth;
  Time latency;
};

/// Which generator made a topology; routing and the exact bisection use it.
enum class Family : std::uint8_t {
  kFatTree,
  kSpineLeaf,
  kTorus,
  kRailOptimized,
  kHierarchical,
  kDragonfly,
  kExplicit,
};

class Topology {
 public:
  /// Adds nodes with `add_device`/`add_switch` (all devices first), then links.
  explicit Topology(std::string name, Family family);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  NodeId add_device(std::string name);
  NodeId add_switch(std::string name, int tier);
  /// Adds a full-duplex cable: link 2i goes a->b with (bw_ab, lat_ab), 2i+1 goes b->a.
  LinkId add_link(NodeId a, NodeId b, Bandwidth bw_ab, Time lat_ab, Bandwidth bw_ba, Time lat_ba);
  /// Symmetric cable.
  LinkId add_link(NodeId a, NodeId b, Bandwidth bw, Time latency);

  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] Family family() const noexcept { return family_; }
  [[nodiscard]] std::size_t num_devices() const noexcept { return num_devices_; }
  [[nodiscard]] std::size_t num_nodes() const noexcept { return nodes_.size(); }
  [[nodiscard]] std::size_t num_switches() const noexcept { return nodes_.size() - num_devices_; }
  /// Directed links (twice the number of cables).
  [[nodiscard]] std::size_t num_links() const noexcept { return links_.size(); }

  [[nodiscard]] const Node& node(NodeId id) const { return nodes_[id]; }
  [[nodiscard]] const Link& link(LinkId id) const { return links_[id]; }
  [[nodiscard]] std::span<const Link> links() const noexcept { return links_; }
  /// The other direction of a cable.
  [[nodiscard]] static constexpr LinkId reverse(LinkId id) noexcept { return id ^ 1U; }
  /// Directed links leaving `id`, in the order they were added.
  [[nodiscard]] std::span<const LinkId> out_links(NodeId id) const;

 private:
  std::string name_;
  Family family_;
  std::size_t num_devices_ = 0;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> out_;  // directed links leaving each node
};

}  // namespace nest::topo
