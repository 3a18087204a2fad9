#include "nest/sweep/evaluate.h"

#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"

namespace nest::sweep {
namespace {

const std::string kSource = NEST_SOURCE_DIR;

Study study(const std::string& sweep) {
  return parse_study(R"(kind: study
name: t
topologies:
  rail:
    kind: rail_optimized
    gpus_per_node: 8
    nodes_per_leaf: 2
    spines: 2
    nvlink_bandwidth: 450 GB/s
    nvlink_latency: 0.5 us
    nic_bandwidth: 50 GB/s
    nic_latency: 1 us
    spine_bandwidth: 50 GB/s
    spine_latency: 1 us
workloads:
  llama:
    model: workloads/models/llama2-7b.yaml
    accelerator: workloads/accelerators/h100-sxm.yaml
    micro_batches: [1]
  artifact:
    profile: workloads/profiles/gpt3-175b-h100.yaml
placer:
  baselines: [manual, topology-agnostic]
defaults:
  workload: llama
)" + sweep,
                     "t.yaml", kSource);
}

std::size_t column(const StudyEvaluator& e, const std::string& name) {
  const auto columns = e.columns();
  for (std::size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].name == name) return i;
  }
  ADD_FAILURE() << "no column " << name;
  return 0;
}

template <class T>
T cell(const StudyEvaluator& e, const Outcome& o, const std::string& name) {
  const Cell& c = o.cells.at(column(e, name));
  EXPECT_TRUE(std::holds_alternative<T>(c)) << name;
  return std::holds_alternative<T>(c) ? std::get<T>(c) : T{};
}

TEST(BuildTopology, SizesTheGeneratorFromTheBudget) {
  const Study s = study("sweep: {points: [{devices: 20}, {devices: 8, topology.nodes: 3}]}");
  EXPECT_EQ(build_topology(s, s.points[0]).num_devices(), 24U);  // ceil(20 / 8) = 3 nodes
  EXPECT_EQ(build_topology(s, s.points[1]).num_devices(), 24U);
}

TEST(BuildTopology, ATopologyFileIsLoadedAsIs) {
  const Study s = parse_study(R"(kind: study
topologies:
  rail: {file: topologies/h100_rail_1024.yaml}
workloads:
  w: {profile: workloads/profiles/gpt3-175b-h100.yaml}
sweep: {points: [{devices: 512}]}
)",
                              "f.yaml", kSource);
  const topo::Topology t = build_topology(s, s.points[0]);
  EXPECT_EQ(t.num_devices(), 1024U);  // the budget does not resize a file
  EXPECT_EQ(t.family(), topo::Family::kRailOptimized);
  try {
    (void)parse_study(R"(kind: study
topologies:
  rail: {file: topologies/h100_rail_1024.yaml}
workloads:
  w: {profile: workloads/profiles/gpt3-175b-h100.yaml}
sweep: {points: [{topology.spines: 16}]}
)",
                      "f.yaml", kSource);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "f.yaml:6: sweep.points[0]: topology \"rail\" is a file: it has no parameters "
                 "to sweep (expected topology.<parameter> axes only on generated topologies)");
  }
}

TEST(BuildTopology, ABadParameterValueNamesTheParameter) {
  const Study s = study("sweep: {points: [{devices: 16, topology.spines: 0}]}");
  try {
    (void)build_topology(s, s.points[0]);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.context().key, "topology.spines");
  }
}

// The row's plan is the placer's own answer for the same inputs: the sweep adds nothing.
TEST(StudyEvaluator, ThePlanIsTheSearchsOnTheSameTopology) {
  const Study s = study("sweep: {points: [{devices: 32, topology.nic_bandwidth: 12.5 GB/s}]}");
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  ASSERT_EQ(o.status, "ok") << o.error;

  const topo::Topology t = build_topology(s, s.points[0]);
  placer::OracleCommCost comm(t);
  placer::SearchOptions options;
  options.cost = {.rules = workload::MemoryRules::kMegatron,
                  .devices = 32,
                  .memory_bandwidth = Bandwidth::gigabytes_per_second(3350 * 0.8)};
  const placer::SearchResult direct = placer::search(evaluator.profile("llama"), comm, options);
  ASSERT_TRUE(direct.best.has_value());
  const placer::Plan& plan = *direct.best;
  EXPECT_EQ(cell<double>(evaluator, o, "iteration_s"),
            static_cast<double>(plan.iteration_time.ps()) / 1e12);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "pipeline_stages"), plan.choice.stages());
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "data_parallel"), plan.choice.data_parallel);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "tensor_parallel"), plan.degrees.tensor_parallel);
  EXPECT_EQ(cell<double>(evaluator, o, "tokens_per_s"), plan.tokens_per_second);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "devices_available"), 32);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "topology_devices"), 32);
  // The baselines are priced by the same model: NEST's plan is never slower.
  EXPECT_GE(cell<double>(evaluator, o, "speedup_vs_manual"), 1.0);
  EXPECT_GE(cell<double>(evaluator, o, "speedup_vs_topology_agnostic"), 1.0);
  EXPECT_DOUBLE_EQ(
      cell<double>(evaluator, o, "speedup_vs_manual"),
      cell<double>(evaluator, o, "manual_iteration_s") / cell<double>(evaluator, o, "iteration_s"));
  // No replay asked: its columns are missing.
  EXPECT_TRUE(std::holds_alternative<std::monostate>(o.cells[column(evaluator, "replay_error")]));
}

// The published NEST figure (tests/validation/reference/nest-artifact/expected-nest.tsv): GPT-3
// 175B on 128 H100 under the nest-artifact rules, 245,184.584 ms per iteration, with 8 stages, d 4,
// t 4.
TEST(StudyEvaluator, ArtifactRulesReproduceThePublishedIterationTime) {
  const Study s =
      study("sweep: {points: [{workload: artifact, devices: 128, rules: nest-artifact}]}");
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  ASSERT_EQ(o.status, "ok") << o.error;
  EXPECT_NEAR(cell<double>(evaluator, o, "iteration_s"), 245.184584, 245.184584e-3);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "pipeline_stages"), 8);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "data_parallel"), 4);
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "tensor_parallel"), 4);
  EXPECT_EQ(cell<std::string>(evaluator, o, "topology_agnostic_note"),
            "not applicable: the zero network is already topology-agnostic");
}

TEST(StudyEvaluator, NothingThatFitsIsAnInfeasibleRowWithTheReason) {
  const Study s = study("sweep: {points: [{devices: 1}]}");
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  EXPECT_EQ(o.status, "infeasible");
  EXPECT_EQ(o.error.rfind("nothing fits on 1 devices", 0), 0U) << o.error;
  EXPECT_EQ(cell<std::int64_t>(evaluator, o, "devices_available"), 1);
  EXPECT_TRUE(std::holds_alternative<std::monostate>(o.cells[column(evaluator, "iteration_s")]));
}

TEST(StudyEvaluator, ABudgetAboveAFixedTopologyIsThePointsError) {
  const Study s = study("sweep: {points: [{devices: 64, topology.nodes: 2}]}");
  const StudyEvaluator evaluator(s);
  try {
    (void)evaluator.evaluate(s.points[0]);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "devices: the topology has only 16 devices (got \"64\"; expected a budget the "
                 "topology holds (leave its size unset to size it from devices))");
  }
}

TEST(StudyEvaluator, ReplayFillsItsColumns) {
  const Study s = study("sweep: {points: [{devices: 16, replay: true}]}");
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  ASSERT_EQ(o.status, "ok") << o.error;
  const double predicted = cell<double>(evaluator, o, "iteration_s");
  const double replayed = cell<double>(evaluator, o, "replay_iteration_s");
  EXPECT_GT(replayed, 0);
  EXPECT_NEAR(cell<double>(evaluator, o, "replay_error"), (replayed - predicted) / predicted,
              1e-12);
  EXPECT_GT(cell<std::int64_t>(evaluator, o, "replay_peak_memory_bytes"), 0);
}

// A replayed point replays its baselines' plans too, so that both speedups over them (by estimate
// and by replay) are in the row; the manual plan on 16 rail GPUs replays within 5% of its
// estimate (the replay of this tiny cluster has no contention to speak of).
TEST(StudyEvaluator, ReplayedPointsReplayTheBaselines) {
  const Study s = study("sweep: {points: [{devices: 16, replay: true}, {devices: 16}]}");
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  ASSERT_EQ(o.status, "ok") << o.error;
  const double replayed = cell<double>(evaluator, o, "replay_iteration_s");
  const double manual = cell<double>(evaluator, o, "manual_iteration_s");
  const double manual_replayed = cell<double>(evaluator, o, "manual_replay_s");
  EXPECT_NEAR(manual_replayed, manual, 0.05 * manual);
  EXPECT_DOUBLE_EQ(cell<double>(evaluator, o, "replay_speedup_vs_manual"),
                   manual_replayed / replayed);
  // The point without a replay leaves the columns empty.
  const Outcome quiet = evaluator.evaluate(s.points[1]);
  ASSERT_EQ(quiet.status, "ok") << quiet.error;
  EXPECT_TRUE(
      std::holds_alternative<std::monostate>(quiet.cells[column(evaluator, "manual_replay_s")]));
}

// Every plan runs the global batch per iteration, whatever its expert-parallel degree: tokens
// per second times the iteration time is the batch's tokens (Mixtral: 1,024 sequences of 4,096).
TEST(StudyEvaluator, ThroughputIsTheGlobalBatchOverTheIterationTime) {
  Study s = parse_study(R"(kind: study
topologies:
  rail: {kind: rail_optimized, gpus_per_node: 8, nodes_per_leaf: 4, spines: 4,
         nvlink_bandwidth: 450 GB/s, nvlink_latency: 0.5 us, nic_bandwidth: 50 GB/s,
         nic_latency: 1 us, spine_bandwidth: 50 GB/s, spine_latency: 1 us}
workloads:
  mixtral:
    model: workloads/models/mixtral-8x7b.yaml
    accelerator: workloads/accelerators/h100-sxm.yaml
    max_tensor_parallel: 2
    micro_batches: [1]
placer: {baselines: [manual], zero_stages: [1], orders: [tp-pp-dp]}
sweep: {points: [{devices: 64}]}
)",
                        "m.yaml", kSource);
  const StudyEvaluator evaluator(s);
  const Outcome o = evaluator.evaluate(s.points[0]);
  ASSERT_EQ(o.status, "ok") << o.error;
  const double tokens = 1024.0 * 4096;
  EXPECT_NEAR(
      cell<double>(evaluator, o, "tokens_per_s") * cell<double>(evaluator, o, "iteration_s"),
      tokens, tokens * 1e-12);
  EXPECT_NEAR(cell<double>(evaluator, o, "manual_tokens_per_s") *
                  cell<double>(evaluator, o, "manual_iteration_s"),
              tokens, tokens * 1e-12);
  EXPECT_GT(cell<std::int64_t>(evaluator, o, "expert_parallel"), 1)
      << "the check is meant for an expert-parallel plan";
}

TEST(StudyEvaluator, CostGrowsWithTheDevicesAndTheReplay) {
  const Study s =
      study("sweep: {points: [{devices: 16}, {devices: 32}, {devices: 16, replay: true}]}");
  const StudyEvaluator evaluator(s);
  EXPECT_EQ(evaluator.cost(s.points[0]), 16);
  EXPECT_EQ(evaluator.cost(s.points[1]), 32);
  EXPECT_EQ(evaluator.cost(s.points[2]), 48);
}

}  // namespace
}  // namespace nest::sweep
