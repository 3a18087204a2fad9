#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nest/core/error.h"
#include "nest/io/plan_file.h"
#include "nest/placer/baselines.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/search.h"
#include "nest/workload/profile_file.h"
#include "unit/placer/printers.h"

namespace nest::io {
namespace {

using namespace nest::placer;  // NOLINT: the test speaks of plans throughout

const std::string kProfile =
    std::string(NEST_SOURCE_DIR) + "/workloads/profiles/gpt3-175b-h100.yaml";

struct Fixture {
  workload::LayerProfile profile = workload::load_layer_profile(kProfile);
  FlatCommCost flat{Bandwidth::gigabytes_per_second(50), Time::microseconds(5)};
  PlanInputs inputs{.profile = kProfile,
                    .network = "flat",
                    .flat_bandwidth = Bandwidth::gigabytes_per_second(50),
                    .flat_latency = Time::microseconds(5),
                    .rules = workload::MemoryRules::kNestArtifact,
                    .devices = 128};
  Plan plan() {
    SearchOptions o;
    o.cost = {.rules = inputs.rules, .devices = inputs.devices};
    return *search(profile, flat, o).best;
  }
};

TEST(PlanFile, RoundTripsToTheSameBytes) {
  Fixture f;
  const Plan plan = f.plan();
  const std::vector<BaselineResult> baselines = {
      {.name = "manual", .plan = plan, .note = "a \"quoted\" note"},
      {.name = "anneal", .note = "nothing fits"}};
  const std::string text = plan_to_yaml(f.inputs, plan, baselines);
  const PlanRecord r = parse_plan(text, "plan.yaml");
  EXPECT_EQ(r.inputs.profile, kProfile);
  EXPECT_EQ(r.inputs.network, "flat");
  EXPECT_EQ(r.inputs.flat_bandwidth, Bandwidth::gigabytes_per_second(50));
  EXPECT_EQ(r.inputs.flat_latency, Time::microseconds(5));
  EXPECT_EQ(r.degrees, plan.degrees);
  EXPECT_EQ(r.predicted_iteration_time, plan.iteration_time);
  PlanChoice choice = r.choice;
  choice.variant = find_variant(f.profile, r.degrees);
  EXPECT_EQ(choice, plan.choice);
  ASSERT_EQ(r.baselines.size(), 2u);
  EXPECT_EQ(r.baselines[0].note, "a \"quoted\" note");
  EXPECT_EQ(r.baselines[0].iteration_time, plan.iteration_time);
  EXPECT_FALSE(r.baselines[1].iteration_time.has_value());
  // Rebuilt from the file, the plan prints the same bytes.
  const Plan again =
      evaluate(f.profile, choice, f.flat, {.rules = r.inputs.rules, .devices = r.inputs.devices});
  EXPECT_EQ(plan_to_yaml(r.inputs, again, baselines), text);
}

TEST(PlanFile, WritesAtomicallyAndReadsBack) {
  Fixture f;
  const Plan plan = f.plan();
  const auto path = std::filesystem::temp_directory_path() / "nest_placer_plan_test.yaml";
  write_plan_file(path.string(), f.inputs, plan, {});
  const PlanRecord r = read_plan_file(path.string());
  EXPECT_EQ(r.choice.boundaries, plan.choice.boundaries);
  std::filesystem::remove(path);
}

TEST(PlanFile, RejectsDevicesThatDifferFromThePlacementOrder) {
  Fixture f;
  std::string text = plan_to_yaml(f.inputs, f.plan(), {});
  // The first stage's first device list starts with the device of (stage 0, replica 0, shard 0).
  const std::string first = "    devices: [[";
  const auto at = text.find(first) + first.size();
  const auto comma = text.find(',', at);
  text.replace(at, comma - at, "9999");
  try {
    (void)parse_plan(text, "plan.yaml");
    FAIL();
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("plan.yaml:", 0), 0u) << what;
    EXPECT_NE(what.find("partition[0].devices: the devices differ from those of the placement "
                        "order"),
              std::string::npos)
        << what;
  }
}

TEST(PlanFile, RejectsUnknownKeys) {
  Fixture f;
  std::string text = plan_to_yaml(f.inputs, f.plan(), {});
  text += "colour: blue\n";
  try {
    (void)parse_plan(text, "plan.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("colour"), std::string::npos) << e.what();
  }
}

TEST(PlanFile, WritesTheRecomputationModeAndReadsTheOlderBooleans) {
  Fixture f;
  const Plan plan = f.plan();  // the artifact's plan recomputes
  ASSERT_EQ(plan.choice.recompute, workload::Recompute::kFull);
  const std::string text = plan_to_yaml(f.inputs, plan, {});
  ASSERT_NE(text.find("\nrecompute: full\nvirtual_stages: 1\n"), std::string::npos) << text;
  // A plan written before the three modes: `recompute: true/false`, no virtual_stages.
  auto older = [&](const std::string& value) {
    const std::string now = "recompute: full\nvirtual_stages: 1\n";
    std::string t = text;
    t.replace(t.find(now), now.size(), "recompute: " + value + "\n");
    return parse_plan(t, "old.yaml").choice;
  };
  EXPECT_EQ(older("true").recompute, workload::Recompute::kFull);
  EXPECT_EQ(older("false").recompute, workload::Recompute::kNone);
  EXPECT_EQ(older("false").virtual_stages, 1);
  EXPECT_EQ(older("selective").recompute, workload::Recompute::kSelective);
  try {
    (void)older("sometimes");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "old.yaml:25: recompute: unknown value (got \"sometimes\"; expected one of none, "
                 "selective, full, true, false)");
  }
}

TEST(PlanFile, InterleavedPlansListEachStagesChunksAndReadBack) {
  Fixture f;
  f.inputs.rules = workload::MemoryRules::kMegatron;
  const CostOptions options{.rules = f.inputs.rules, .devices = f.inputs.devices};
  // 4 stages x 2 virtual stages of 12 blocks each.
  const auto& v = f.profile.variants[0];
  PlanChoice choice{.variant = 0,
                    .boundaries = interleaved_partition(v, 4, 2),
                    .data_parallel = 2,
                    .virtual_stages = 2};
  ASSERT_EQ(choice.boundaries.size(), 9u);
  const Plan plan = evaluate(f.profile, choice, f.flat, options);
  const std::string text = plan_to_yaml(f.inputs, plan, {});
  EXPECT_NE(text.find("  - chunks: [[0, 12], [49, 60]]\n"), std::string::npos) << text;
  const PlanRecord r = parse_plan(text, "plan.yaml");
  EXPECT_EQ(r.choice.virtual_stages, 2);
  EXPECT_EQ(r.choice.boundaries, choice.boundaries);
  EXPECT_EQ(r.choice.stages(), 4);
  // A stage with one range too few is named.
  std::string bad = text;
  bad.replace(bad.find("  - chunks: [[0, 12], [49, 60]]"), 31, "  - chunks: [[0, 12]]");
  try {
    (void)parse_plan(bad, "plan.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("partition[0].chunks: one range per virtual stage is "
                                         "needed"),
              std::string::npos)
        << e.what();
  }
}

TEST(PlanFile, MissingVariantIsNamed) {
  Fixture f;
  try {
    (void)find_variant(f.profile, {.tensor_parallel = 2, .devices_per_replica = 2});
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "variant: the profile has no variant with the plan's degrees (got \"t 2 e 1 c 1 "
                 "sp false mb 1 devices_per_replica 2\")");
  }
}

TEST(PlanFile, RecordsTheFixedDimensionsAndTheReductionAndReadsThemBack) {
  Fixture f;
  const Plan plan = f.plan();
  PlanInputs in = f.inputs;
  in.search.stages = {8};
  in.search.data_parallel = {16};
  in.search.virtual_stages = {3};
  in.search.zero_stages = {1};
  in.search.recompute_modes = {workload::Recompute::kSelective};
  in.search.orders = {placer::PlacementOrder::kTensorDataPipeline};
  in.search.uniform_partition = true;
  in.search.ignore_memory = true;
  in.search.cost.gradient_buckets = 1;
  in.search.cost.overlap_gradient_sync = false;
  in.search.cost.overlap_boundary_transfers = false;
  const std::string text = plan_to_yaml(in, plan, {});
  ASSERT_NE(text.find("  search: {stages: [8], data_parallel: [16], virtual_stages: [3], "
                      "zero_stages: [1], recompute: [selective], orders: [tp-dp-pp], "
                      "max_stages: 0, uniform_partition: true, ignore_memory: true, "
                      "gradient_buckets: 1, overlap_gradient_sync: false, "
                      "overlap_boundary_transfers: false}\n"),
            std::string::npos)
      << text;
  const PlanRecord r = parse_plan(text, "fixed.yaml");
  const placer::SearchOptions& s = r.inputs.search;
  EXPECT_EQ(s.stages, std::vector<int>{8});
  EXPECT_EQ(s.data_parallel, std::vector<int>{16});
  EXPECT_EQ(s.virtual_stages, std::vector<int>{3});
  EXPECT_EQ(s.zero_stages, std::vector<int>{1});
  ASSERT_EQ(s.recompute_modes.size(), 1U);
  EXPECT_EQ(s.recompute_modes[0], workload::Recompute::kSelective);
  ASSERT_EQ(s.orders.size(), 1U);
  EXPECT_EQ(s.orders[0], placer::PlacementOrder::kTensorDataPipeline);
  EXPECT_TRUE(s.uniform_partition);
  EXPECT_TRUE(s.ignore_memory);
  EXPECT_EQ(s.cost.gradient_buckets, 1);
  EXPECT_FALSE(s.cost.overlap_gradient_sync);
  EXPECT_FALSE(s.cost.overlap_boundary_transfers);
  // A plan without the key (0.1, 0.2) has the search's defaults.
  std::string older = text;
  const auto at = older.find("  search: ");
  older.erase(at, older.find('\n', at) + 1 - at);
  const PlanRecord o = parse_plan(older, "older.yaml");
  EXPECT_TRUE(o.inputs.search.stages.empty());
  EXPECT_EQ(o.inputs.search.zero_stages, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(o.inputs.search.cost.gradient_buckets, 4);
  EXPECT_TRUE(o.inputs.search.cost.overlap_gradient_sync);
  EXPECT_FALSE(o.inputs.search.ignore_memory);
  // A bad entry names its key.
  std::string bad = text;
  bad.replace(bad.find("zero_stages: [1]"), 16, "zero_stages: [7]");
  try {
    (void)parse_plan(bad, "bad.yaml");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ZeRO stage out of range"), std::string::npos) << e.what();
  }
}
}  // namespace
}  // namespace nest::io
