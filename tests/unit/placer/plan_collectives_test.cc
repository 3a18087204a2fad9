// plan_collectives (issue 13: the plan records each group's collective choice): GPT-3 175B on
// 128 H100s of a rail cluster (64 nodes of 2 GPUs), one fixed plan (t = 2, 4 stages, 16
// replicas, order tp-pp-dp). Every collective of the plan is listed once per stage with the
// group that runs it, and each entry's time is what a fresh oracle answers for that group
// layout alone.

#include "nest/placer/plan_collectives.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "nest/placer/baselines.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/variants.h"
#include "nest/topo/generators.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "placer/stage_model.h"
#include "unit/placer/fixtures.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

TEST(PlanCollectives, NamesEveryGroupAndCarriesTheOraclesAnswer) {
  const topo::Topology t =
      topo::build_rail_optimized({.nodes = 64,
                                  .gpus_per_node = 2,
                                  .nodes_per_leaf = 8,
                                  .spines = 2,
                                  .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                  .nvlink_latency = Time::microseconds(0.5),
                                  .nic_bandwidth = Bandwidth::gigabits_per_second(400),
                                  .nic_latency = Time::microseconds(1),
                                  .spine_bandwidth = Bandwidth::gigabits_per_second(400),
                                  .spine_latency = Time::microseconds(1)});
  const auto profile = testing::gpt3_profile(2);
  ASSERT_EQ(profile.variants.size(), 1U);
  const CostOptions cost{.rules = workload::MemoryRules::kMegatron, .devices = 128};
  PlanChoice choice;
  choice.boundaries = even_partition(profile.variants[0], 4);
  choice.data_parallel = 16;
  choice.order = PlacementOrder::kTensorPipelineData;
  OracleCommCost oracle(t);
  const Plan plan = evaluate(profile, choice, oracle, cost);

  const auto list = plan_collectives(profile, plan, oracle, cost);
  std::set<std::pair<int, std::string>> seen;
  for (const PlanCollective& c : list) {
    seen.emplace(c.stage, c.group);
    const DeviceMap map = plan.device_map();
    const GroupLayout layout =
        c.group == "data"
            ? detail::sync_layout(map, c.stage)
            : detail::axis_layout(map, c.stage, workload::ParallelAxis::kTensor, plan.degrees);
    EXPECT_EQ(c.group_size, c.group == "data" ? 16 : 2);
    EXPECT_EQ(c.groups, c.group == "data" ? 2 : 16);
    // A fresh oracle, asked this one collective: the entry is that group layout's price.
    OracleCommCost fresh(t);
    EXPECT_EQ(c.time, fresh.collective(c.op, c.size, layout)) << c.group << " " << c.stage;
    // No collective model on a generated topology: coll's defaults, not the tuner's choice.
    EXPECT_FALSE(c.tuned);
    EXPECT_EQ(c.algorithm, "ring");
    EXPECT_EQ(c.protocol, "Simple");
  }
  // Tensor and data groups on each of the 4 stages, nothing else (no expert or context groups).
  std::set<std::pair<int, std::string>> expected;
  for (int p = 0; p < 4; ++p) {
    expected.emplace(p, "data");
    expected.emplace(p, "tensor");
  }
  EXPECT_EQ(seen, expected);
  // Sorted by stage, deterministic: a cold oracle lists the same.
  OracleCommCost cold(t);
  EXPECT_EQ(list, plan_collectives(profile, evaluate(profile, choice, cold, cost), cold, cost));
}

}  // namespace
}  // namespace nest::placer
