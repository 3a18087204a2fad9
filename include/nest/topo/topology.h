#pragma once
/// \file
/// The interconnect: devices (accelerators, ids 0..N-1) and switches joined by full-duplex links.
/// Each link is two directed links with their own bandwidth and latency. This header keeps the
/// flat arrays that the simulator's hot path reads; graph algorithms (shortest paths, max-flow,
/// connectivity) run on a Boost.Graph `adjacency_list` view built in src/topo/ only.
///
/// Memory is linear in nodes + links. A topology is immutable once built and validated, so any
/// number of threads may read it at once.

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "nest/core/units.h"
#include "nest/topo/collective_model.h"
#include "nest/topo/params.h"

namespace nest::topo {

/// A node: devices are 0..num_devices()-1, switches follow.
using NodeId = std::uint32_t;
/// A device (accelerator) id, equal to its NodeId.
using DeviceId = std::uint32_t;
/// A directed link; the two directions of a cable have consecutive ids (2i, 2i+1).
using LinkId = std::uint32_t;

/// What a node is: an endpoint that computes, or a switch that only forwards.
enum class NodeKind : std::uint8_t { kDevice, kSwitch };

/// One node. `tier` is 0 for devices, and for switches the level in the generator's hierarchy
/// (1 = the switch devices attach to, e.g. NVSwitch or edge; higher = further up).
///
/// `forwards`: whether routes may pass through the node. Switches always forward. Devices of
/// the torus and `dimensions` families forward (they are the network's routers, as in a TPU
/// torus or ASTRA-sim's rings); devices of the other generators do not (their routes never
/// pass through a device anyway); devices of explicit files forward only when marked
/// `forwarding: true`. A route starts and ends at devices whatever their flag.
struct Node {
  std::string name;                   ///< unique within the topology
  NodeKind kind = NodeKind::kDevice;  ///< device or switch
  int tier = 0;                       ///< 0 for devices; switch level, 1 = closest to devices
  bool forwards = true;               ///< routes may pass through it (see above)
};

/// One direction of a cable.
struct Link {
  NodeId src = 0;       ///< the node the data leaves
  NodeId dst = 0;       ///< the node the data reaches
  Bandwidth bandwidth;  ///< rate of this direction, > 0 in a valid topology
  Time latency;         ///< propagation + switching latency of this direction, > 0
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
  kDimensions,  ///< ASTRA-sim's multi-dimensional network (DimensionsParams)
};

/// Lower-case name of a family as YAML spells it after `kind:` ("fat_tree", "torus", ...).
[[nodiscard]] const char* family_name(Family family) noexcept;

/// Devices 0..N-1, then switches, joined by full-duplex cables. Build with `add_device` /
/// `add_switch` (all devices first), then `add_link`; the generators of nest/topo/generators.h
/// and the loader of nest/topo/loader.h do this and validate the result.
class Topology {
 public:
  /// An empty topology of `family` (whose parameters default to those of ExplicitParams).
  explicit Topology(std::string name, Family family = Family::kExplicit);
  ~Topology();
  Topology(Topology&&) noexcept;
  Topology& operator=(Topology&&) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  /// Adds device number num_devices(); throws Error (internal) once a switch exists.
  /// `forwards`: whether routes may pass through it (Node::forwards). The default, true, keeps
  /// graphs built by hand as they were; the loader and the generators set it explicitly.
  NodeId add_device(std::string name, bool forwards = true);
  /// Adds a switch at `tier` (>= 1) and returns its id.
  NodeId add_switch(std::string name, int tier);
  /// Adds a full-duplex cable: link 2i goes a->b with (bw_ab, lat_ab), 2i+1 goes b->a.
  LinkId add_link(NodeId a, NodeId b, Bandwidth bw_ab, Time lat_ab, Bandwidth bw_ba, Time lat_ba);
  /// Symmetric cable.
  LinkId add_link(NodeId a, NodeId b, Bandwidth bw, Time latency);

  /// The topology's name (the `name:` of its file, or the generator's choice).
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  /// Which generator made it; kExplicit for listed graphs.
  [[nodiscard]] Family family() const noexcept { return family_; }
  /// Number of devices N; devices are nodes 0..N-1.
  [[nodiscard]] std::size_t num_devices() const noexcept { return num_devices_; }
  /// Devices plus switches.
  [[nodiscard]] std::size_t num_nodes() const noexcept { return nodes_.size(); }
  /// Switches are nodes N..num_nodes()-1.
  [[nodiscard]] std::size_t num_switches() const noexcept { return nodes_.size() - num_devices_; }
  /// Directed links (twice the number of cables).
  [[nodiscard]] std::size_t num_links() const noexcept { return links_.size(); }
  /// Full-duplex cables (num_links() / 2).
  [[nodiscard]] std::size_t num_cables() const noexcept { return links_.size() / 2; }

  /// Node `id` (< num_nodes(); unchecked).
  [[nodiscard]] const Node& node(NodeId id) const { return nodes_[id]; }
  /// True when `id` is a device.
  [[nodiscard]] bool is_device(NodeId id) const noexcept { return id < num_devices_; }
  /// True when routes may pass through node `id` (switches, forwarding devices).
  [[nodiscard]] bool forwards(NodeId id) const { return nodes_[id].forwards; }
  /// Directed link `id` (< num_links(); unchecked).
  [[nodiscard]] const Link& link(LinkId id) const { return links_[id]; }
  /// All directed links; link 2i and 2i+1 are the two directions of cable i.
  [[nodiscard]] std::span<const Link> links() const noexcept { return links_; }
  /// The other direction of a cable.
  [[nodiscard]] static constexpr LinkId reverse(LinkId id) noexcept { return id ^ 1U; }
  /// Directed links leaving `id`, in the order they were added.
  [[nodiscard]] std::span<const LinkId> out_links(NodeId id) const;
  /// The first directed link from `a` to `b`, if any. O(out-degree of a).
  [[nodiscard]] std::optional<LinkId> find_link(NodeId a, NodeId b) const;

  /// The generator's parameters (ExplicitParams for listed graphs).
  [[nodiscard]] const TopologyParams& params() const noexcept { return params_; }
  /// Records the generator's parameters; their alternative must match family().
  void set_params(TopologyParams params);

  /// Nested grouping of devices into domains, innermost first: each size divides the next and
  /// the last is num_devices(). Domain j holds devices [i * size_j, (i + 1) * size_j). Examples:
  /// rail-optimized 128 x 8 GPUs with 32 nodes per leaf: {8, 256, 1024} (node, scalable unit,
  /// all); fat-tree: {devices per host (if > 1), per edge switch, per pod, all}; hierarchical:
  /// the running products of devices_per_level; torus: the running products of the dims.
  /// Defaults to {num_devices()}.
  [[nodiscard]] const std::vector<int>& domain_sizes() const noexcept { return domain_sizes_; }
  /// Sets the domain sizes; throws Error (internal) unless each divides the next and the last
  /// equals num_devices(). Sizes of 1 and repeats are dropped.
  void set_domain_sizes(std::vector<int> sizes);

  /// The collective model the topology's file names (`collectives:`), or null: collectives then
  /// run at line rate with the topology's latencies (the ideal model). Shared, immutable.
  [[nodiscard]] const std::shared_ptr<const CollectiveModel>& collective_model() const noexcept {
    return collective_model_;
  }
  /// Sets the collective model (null: ideal); the loader does this for `collectives:`.
  void set_collective_model(std::shared_ptr<const CollectiveModel> model) {
    collective_model_ = std::move(model);
  }
  /// True when the scale-up switches reduce in the switch (NVLink SHARP, the file's
  /// `nvlink_sharp: true`): allreduce may then use the `nvls` algorithm inside a scale-up
  /// domain whose devices all hang off one switch.
  [[nodiscard]] bool nvlink_sharp() const noexcept { return nvlink_sharp_; }
  /// Sets whether the scale-up switches reduce (the loader does this for `nvlink_sharp:`).
  void set_nvlink_sharp(bool on) noexcept { nvlink_sharp_ = on; }

  /// A copy with the same nodes, parameters, domains, model and switch features whose directed
  /// link i is `links[i]` (same endpoints; rates and latencies may differ): what a collective
  /// model calibrates. Throws Error (internal) when the links do not match. O(nodes + links).
  [[nodiscard]] Topology with_links(std::vector<Link> links) const;

 private:
  std::string name_;
  Family family_;
  TopologyParams params_;
  std::size_t num_devices_ = 0;
  std::vector<Node> nodes_;
  std::vector<Link> links_;
  std::vector<std::vector<LinkId>> out_;  // directed links leaving each node
  std::vector<int> domain_sizes_;         // {num_devices_} until set_domain_sizes
  bool domains_set_ = false;
  std::shared_ptr<const CollectiveModel> collective_model_;
  bool nvlink_sharp_ = false;
};

}  // namespace nest::topo
