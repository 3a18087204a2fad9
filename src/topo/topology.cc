#include "nest/topo/topology.h"

#include <utility>

#include "nest/core/error.h"

namespace nest::topo {

Topology::Topology(std::string name, Family family) : name_(std::move(name)), family_(family) {}
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

NodeId Topology::add_device(std::string name) {
  if (num_devices_ != nodes_.size()) {
    throw Error::internal("devices must be added before switches (" + name + ")");
  }
  nodes_.push_back(Node{std::move(name), NodeKind::kDevice, 0});
  out_.emplace_back();
  ++num_devices_;
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Topology::add_switch(std::string name, int tier) {
  nodes_.push_back(Node{std::move(name), NodeKind::kSwitch, tier});
  out_.emplace_back();
  return static_cast<NodeId>(nodes_.size() - 1);
}

LinkId Topology::add_link(NodeId a, NodeId b, Bandwidth bw_ab, Time lat_ab, Bandwidth bw_ba,
                          Time lat_ba) {
  if (a >= nodes_.size() || b >= nodes_.size() || a == b) {
    throw Error::internal("bad link endpoints in topology " + name_);
  }
  const auto id = static_cast<LinkId>(links_.size());
  links_.push_back(Link{a, b, bw_ab, lat_ab});
  links_.push_back(Link{b, a, bw_ba, lat_ba});
  out_[a].push_back(id);
  out_[b].push_back(id + 1);
  return id;
}

LinkId Topology::add_link(NodeId a, NodeId b, Bandwidth bw, Time latency) {
  return add_link(a, b, bw, latency, bw, latency);
}

std::span<const LinkId> Topology::out_links(NodeId id) const { return out_[id]; }

}  // namespace nest::topo
