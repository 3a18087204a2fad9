#include "nest/coll/calibration.h"

#include <string>

#include "nest/core/error.h"

namespace nest::coll {

std::vector<topo::LinkClass> link_classes(const topo::Topology& topology) {
  const auto devices = topology.num_devices();
  const auto d0 = static_cast<std::size_t>(topology.domain_sizes().front());
  // A node's innermost domain: its own for a device; for a switch, the domain of its devices
  // when all its links lead to devices of one domain (an NVSwitch); none (-1) otherwise.
  std::vector<long> domain(topology.num_nodes(), -1);
  for (std::size_t v = 0; v < devices; ++v) domain[v] = static_cast<long>(v / d0);
  for (std::size_t v = devices; v < topology.num_nodes(); ++v) {
    long only = -1;
    bool exclusive = true;
    for (const topo::LinkId l : topology.out_links(static_cast<topo::NodeId>(v))) {
      const topo::NodeId w = topology.link(l).dst;
      const long dw = topology.is_device(w) ? static_cast<long>(w / d0) : -1;
      if (dw < 0 || (only >= 0 && dw != only)) {
        exclusive = false;
        break;
      }
      only = dw;
    }
    if (exclusive) domain[v] = only;
  }
  std::vector<topo::LinkClass> out;
  out.reserve(topology.num_links());
  for (const topo::Link& link : topology.links()) {
    const long a = domain[link.src];
    if (a >= 0 && a == domain[link.dst]) {
      out.push_back(topo::LinkClass::kScaleUp);
    } else if (topology.is_device(link.src) || topology.is_device(link.dst)) {
      out.push_back(topo::LinkClass::kNic);
    } else {
      out.push_back(topo::LinkClass::kFabric);
    }
  }
  return out;
}

topo::Topology calibrated_topology(const topo::Topology& topology,
                                   const topo::CollectiveModel& model, topo::Protocol protocol,
                                   bool nvls) {
  const topo::ProtocolModel& p = model.protocols[static_cast<std::size_t>(protocol)];
  const std::vector<topo::LinkClass> classes = link_classes(topology);
  std::vector<topo::Link> links(topology.links().begin(), topology.links().end());
  for (std::size_t i = 0; i < links.size(); ++i) {
    const auto c = static_cast<std::size_t>(classes[i]);
    double efficiency = 1;
    if (const auto& calibration = p.links[c]) {
      efficiency = calibration->efficiency;
      if (calibration->latency) links[i].latency = *calibration->latency;
    }
    if (nvls && classes[i] == topo::LinkClass::kScaleUp && model.nvls) {
      efficiency *= model.nvls->efficiency;
    }
    links[i].bandwidth = Bandwidth::bytes_per_second(links[i].bandwidth.bytes_per_s() * efficiency);
  }
  return topology.with_links(std::move(links));
}

CalibratedNetwork::CalibratedNetwork(const topo::Topology& topology, bool ideal)
    : physical_(&topology),
      model_(ideal || !topology.collective_model() ? nullptr : topology.collective_model().get()) {}

CalibratedNetwork::CalibratedNetwork(const topo::Topology& topology,
                                     const topo::CollectiveModel* model)
    : physical_(&topology), model_(model) {}

topo::Protocol CalibratedNetwork::protocol(Bytes size) const noexcept {
  return model_ ? model_->protocol_for(size) : topo::Protocol::kSimple;
}

topo::Protocol CalibratedNetwork::protocol(Algorithm algorithm, Bytes size) const noexcept {
  return algorithm == Algorithm::kNvls ? topo::Protocol::kSimple : protocol(size);
}

const topo::Topology& CalibratedNetwork::topology(topo::Protocol protocol, bool nvls) const {
  if (!model_) return *physical_;
  const std::size_t slot = nvls ? topo::kProtocols : static_cast<std::size_t>(protocol);
  auto& copy = copies_[slot];
  if (!copy) {
    copy = std::make_unique<topo::Topology>(
        calibrated_topology(*physical_, *model_, nvls ? topo::Protocol::kSimple : protocol, nvls));
  }
  return *copy;
}

Time CalibratedNetwork::base_latency(Operation op, Algorithm algorithm,
                                     topo::Protocol protocol) const {
  if (!model_) return Time::zero();
  if (algorithm == Algorithm::kNvls && model_->nvls) return model_->nvls->base_latency;
  return model_->base_latency(protocol, operation_name(op));
}

int CalibratedNetwork::channels() const noexcept {
  return model_ && model_->channels ? *model_->channels : 1;
}

}  // namespace nest::coll
