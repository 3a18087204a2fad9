#pragma once
/// \file
/// A topology as collectives see it: at line rate with its own latencies (the ideal model), or
/// through its collective model (nest/topo/collective_model.h). Calibration changes what the
/// simulator is given, never how it computes: each protocol gets a copy of the topology whose
/// links run at line rate x the model's efficiency for their class and have the model's
/// latency, and each collective adds the model's base latency once. So a collective of protocol
/// p on a calibrated network takes exactly
///
///   base_latency(op, p) + (the simulation of its transfers on the copy for p),
///
/// and on a contention-free layout that is base_latency + the closed form on that copy (tested
/// by hand: e.g. a ring allreduce of S bytes over n ranks of one switch whose scale-up class has
/// efficiency e and per-link latency l takes base + 2(n-1)·2l + 2(n-1)/n·S/(e·B)).

#include <array>
#include <memory>
#include <vector>

#include "nest/coll/collective.h"
#include "nest/core/units.h"
#include "nest/topo/collective_model.h"
#include "nest/topo/topology.h"

namespace nest::coll {

/// The class of every directed link of `topology` (see topo::LinkClass): a link is scale-up when
/// both ends lie in one innermost domain (`Topology::domain_sizes().front()`; a switch lies in
/// a domain when all its links lead to that domain's devices), else nic when an end is a device,
/// else fabric. O(nodes + links).
[[nodiscard]] std::vector<topo::LinkClass> link_classes(const topo::Topology& topology);

/// `topology` with every link's rate x the efficiency `model` gives its class under `protocol`
/// and its latency replaced where the model gives one; with `nvls`, scale-up links also x the
/// model's NVLS efficiency. Same nodes, link ids, parameters and domains, so routes are the
/// same. O(nodes + links).
[[nodiscard]] topo::Topology calibrated_topology(const topo::Topology& topology,
                                                 const topo::CollectiveModel& model,
                                                 topo::Protocol protocol, bool nvls = false);

/// A topology with the collective model it runs under (none: ideal). Builds the calibrated
/// copies on first use and keeps them, so a sweep or an oracle pays for each once. Not
/// thread-safe (the copies are built lazily); the topology must outlive it.
class CalibratedNetwork {
 public:
  /// The topology's own model (`Topology::collective_model()`), or none when `ideal` or when the
  /// topology has none.
  explicit CalibratedNetwork(const topo::Topology& topology, bool ideal = false);
  /// `topology` under `model` (null: ideal); `model` must outlive this object.
  CalibratedNetwork(const topo::Topology& topology, const topo::CollectiveModel* model);

  /// The topology at line rate.
  [[nodiscard]] const topo::Topology& physical() const noexcept { return *physical_; }
  /// The model, or null (ideal).
  [[nodiscard]] const topo::CollectiveModel* model() const noexcept { return model_; }
  [[nodiscard]] bool calibrated() const noexcept { return model_ != nullptr; }

  /// The protocol of a collective of `size` (the model's switch points); Simple when ideal.
  [[nodiscard]] topo::Protocol protocol(Bytes size) const noexcept;
  /// The protocol `algorithm` runs `size` with: NVLS runs only Simple (as in NCCL).
  [[nodiscard]] topo::Protocol protocol(Algorithm algorithm, Bytes size) const noexcept;
  /// The topology a collective of `protocol` runs on (with `nvls`: NVLink SHARP's); the
  /// physical one when ideal.
  [[nodiscard]] const topo::Topology& topology(topo::Protocol protocol, bool nvls = false) const;
  /// Added once per collective: the model's base latency of `op` under `protocol`, NVLS's for
  /// the nvls algorithm; zero when ideal.
  [[nodiscard]] Time base_latency(Operation op, Algorithm algorithm, topo::Protocol protocol) const;
  /// The model's channel count (rings across scale-up domains); 1 when ideal or not given.
  [[nodiscard]] int channels() const noexcept;

 private:
  const topo::Topology* physical_;
  const topo::CollectiveModel* model_;
  mutable std::array<std::unique_ptr<topo::Topology>, topo::kProtocols + 1> copies_;
};

}  // namespace nest::coll
