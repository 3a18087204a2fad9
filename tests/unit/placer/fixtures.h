#pragma once
// Fixtures of the placer's tests: a thin rail cluster, and layer chains: identical toy blocks, and
// random chains with a variant for t = 1 and one for t = 2 (each layer's times, parameters and
// output split over the t shards; tensor-parallel all-reduces for t = 2).

#include <cstdint>
#include <string>

#include "nest/core/rng.h"
#include "nest/core/units.h"
#include "nest/placer/variants.h"
#include "nest/topo/generators.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/layer_profile.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"

namespace nest::placer::testing {

/// A rail cluster of `nodes` 2-GPU nodes, 4 per leaf, 2 spines, whose 12.5 GB/s NICs and spine
/// cables make stage-boundary transfers and data-parallel rings that cross the spine slow and
/// contended.
inline topo::Topology thin_rail(int nodes) {
  return topo::build_rail_optimized({.nodes = nodes,
                                     .gpus_per_node = 2,
                                     .nodes_per_leaf = 4,
                                     .spines = 2,
                                     .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                     .nvlink_latency = Time::microseconds(0.5),
                                     .nic_bandwidth = Bandwidth::gigabytes_per_second(12.5),
                                     .nic_latency = Time::microseconds(1),
                                     .spine_bandwidth = Bandwidth::gigabytes_per_second(12.5),
                                     .spine_latency = Time::microseconds(1)});
}

/// GPT-3 175B on the bundled H100 with tensor-parallel degree t and micro-batch 1: one variant.
inline workload::LayerProfile gpt3_profile(int t) {
  const std::string root = NEST_SOURCE_DIR;
  const auto model = workload::load_model(root + "/workloads/models/gpt3-175b.yaml");
  const auto device = workload::load_accelerator(root + "/workloads/accelerators/h100-sxm.yaml");
  const workload::BuildOptions build;
  CandidateOptions candidates;
  candidates.micro_batches = {1};
  candidates.tensor_parallel = {t};
  return workload::build_profile(model, device, candidate_configs(model, build, candidates), build);
}

/// A chain of identical blocks (model "toy", sequence length 1000, one variant).
struct Blocks {
  int count = 4;
  int tensor_parallel = 1;  ///< also the devices per replica
  int microbatches = 8;
  Time forward = Time::milliseconds(1);
  Time backward = Time::milliseconds(2);
  Time recompute;
  Bytes parameter_bytes = Bytes::mebibytes(10);
  std::int64_t parameters = std::int64_t{5} << 20;
  Bytes activation_bytes = Bytes::mebibytes(100);
  Bytes input_bytes = Bytes::mebibytes(4);
  Bytes output_bytes = Bytes::mebibytes(4);
  Bytes hbm = Bytes::gibibytes(1);
};

inline workload::LayerProfile toy_blocks(const Blocks& b) {
  workload::LayerProfile p;
  p.model = "toy";
  p.hbm = b.hbm;
  p.sequence_length = 1000;
  workload::Variant v;
  v.tensor_parallel = b.tensor_parallel;
  v.devices_per_replica = b.tensor_parallel;
  v.microbatches = b.microbatches;
  for (int i = 0; i < b.count; ++i) {
    workload::Layer l;
    l.name = "block";
    l.forward = b.forward;
    l.backward = b.backward;
    l.recompute = b.recompute;
    l.parameter_bytes = b.parameter_bytes;
    l.parameters = b.parameters;
    l.activation_bytes = b.activation_bytes;
    l.input_bytes = b.input_bytes;
    l.output_bytes = b.output_bytes;
    v.layers.push_back(l);
  }
  p.variants.push_back(v);
  return p;
}

/// Ranges of a random chain: each value is `low + rng.below(spread)` of its unit (spread 0: `low`,
/// no draw), drawn in the order of the fields, layer by layer.
struct ChainRanges {
  Bytes hbm;
  int layers_low = 4;
  int layers_spread = 5;
  double forward_us_low = 200;
  std::uint64_t forward_us_spread = 1800;
  double backward_us_low = 400;
  std::uint64_t backward_us_spread = 3600;
  std::int64_t parameters_mi_low = 1;  ///< parameters, in units of 2^20 (2 bytes each)
  std::uint64_t parameters_mi_spread = 8;
  std::int64_t activation_mib_low = 1;
  std::uint64_t activation_mib_spread = 100;
  std::int64_t input_mib_low = 1;
  std::uint64_t input_mib_spread = 60;
  std::int64_t output_mib_low = 20;
  std::uint64_t output_mib_spread = 200;
  std::int64_t allreduce_mib_low = 1;
  std::uint64_t allreduce_mib_spread = 16;
};

inline std::int64_t draw(Rng& rng, std::int64_t low, std::uint64_t spread) {
  return spread == 0 ? low : low + static_cast<std::int64_t>(rng.below(spread));
}

/// A chain of `ranges` with recomputation allowed and 8 microbatches per iteration.
inline workload::LayerProfile random_chain(Rng& rng, const ChainRanges& ranges) {
  workload::LayerProfile p;
  p.model = "random";
  p.recompute_allowed = true;
  p.hbm = ranges.hbm;
  const auto n = static_cast<int>(draw(rng, ranges.layers_low, ranges.layers_spread));
  for (const int t : {1, 2}) {
    workload::Variant v;
    v.tensor_parallel = t;
    v.devices_per_replica = t;
    v.microbatches = 8;
    p.variants.push_back(v);
  }
  for (int i = 0; i < n; ++i) {
    workload::Layer l;
    l.name = "layer" + std::to_string(i);
    l.forward = Time::microseconds(ranges.forward_us_low +
                                   static_cast<double>(rng.below(ranges.forward_us_spread)));
    l.backward = Time::microseconds(ranges.backward_us_low +
                                    static_cast<double>(rng.below(ranges.backward_us_spread)));
    l.recompute = l.forward;
    l.parameters = draw(rng, ranges.parameters_mi_low, ranges.parameters_mi_spread) << 20;
    l.parameter_bytes = Bytes(2 * l.parameters);
    l.activation_bytes =
        Bytes::mebibytes(draw(rng, ranges.activation_mib_low, ranges.activation_mib_spread));
    l.input_bytes = Bytes::mebibytes(draw(rng, ranges.input_mib_low, ranges.input_mib_spread));
    l.output_bytes = Bytes::mebibytes(draw(rng, ranges.output_mib_low, ranges.output_mib_spread));
    l.collectives.push_back(
        {.op = workload::CollectiveOp::kAllReduce,
         .axis = workload::ParallelAxis::kTensor,
         .size = Bytes::mebibytes(draw(rng, ranges.allreduce_mib_low, ranges.allreduce_mib_spread)),
         .count = 2,
         .recompute_count = 1});
    for (auto& v : p.variants) {
      workload::Layer shard = l;
      const int t = v.tensor_parallel;
      shard.forward = Time::picoseconds(l.forward.ps() / t);
      shard.backward = Time::picoseconds(l.backward.ps() / t);
      shard.recompute = Time::picoseconds(l.recompute.ps() / t);
      shard.parameters /= t;
      shard.parameter_bytes = Bytes(l.parameter_bytes.count() / t);
      shard.output_bytes = Bytes(l.output_bytes.count() / t);
      if (t == 1) shard.collectives.clear();
      v.layers.push_back(shard);
    }
  }
  return p;
}

}  // namespace nest::placer::testing
