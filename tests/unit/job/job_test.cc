#include "nest/job/job.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "nest/core/error.h"
#include "nest/io/plan_file.h"

namespace nest::job {
namespace {

namespace fs = std::filesystem;

const Catalog kCatalog({NEST_SOURCE_DIR});

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// The NEST artifact's H100 row (tests/validation/reference/nest-artifact/expected-nest.tsv):
// GPT-3 175B on 128 devices, 245184.584 ms under the nest-artifact rules.
JobSpec artifact_spec() {
  JobSpec spec;
  spec.workload.profile = "gpt3-175b-h100";
  spec.rules = workload::MemoryRules::kNestArtifact;
  spec.devices = 128;
  spec.baselines = {"manual"};
  return spec;
}

// A small real job: Llama-2-7B on 16 GPUs of the rail-optimized cluster, priced by the oracle.
JobSpec rail_spec() {
  JobSpec spec;
  spec.workload.model = "llama2-7b";
  spec.workload.accelerator = "h100";
  spec.topology = "h100_rail_1024";
  spec.devices = 16;
  spec.baselines = {};
  return spec;
}

fs::path temp_folder(const std::string& name) {
  const fs::path dir = fs::temp_directory_path() / ("nest_job_test_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(Job, PlacesThePublishedArtifactRowFromCatalogNames) {
  Job job(artifact_spec(), kCatalog);
  EXPECT_EQ(job.network_model(), NetworkModel::kZero);  // the artifact rules' default
  EXPECT_EQ(job.topology(), nullptr);
  const placer::Plan plan = job.place();
  EXPECT_NEAR(plan.iteration_time.to_milliseconds(), 245184.584, 245184.584e-3);
  EXPECT_EQ(plan.choice.stages(), 8);
  EXPECT_EQ(plan.choice.data_parallel, 4);
  const auto baselines = job.baselines();
  ASSERT_EQ(baselines.size(), 1u);
  EXPECT_EQ(baselines[0].name, "manual");
  EXPECT_EQ(job.spec().workload.profile,
            std::string(NEST_SOURCE_DIR) + "/workloads/profiles/gpt3-175b-h100.yaml");
}

TEST(Job, SpecErrorsNameTheField) {
  JobSpec too_many = artifact_spec();
  too_many.topology = "small_explicit";  // 4 devices
  too_many.devices = 8;
  EXPECT_EQ(error_of([&] { Job job(too_many, kCatalog); }),
            "devices: device count out of range (got \"8\"; expected 1..4 (the topology's "
            "devices))");
  JobSpec oracle = artifact_spec();
  oracle.network = NetworkModel::kOracle;
  EXPECT_EQ(error_of([&] { Job job(oracle, kCatalog); }),
            "topology: the oracle network needs a topology (expected a topology file or name)");
  JobSpec baseline = artifact_spec();
  baseline.baselines = {"oracle"};
  EXPECT_EQ(error_of([&] { Job job(baseline, kCatalog); }),
            "baselines: unknown baseline (got \"oracle\"; expected manual, topology-agnostic or "
            "anneal (or all, none))");
  JobSpec both = artifact_spec();
  both.workload.model = "llama2-7b";
  EXPECT_EQ(error_of([&] { Job job(both, kCatalog); }),
            "workload.profile: give either a layer profile, or a model with an accelerator "
            "(expected a profile file or name, or model + accelerator)");
  JobSpec name = rail_spec();
  name.workload.accelerator = "v5e";
  EXPECT_EQ(error_of([&] { Job job(name, kCatalog); }).substr(0, 60),
            "workload.accelerator: unknown accelerator (got \"v5e\"; expect");
}

TEST(Job, PlanFilesRecordWhatRebuildsTheRunAndLoadFromTheirFolderOnly) {
  const fs::path dir = temp_folder("record");
  JobSpec spec = rail_spec();
  spec.seed = 7;
  spec.anneal_seed = 9;
  spec.workload.build.global_batch = 256;
  Job job(spec, kCatalog);
  const placer::Plan plan = job.place();
  const fs::path plan_path = dir / "sub" / "plan.yaml";
  fs::create_directories(plan_path.parent_path());
  { std::ofstream(plan_path) << job.plan_yaml(plan, {}, plan_path); }
  const io::PlanRecord record = io::read_plan_file(plan_path.string());
  // Inputs relative to the plan's folder; build options and both seeds recorded.
  EXPECT_FALSE(fs::path(record.inputs.model).is_absolute());
  EXPECT_EQ(
      fs::weakly_canonical(plan_path.parent_path() / record.inputs.model),
      fs::weakly_canonical(std::string(NEST_SOURCE_DIR) + "/workloads/models/llama2-7b.yaml"));
  EXPECT_EQ(record.inputs.seed, 7u);
  EXPECT_EQ(record.inputs.anneal_seed, 9u);
  EXPECT_EQ(record.inputs.build.global_batch, 256);
  EXPECT_EQ(record.inputs.build.sequence_length, 4096);  // the model's, recorded as used
  ASSERT_EQ(record.inputs.hashes.size(), 3u);
  EXPECT_EQ(record.inputs.hashes[0].first, "topology");

  // Loaded from anywhere: the same plan, priced the same.
  const fs::path cwd = fs::current_path();
  fs::current_path(fs::temp_directory_path());
  PlannedJob planned = load_plan(plan_path, {}, kCatalog);
  fs::current_path(cwd);
  EXPECT_EQ(planned.plan.iteration_time, plan.iteration_time);
  EXPECT_EQ(planned.plan.choice.boundaries, plan.choice.boundaries);
  EXPECT_EQ(planned.job.spec().seed, 7u);
  EXPECT_EQ(planned.job.profile().global_batch, 256);

  // Moved without its inputs: the error names the plan file and the input.
  const fs::path alone = dir / "a" / "b" / "c" / "plan.yaml";
  fs::create_directories(alone.parent_path());
  fs::copy_file(plan_path, alone);
  EXPECT_EQ(error_of([&] { (void)load_plan(alone, {}, kCatalog); }),
            alone.string() + ": inputs.model: input file of the plan not found (got \"" +
                record.inputs.model +
                "\"; expected a file at that path relative to the plan's folder)");
  fs::remove_all(dir);
}

// A plan of NEST 0.1 (the example's plan of that release, its input paths made relative to
// this folder) still reads and rebuilds: figures as unit strings, no hashes, seeds or build
// options.
TEST(Job, PlansOfRelease01StillLoad) {
  const fs::path path = fs::path(NEST_SOURCE_DIR) / "tests/unit/job/data/plan-0.1.yaml";
  const io::PlanRecord record = io::read_plan_file(path.string());
  EXPECT_EQ(record.predicted_iteration_time, Time::picoseconds(7'013'695'997'363));
  EXPECT_EQ(record.inputs.seed, 0u);
  EXPECT_EQ(record.inputs.build.precision, "bf16");
  EXPECT_TRUE(record.inputs.hashes.empty());
  ASSERT_EQ(record.baselines.size(), 3u);
  EXPECT_EQ(record.baselines[0].name, "manual");
  EXPECT_EQ(record.baselines[0].stages, 2);
  PlannedJob planned = load_plan(path, {}, kCatalog);
  EXPECT_EQ(planned.plan.choice.stages(), 8);
  EXPECT_EQ(planned.plan.choice.data_parallel, 32);
  EXPECT_EQ(planned.plan.choice.zero_stage, 2);
  EXPECT_EQ(planned.plan.devices_used, 1024);
  EXPECT_TRUE(planned.plan.fits());
}

TEST(Job, SimulateFillsTheRunsMetadataWithInputHashes) {
  Job job(rail_spec(), kCatalog);
  const placer::Plan plan = job.place();
  const replay::RunRecord run = job.simulate(plan, {.command_line = "nest run ..."});
  EXPECT_EQ(run.meta.command_line, "nest run ...");
  EXPECT_EQ(run.meta.tool_version, NEST_VERSION);
  ASSERT_EQ(run.meta.inputs.size(), 3u);
  EXPECT_EQ(run.meta.inputs[0].second, file_hash(run.meta.inputs[0].first));
  EXPECT_EQ(run.meta.inputs[0].second.size(), 16u);
  EXPECT_EQ(run.summary.estimate, plan.iteration_time);
  EXPECT_FALSE(run.meta.plan_yaml.empty());
  // Without a topology there is nothing to replay on.
  Job zero(artifact_spec(), kCatalog);
  EXPECT_EQ(error_of([&] { (void)zero.simulate(zero.place()); }),
            "topology: a replay needs a topology (expected a plan made with a topology, or one "
            "here)");
}

// FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c (the published test vector).
TEST(Job, FileHashIsFnv1a64) {
  const fs::path dir = temp_folder("hash");
  std::ofstream(dir / "a") << "a";
  EXPECT_EQ(file_hash(dir / "a"), "af63dc4c8601ec8c");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace nest::job
