#include "nest/topo/topology.h"

#include <utility>

#include "nest/core/error.h"

namespace nest::topo {

const char* family_name(Family family) noexcept {
  switch (family) {
    case Family::kFatTree:
      return "fat_tree";
    case Family::kSpineLeaf:
      return "spine_leaf";
    case Family::kTorus:
      return "torus";
    case Family::kRailOptimized:
      return "rail_optimized";
    case Family::kHierarchical:
      return "hierarchical";
    case Family::kDragonfly:
      return "dragonfly";
    case Family::kExplicit:
      return "explicit";
    case Family::kDimensions:
      return "dimensions";
  }
  return "explicit";
}

Topology::Topology(std::string name, Family family) : name_(std::move(name)), family_(family) {}
Topology::~Topology() = default;
Topology::Topology(Topology&&) noexcept = default;
Topology& Topology::operator=(Topology&&) noexcept = default;

NodeId Topology::add_device(std::string name, bool forwards) {
  if (num_devices_ != nodes_.size()) {
    throw Error::internal("devices must be added before switches (" + name + ")");
  }
  nodes_.push_back(Node{std::move(name), NodeKind::kDevice, 0, forwards});
  out_.emplace_back();
  ++num_devices_;
  if (!domains_set_) domain_sizes_ = {static_cast<int>(num_devices_)};
  return static_cast<NodeId>(nodes_.size() - 1);
}

NodeId Topology::add_switch(std::string name, int tier) {
  if (tier < 1) throw Error::internal("switch tier must be >= 1 (" + name + ")");
  nodes_.push_back(Node{std::move(name), NodeKind::kSwitch, tier, true});
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

std::optional<LinkId> Topology::find_link(NodeId a, NodeId b) const {
  for (const LinkId l : out_[a]) {
    if (links_[l].dst == b) return l;
  }
  return std::nullopt;
}

void Topology::set_params(TopologyParams params) {
  constexpr Family kByIndex[] = {Family::kExplicit,  Family::kFatTree,       Family::kSpineLeaf,
                                 Family::kTorus,     Family::kRailOptimized, Family::kHierarchical,
                                 Family::kDragonfly, Family::kDimensions};
  if (kByIndex[params.index()] != family_) {
    throw Error::internal("parameters do not match the family of topology " + name_);
  }
  params_ = std::move(params);
}

void Topology::set_domain_sizes(std::vector<int> sizes) {
  std::vector<int> kept;
  for (const int s : sizes) {
    if (s == 1 || (!kept.empty() && kept.back() == s)) continue;
    if (s < 1 || (!kept.empty() && s % kept.back() != 0)) {
      throw Error::internal("domain sizes must each divide the next in topology " + name_);
    }
    kept.push_back(s);
  }
  if (num_devices_ == 1 && kept.empty()) kept.push_back(1);
  if (kept.empty() || kept.back() != static_cast<int>(num_devices_)) {
    throw Error::internal("the last domain size must be the device count in topology " + name_);
  }
  domain_sizes_ = std::move(kept);
  domains_set_ = true;
}

Topology Topology::with_links(std::vector<Link> links) const {
  if (links.size() != links_.size()) {
    throw Error::internal("with_links: link count differs in topology " + name_);
  }
  for (std::size_t i = 0; i < links.size(); ++i) {
    if (links[i].src != links_[i].src || links[i].dst != links_[i].dst) {
      throw Error::internal("with_links: link endpoints differ in topology " + name_);
    }
  }
  Topology t(name_, family_);
  t.params_ = params_;
  t.num_devices_ = num_devices_;
  t.nodes_ = nodes_;
  t.links_ = std::move(links);
  t.out_ = out_;
  t.domain_sizes_ = domain_sizes_;
  t.domains_set_ = domains_set_;
  t.collective_model_ = collective_model_;
  t.nvlink_sharp_ = nvlink_sharp_;
  return t;
}

}  // namespace nest::topo
