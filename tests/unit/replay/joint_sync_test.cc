// Joint pricing of the stages' data-parallel syncs (issue 15), computed by hand.
//
// Network: two leaves of S hosts under one spine, hosts at 100 GB/s, the two leaf-spine cables
// at 10 GB/s, 1 us per cable, no collective model (ring allreduces at line rate). Workload: S
// identical layers, one per stage, each holding B = 1 GB of gradients; compute of
// microseconds, so that every stage's reduction runs at the same time as every other's.
//
// Under tp-pp-dp with d = 2 replicas, stage p's data-parallel group is {S−1−p, 2S−1−p}: one
// host under each leaf, so all S rings cross the same two leaf-spine cables. A ring allreduce
// of 2 ranks sends 2·(n−1)/n·B = B per direction through its cables: alone B / 10 GB/s =
// 100 ms; S rings at once share the cable, 10/S GB/s each: S · 100 ms. The replay runs them so.
//
// Under tp-dp-pp stage p's group is {2(S−1−p), 2(S−1−p)+1} (S leaves of 2 hosts): each ring
// stays under its own leaf, no link is shared, and the joint price equals the price alone to
// the picosecond.

#include <gtest/gtest.h>

#include <vector>

#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/plan.h"
#include "nest/replay/plan_replay.h"
#include "nest/topo/generators.h"
#include "nest/workload/layer_profile.h"
#include "placer/stage_model.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

constexpr std::int64_t kGradientBytes = 1'000'000'000;  // B per stage and device

topo::Topology leaves(int count, int hosts) {
  return topo::build_spine_leaf({.leaves = count,
                                 .spines = 1,
                                 .hosts_per_leaf = hosts,
                                 .host_bandwidth = Bandwidth::gigabytes_per_second(100),
                                 .host_latency = Time::microseconds(1),
                                 .uplink_bandwidth = Bandwidth::gigabytes_per_second(10),
                                 .uplink_latency = Time::microseconds(1)});
}

workload::LayerProfile chain(int layers) {
  workload::LayerProfile p;
  p.model = "joint-sync";
  p.hbm = Bytes::gibibytes(1024);
  p.sequence_length = 1000;
  workload::Variant v;
  v.microbatches = 2;
  for (int i = 0; i < layers; ++i) {
    workload::Layer l;
    l.name = "block";
    l.forward = Time::microseconds(1);
    l.backward = Time::microseconds(2);
    l.parameter_bytes = Bytes(kGradientBytes);
    l.parameters = kGradientBytes / 2;
    l.activation_bytes = Bytes::mebibytes(1);
    l.input_bytes = Bytes(1024);
    l.output_bytes = Bytes(1024);
    v.layers.push_back(l);
  }
  p.variants.push_back(v);
  return p;
}

PlanChoice one_layer_per_stage(int stages, PlacementOrder order) {
  PlanChoice c;
  for (int i = 0; i <= stages; ++i) c.boundaries.push_back(static_cast<std::size_t>(i));
  c.data_parallel = 2;
  c.order = order;
  return c;
}

CostOptions options(int devices, bool joint) {
  return {.rules = workload::MemoryRules::kMegatron,
          .devices = devices,
          .gradient_buckets = 1,
          .joint_data_parallel_sync = joint};
}

void expect_shared_cable(int stages) {
  const topo::Topology topology = leaves(2, stages);
  OracleCommCost network(topology);
  const workload::LayerProfile profile = chain(stages);
  const PlanChoice choice = one_layer_per_stage(stages, PlacementOrder::kTensorPipelineData);
  const Plan alone = evaluate(profile, choice, network, options(2 * stages, false));
  const Plan joint = evaluate(profile, choice, network, options(2 * stages, true));
  const double by_hand_alone = 0.1;           // B / 10 GB/s
  const double by_hand_joint = 0.1 * stages;  // S rings on one cable
  for (int p = 0; p < stages; ++p) {
    const auto s = static_cast<std::size_t>(p);
    EXPECT_NEAR(alone.stages[s].data_parallel_sync.to_seconds(), by_hand_alone, 1e-4) << p;
    EXPECT_NEAR(joint.stages[s].data_parallel_sync.to_seconds(), by_hand_joint, 1e-3 * stages) << p;
    // Joint never below alone: the search's bounds (priced alone) stay lower bounds.
    EXPECT_GE(joint.stages[s].data_parallel_sync, alone.stages[s].data_parallel_sync);
  }
  // The iteration is the pipeline (microseconds) and stage 0's reduction.
  EXPECT_NEAR(alone.iteration_time.to_seconds(), by_hand_alone, 1e-3);
  EXPECT_NEAR(joint.iteration_time.to_seconds(), by_hand_joint, 1e-3 * stages);
  EXPECT_GE(joint.iteration_time, alone.iteration_time);
  // The replay runs the S reductions at once and agrees with the joint price.
  replay::PlanReplayOptions replay;
  replay.gradient_buckets = 1;
  const replay::RunRecord run = replay::replay_plan(joint, profile, topology, replay);
  EXPECT_NEAR(run.summary.iteration_time.to_seconds(), joint.iteration_time.to_seconds(),
              0.01 * joint.iteration_time.to_seconds());
}

TEST(JointSync, TwoStagesSharingOneCableTakeTwiceAsLong) { expect_shared_cable(2); }

TEST(JointSync, FourStagesSharingOneCableTakeFourTimesAsLong) { expect_shared_cable(4); }

TEST(JointSync, RingsOnDisjointLinksKeepTheirPriceAloneExactly) {
  for (const int stages : {2, 4}) {
    const topo::Topology topology = leaves(stages, 2);
    OracleCommCost network(topology);
    const workload::LayerProfile profile = chain(stages);
    const PlanChoice choice = one_layer_per_stage(stages, PlacementOrder::kTensorDataPipeline);
    const Plan alone = evaluate(profile, choice, network, options(2 * stages, false));
    const Plan joint = evaluate(profile, choice, network, options(2 * stages, true));
    EXPECT_EQ(joint.iteration_time, alone.iteration_time) << stages;
    for (std::size_t p = 0; p < joint.stages.size(); ++p) {
      EXPECT_EQ(joint.stages[p].data_parallel_sync, alone.stages[p].data_parallel_sync);
    }
    // Each ring under its own leaf: 2·(1/2)·B at 100 GB/s.
    EXPECT_NEAR(joint.stages[0].data_parallel_sync.to_seconds(), 0.01, 1e-4);
  }
}

// Whether the stages' groups can share a link is known by routing alone: under tp-dp-pp every
// ring keeps to its own leaf, so the whole pipeline's groups are apart and the joint factor is 1
// with nothing priced at the joint reference size (no stage's 256 MiB sync is asked); under
// tp-pp-dp the rings cross the same two cables, so each stage's sync is priced at that size too.
// With two shards per replica (t 2) each stage has two groups: parts of two groups.
TEST(JointSync, StagesApartByRoutingPriceNoJointReference) {
  const int stages = 4;
  for (const int shards : {1, 2}) {
    for (const bool apart : {true, false}) {
      SCOPED_TRACE(std::to_string(shards) + (apart ? " apart" : " sharing"));
      const PlacementOrder order =
          apart ? PlacementOrder::kTensorDataPipeline : PlacementOrder::kTensorPipelineData;
      const topo::Topology topology =
          apart ? leaves(stages, 2 * shards) : leaves(2, stages * shards);
      OracleCommCost network(topology);
      const DeviceMap map = DeviceMap::make(order, stages, 2, shards);
      const GroupLayout pipeline = detail::stages_sync_layout(map, 0, stages - 1);
      ASSERT_EQ(pipeline.group_count(), stages * shards);
      // Group g is stage S - 1 - g / shards's shard g % shards.
      for (int g = 0; g < pipeline.group_count(); ++g) {
        EXPECT_EQ(pipeline.device(g, 1), map.device(stages - 1 - g / shards, 1, g % shards)) << g;
      }
      constexpr auto kAllReduce = workload::CollectiveOp::kAllReduce;
      EXPECT_EQ(network.groups_apart(kAllReduce, detail::kJointSyncReference, pipeline, shards),
                apart);
      // Parts of two stages each: under tp-pp-dp they still share the cables.
      EXPECT_EQ(network.groups_apart(kAllReduce, detail::kJointSyncReference, pipeline, 2 * shards),
                apart);
      // One part holds every group: nothing to share with.
      EXPECT_TRUE(
          network.groups_apart(kAllReduce, detail::kJointSyncReference, pipeline, stages * shards));
      if (shards == 1) {
        const workload::LayerProfile profile = chain(stages);
        (void)evaluate(profile, one_layer_per_stage(stages, order), network,
                       options(2 * stages, true));
        for (int p = 0; p < stages; ++p) {
          EXPECT_EQ(
              network.choice(kAllReduce, detail::kJointSyncReference, detail::sync_layout(map, p))
                  .has_value(),
              !apart)
              << p;
        }
      }
    }
  }
}

// Reductions that do not overlap in time are not priced together: with the buckets ready one
// backward apart and each reduction shorter than a backward, nothing changes.
TEST(JointSync, ReductionsApartInTimeKeepTheirPriceAlone) {
  const int stages = 2;
  const topo::Topology topology = leaves(2, stages);
  OracleCommCost network(topology);
  workload::LayerProfile profile = chain(stages);
  for (auto& l : profile.variants[0].layers) {
    l.backward = Time::seconds(1);  // ≫ the 0.1 s reduction
    l.parameter_bytes = Bytes(kGradientBytes);
  }
  const PlanChoice choice = one_layer_per_stage(stages, PlacementOrder::kTensorPipelineData);
  const Plan alone = evaluate(profile, choice, network, options(2 * stages, false));
  const Plan joint = evaluate(profile, choice, network, options(2 * stages, true));
  EXPECT_EQ(joint.iteration_time, alone.iteration_time);
  EXPECT_EQ(joint.stages[0].data_parallel_sync, alone.stages[0].data_parallel_sync);
}

}  // namespace
}  // namespace nest::placer
