#include "nest/job/job.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nest/core/error.h"
#include "nest/io/plan_file.h"
#include "nest/topo/generators.h"

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

// A thin network where the estimate's best plan was refuted by its replay (issue 15): GPT-3
// 175B on 256 H100s, 32 nodes of 8, rails of 4 leaves (8 nodes each), 12.5 GB/s per GPU between
// nodes and a 4:1 spine (2 spines at 12.5 GB/s per leaf: 25 GB/s up against 100 GB/s down).
// Priced as before issue 15 (each stage's data-parallel sync alone, the stage-boundary
// transfers in every microbatch slot), the estimate's best is tensor 4, 16 stages, 4 replicas
// in tp-pp-dp order, whose 16 stages' rings all cross the spine at once in the replay. With the
// syncs priced jointly and the transfers beside the compute (the defaults), the estimate's best
// is tensor 8, 8 stages of 4 virtual stages, 4 replicas in tp-dp-pp order, which the replay
// confirms, and verification by replay keeps it.
JobSpec thin_spec(int verify, bool before) {
  JobSpec spec;
  spec.workload.model = "gpt3-175b";
  spec.workload.accelerator = "h100";
  spec.baselines = {};
  spec.verify = verify;
  spec.search.cost.joint_data_parallel_sync = !before;
  spec.search.cost.overlap_boundary_transfers = !before;
  return spec;
}

Prebuilt thin_network() {
  const Bandwidth rate = Bandwidth::gigabytes_per_second(12.5);
  return {.topology = std::make_shared<const topo::Topology>(
              topo::build_rail_optimized({.nodes = 32,
                                          .gpus_per_node = 8,
                                          .nodes_per_leaf = 8,
                                          .spines = 2,
                                          .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                          .nvlink_latency = Time::microseconds(0.5),
                                          .nic_bandwidth = rate,
                                          .nic_latency = Time::microseconds(1),
                                          .spine_bandwidth = rate,
                                          .spine_latency = Time::microseconds(1)})),
          .topology_name = "thin256"};
}

// Every figure of a run, as text (the record has no equality).
std::string run_digest(const replay::RunRecord& r) {
  std::string out =
      fmt::format("{} {} {} {} {} {} {}|", r.meta.tool_version, r.meta.command_line,
                  r.meta.plan_yaml, r.summary.iteration_time.ps(), r.summary.estimate.ps(),
                  r.summary.tokens_per_s, r.summary.peak_memory.count());
  for (const auto& [path, hash] : r.meta.inputs) out += fmt::format("{}={} ", path, hash);
  for (const replay::TimelineRow& t : r.timeline) {
    out += fmt::format("{},{},{},{},{},{};", t.device, static_cast<int>(t.kind), t.stage,
                       t.microbatch, t.start.ps(), t.end.ps());
  }
  for (const replay::MemoryRow& m : r.memory) {
    out += fmt::format("{},{},{};", m.device, m.at.ps(), m.bytes.count());
  }
  for (const replay::LinkRow& l : r.links) {
    out += fmt::format("{},{},{},{};", l.src, l.dst, l.bytes, l.busy.ps());
  }
  for (const replay::CollectiveRow& c : r.collectives) {
    out += fmt::format("{},{},{},{},{};", c.op, c.algorithm, c.start.ps(), c.end.ps(),
                       c.closed_form.ps());
  }
  out += fmt::format("|{} {} {} {}", r.topology.links.size(), r.placement.size(), r.stages.size(),
                     r.link_series.size());
  return out;
}

TEST(Job, VerifyByReplayChoosesThePlanTheReplayConfirms) {
  Job before(thin_spec(0, true), thin_network(), kCatalog);
  const Placement old = before.placement();
  EXPECT_FALSE(old.verification);
  EXPECT_EQ(old.plan.degrees.tensor_parallel, 4);
  EXPECT_EQ(old.plan.choice.stages(), 16);
  EXPECT_EQ(old.plan.choice.data_parallel, 4);
  EXPECT_EQ(old.plan.choice.order, placer::PlacementOrder::kTensorPipelineData);

  Job estimate_only(thin_spec(0, false), thin_network(), kCatalog);
  const Placement now = estimate_only.placement();
  EXPECT_EQ(now.plan.degrees.tensor_parallel, 8);
  EXPECT_EQ(now.plan.choice.stages(), 8);
  EXPECT_EQ(now.plan.choice.virtual_stages, 4);
  EXPECT_EQ(now.plan.choice.data_parallel, 4);
  EXPECT_EQ(now.plan.choice.order, placer::PlacementOrder::kTensorDataPipeline);
  // Both replayed as the replay runs them (the stages send beside the compute): the old choice
  // replays 15% slower than estimated and than the new one, the new one within 0.1% of its
  // estimate.
  const Time old_replay = estimate_only.simulate(old.plan).summary.iteration_time;
  const Time now_replay = estimate_only.simulate(now.plan).summary.iteration_time;
  EXPECT_GT(old_replay.to_seconds(), 1.14 * old.plan.iteration_time.to_seconds());
  EXPECT_GT(old_replay.to_seconds(), 1.14 * now_replay.to_seconds());
  EXPECT_NEAR(now.plan.iteration_time.to_seconds(), now_replay.to_seconds(),
              0.001 * now_replay.to_seconds());

  Job verified(thin_spec(4, false), thin_network(), kCatalog);
  Placement placed = verified.placement({.keep_replay = true});
  ASSERT_TRUE(placed.verification);
  const placer::Verification& v = *placed.verification;
  EXPECT_EQ(v.requested, 4);
  ASSERT_EQ(v.candidates.size(), 4u);
  // The estimate's best leads the candidates and is the estimate-only search's plan.
  EXPECT_EQ(v.candidates.front().plan.choice, now.plan.choice);
  EXPECT_EQ(v.candidates.front().plan.iteration_time, now.plan.iteration_time);
  EXPECT_EQ(v.candidates.front().replayed, now_replay);
  // Ranks: by estimate in list order, by replay a permutation; the chosen is the replay's best.
  std::vector<int> replay_ranks;
  bool orders[2] = {false, false};
  for (std::size_t i = 0; i < v.candidates.size(); ++i) {
    const placer::VerifiedCandidate& c = v.candidates[i];
    EXPECT_EQ(c.estimate_rank, static_cast<int>(i) + 1);
    if (i > 0) {
      EXPECT_LE(v.candidates[i - 1].plan.iteration_time, c.plan.iteration_time);
    }
    EXPECT_LE(v.candidates[v.chosen].replayed, c.replayed);
    replay_ranks.push_back(c.replay_rank);
    orders[c.plan.choice.order == placer::PlacementOrder::kTensorDataPipeline] = true;
  }
  std::sort(replay_ranks.begin(), replay_ranks.end());
  EXPECT_EQ(replay_ranks, (std::vector<int>{1, 2, 3, 4}));
  EXPECT_TRUE(orders[0] && orders[1]);  // the best of each order is among them
  EXPECT_EQ(v.candidates[v.chosen].replay_rank, 1);
  EXPECT_EQ(placed.plan.choice, v.candidates[v.chosen].plan.choice);
  // The replay confirms the estimate's best: verification keeps it.
  EXPECT_EQ(v.chosen, 0u);
  EXPECT_EQ(v.estimate_regret(), 0.0);
  const replay::RunRecord again = verified.simulate(placed.plan);
  EXPECT_EQ(again.summary.iteration_time, v.candidates[v.chosen].replayed);
  // The verification kept its replay of the chosen plan: simulating the placement with the same
  // replay options reuses it, the same run as a new replay, and adds the busiest links' series
  // when they are asked for (`nest run`'s trace); other options replay anew.
  ASSERT_TRUE(placed.replay);
  const replay::RunRecord other = verified.simulate(placed, {.replay = {.gradient_buckets = 2}});
  EXPECT_TRUE(other.link_series.empty());
  ASSERT_TRUE(placed.replay);
  const replay::RunRecord fresh =
      verified.simulate(placed.plan, {.replay = {.utilization_links = 2}});
  ASSERT_EQ(fresh.link_series.size(), 2u);
  const replay::RunRecord reused = verified.simulate(placed, {.replay = {.utilization_links = 2}});
  EXPECT_FALSE(placed.replay);
  EXPECT_EQ(run_digest(reused), run_digest(fresh));
  EXPECT_EQ(reused.summary.iteration_time, again.summary.iteration_time);
  ASSERT_EQ(reused.link_series.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const replay::LinkSeries& x = reused.link_series[i];
    const replay::LinkSeries& y = fresh.link_series[i];
    EXPECT_EQ(x.link, y.link);
    ASSERT_EQ(x.points.size(), y.points.size());
    EXPECT_GT(x.points.size(), 1u);
    for (std::size_t k = 0; k < x.points.size(); ++k) {
      EXPECT_EQ(x.points[k].at, y.points[k].at);
      EXPECT_EQ(x.points[k].utilization, y.points[k].utilization);
    }
  }
  EXPECT_FALSE(reused.meta.plan_yaml.empty());
  EXPECT_EQ(reused.meta.inputs.size(), again.meta.inputs.size());
  // The plan file records both figures per candidate.
  const std::string yaml = verified.plan_yaml(placed.plan, {}, "plan.yaml", &v);
  EXPECT_NE(yaml.find("verification:"), std::string::npos);
  EXPECT_NE(yaml.find("chosen_replay_rank: 1"), std::string::npos);
  EXPECT_NE(yaml.find("estimate_only_regret:"), std::string::npos);
}

TEST(Job, VerifySpecErrorsNameTheField) {
  JobSpec negative = artifact_spec();
  negative.verify = -1;
  EXPECT_EQ(error_of([&] { Job job(negative, kCatalog); }),
            "verify: candidates to verify out of range (got \"-1\"; expected an integer in "
            "0..64)");
  JobSpec no_topology = artifact_spec();
  no_topology.verify = 1;
  EXPECT_EQ(error_of([&] { Job job(no_topology, kCatalog); }),
            "verify: verifying by replay needs a topology (got \"1\"; expected 0 without a "
            "topology)");
  // Unset: the default under the oracle with a topology, none without one.
  EXPECT_EQ(Job(rail_spec(), kCatalog).spec().verify, kDefaultVerify);
  EXPECT_EQ(Job(artifact_spec(), kCatalog).spec().verify, 0);
}

// Llama-2-7B on 64 GPUs of the rail cluster, verifying `verify` candidates on `threads` threads.
JobSpec verify_spec(int verify, int threads) {
  JobSpec spec = rail_spec();
  spec.devices = 64;
  spec.verify = verify;
  spec.threads = threads;
  return spec;
}

// The verification's replays on several threads, begun as the search keeps its candidates
// (`Job::search(verify_with)`, which `placement` calls): the same candidates, times, ranks,
// choice and kept run as on one (each replay reads only the plan and the job's immutable
// parts), and the same counters of the job's oracle (the replays tune on oracles of their own,
// which read its facts; the search's queries simulate their link-disjoint sets on the job's
// threads).
TEST(Job, VerificationOnThreadsIsTheVerificationInLine) {
  JobSpec spec = verify_spec(5, 1);
  Job one(spec, kCatalog);
  const Placement a = one.placement({.keep_replay = true});
  spec.threads = 3;
  Job three(spec, kCatalog);
  const Placement b = three.placement({.keep_replay = true});
  ASSERT_TRUE(a.verification && b.verification);
  ASSERT_EQ(a.verification->candidates.size(), 5u);
  ASSERT_EQ(b.verification->candidates.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    const placer::VerifiedCandidate& x = a.verification->candidates[i];
    const placer::VerifiedCandidate& y = b.verification->candidates[i];
    EXPECT_EQ(x.plan.choice, y.plan.choice);
    EXPECT_EQ(x.replayed, y.replayed);
    EXPECT_GT(y.replayed, Time::zero());
    EXPECT_EQ(x.replay_rank, y.replay_rank);
  }
  EXPECT_EQ(a.verification->chosen, b.verification->chosen);
  EXPECT_EQ(a.plan.choice, b.plan.choice);
  ASSERT_TRUE(a.replay && b.replay);
  EXPECT_EQ(b.replay->summary.iteration_time,
            b.verification->candidates[b.verification->chosen].replayed);
  EXPECT_EQ(run_digest(*a.replay), run_digest(*b.replay));
  EXPECT_EQ(one.oracle_stats().queries, three.oracle_stats().queries);
  EXPECT_EQ(one.oracle_stats().simulations, three.oracle_stats().simulations);
  EXPECT_EQ(one.oracle_stats().events, three.oracle_stats().events);
}

// `nest run`'s flow with the busiest links' series: beside the search (two threads) the series
// may be added to the kept replay before the verification ends; the run is the one in line
// either way. A placement whose kept replay already holds the series asked for
// (`Placement::replay_series`) is not replayed again for them; one holding another count is.
TEST(Job, SeriesAddedBesideTheSearchAreTheSeriesInLine) {
  JobSpec spec = verify_spec(3, 1);
  const SimulateOptions two_series{.replay = {.utilization_links = 2}, .keep_replay = true};
  Job in_line(spec, kCatalog);
  Placement a = in_line.placement(two_series);
  EXPECT_EQ(a.replay_series, 0);
  const replay::RunRecord want = in_line.simulate(a, two_series);
  ASSERT_EQ(want.link_series.size(), 2u);
  spec.threads = 2;
  Job beside(spec, kCatalog);
  Placement b = beside.placement(two_series);
  EXPECT_TRUE(b.replay_series == 0 || b.replay_series == 2);
  const replay::RunRecord got = beside.simulate(b, two_series);
  EXPECT_EQ(run_digest(got), run_digest(want));
  ASSERT_EQ(got.link_series.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(got.link_series[i].link, want.link_series[i].link);
    ASSERT_EQ(got.link_series[i].points.size(), want.link_series[i].points.size());
    for (std::size_t k = 0; k < want.link_series[i].points.size(); ++k) {
      EXPECT_EQ(got.link_series[i].points[k].at, want.link_series[i].points[k].at);
      EXPECT_EQ(got.link_series[i].points[k].utilization,
                want.link_series[i].points[k].utilization);
    }
  }
  // The count decides: series held for 2 links stand; for 3 they are made again.
  Job marked(verify_spec(3, 1), kCatalog);
  Placement c = marked.placement(two_series);
  ASSERT_TRUE(c.replay);
  c.replay->link_series.assign(1, replay::LinkSeries{.link = 12345});
  c.replay_series = 2;
  Placement d = c;
  EXPECT_EQ(marked.simulate(c, two_series).link_series.at(0).link, 12345u);
  d.replay_series = 3;
  EXPECT_EQ(run_digest(marked.simulate(d, two_series)), run_digest(want));
}

// A verification given candidates that differ from the plans replayed beside the search (here
// every field but the choice and the estimate) replays them itself: it fails as in line (a
// reviewer's probe).
TEST(Job, ReplaysBesideTheSearchServeOnlyTheSamePlans) {
  Job beside(verify_spec(3, 2), kCatalog);
  placer::SearchResult result = beside.search(SimulateOptions{});
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ASSERT_FALSE(result.candidates.empty());
  for (placer::Plan& p : result.candidates) p.devices_used = 100'000;
  try {
    (void)beside.verify(std::move(result));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the plan needs 100000 devices"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(beside.replays_taken_beside_search(), 0);
}

// Replays begun beside the search serve the verification with the same replay options (and
// keeping), and one with other options drops them and replays anew: either way the verification
// is the one in line (one gradient bucket here; the replays begun with four time otherwise).
TEST(Job, ReplaysBegunBesideTheSearchServeOnlyTheirOwnVerification) {
  JobSpec spec = verify_spec(3, 1);
  const SimulateOptions one_bucket{.replay = {.gradient_buckets = 1}, .keep_replay = true};
  Job in_line(spec, kCatalog);
  const Placement want = in_line.verify(in_line.search(), one_bucket);
  spec.threads = 2;
  Job same(spec, kCatalog);
  const Placement taken = same.verify(same.search(one_bucket), one_bucket);
  Job other(spec, kCatalog);
  const Placement dropped = other.verify(other.search(SimulateOptions{}), one_bucket);
  ASSERT_TRUE(want.verification && want.replay);
  ASSERT_EQ(want.verification->candidates.size(), 3u);
  for (const Placement* p : {&taken, &dropped}) {
    ASSERT_TRUE(p->verification && p->replay);
    ASSERT_EQ(p->verification->candidates.size(), 3u);
    for (std::size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(p->verification->candidates[i].plan.choice,
                want.verification->candidates[i].plan.choice);
      EXPECT_EQ(p->verification->candidates[i].replayed, want.verification->candidates[i].replayed);
    }
    EXPECT_EQ(p->verification->chosen, want.verification->chosen);
    EXPECT_EQ(run_digest(*p->replay), run_digest(*want.replay));
  }
  // Given time before the verification, it takes every candidate's replay from beside the
  // search (three tries, for a loaded machine).
  int taken_ahead = 0;
  for (int attempt = 0; attempt < 3 && taken_ahead < 3; ++attempt) {
    Job waited(spec, kCatalog);
    placer::SearchResult result = waited.search(one_bucket);
    std::this_thread::sleep_for(std::chrono::seconds(1 + attempt));
    const Placement p = waited.verify(std::move(result), one_bucket);
    taken_ahead = waited.replays_taken_beside_search();
    ASSERT_TRUE(p.verification && p.replay);
    EXPECT_EQ(run_digest(*p.replay), run_digest(*want.replay));
  }
  EXPECT_EQ(taken_ahead, 3);
  EXPECT_EQ(other.replays_taken_beside_search(), 0);  // dropped: other options
  EXPECT_EQ(in_line.replays_taken_beside_search(), 0);
  // One bucket's times are not four's: a verification that took the others would differ.
  Job one_f_one_b(spec, kCatalog);
  const Placement default_schedule = one_f_one_b.placement({.keep_replay = true});
  ASSERT_TRUE(default_schedule.verification);
  EXPECT_NE(default_schedule.verification->candidates[0].replayed,
            want.verification->candidates[0].replayed);
}

// The verification's replays on threads report the first failing candidate in list order
// (here the second fails, and so does the third, which another thread may reach first), and
// equal replayed times choose the first in list order, as one thread does.
TEST(Job, VerificationOnThreadsFailsAndTiesInListOrder) {
  Job job(verify_spec(3, 3), kCatalog);
  placer::SearchResult failing = job.search();
  ASSERT_TRUE(failing.best);
  const placer::Plan good = *failing.best;
  placer::Plan far = good;
  far.devices_used = 100'000;
  placer::Plan farther = good;
  farther.devices_used = 200'000;
  failing.candidates = {good, far, farther};
  EXPECT_EQ(error_of([&] { static_cast<void>(job.verify(std::move(failing))); }),
            "topology: the plan needs 100000 devices, the topology has 1024");
  // On one thread the largest replay goes first: the last candidate here (twice the replicas).
  // It fails, the candidates before it in list order still run, and the error thrown is still
  // the first in list order.
  Job one(verify_spec(3, 1), kCatalog);
  placer::SearchResult largest_last = one.search();
  placer::Plan largest = farther;
  largest.choice.data_parallel *= 2;
  largest_last.candidates = {good, far, largest};
  EXPECT_EQ(error_of([&] { static_cast<void>(one.verify(std::move(largest_last))); }),
            "topology: the plan needs 100000 devices, the topology has 1024");

  placer::SearchResult tied = job.search();
  tied.candidates = {good, good, good};
  const Placement placed = job.verify(std::move(tied), {.keep_replay = true});
  ASSERT_TRUE(placed.verification);
  const placer::Verification& v = *placed.verification;
  ASSERT_EQ(v.candidates.size(), 3u);
  EXPECT_EQ(v.chosen, 0u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(v.candidates[i].replayed, v.candidates[0].replayed);
    EXPECT_EQ(v.candidates[i].replay_rank, static_cast<int>(i) + 1);
  }
  ASSERT_TRUE(placed.replay);
  EXPECT_EQ(placed.replay->summary.iteration_time, v.candidates[0].replayed);
}

TEST(Job, ThreadsOutOfRangeNameTheField) {
  JobSpec none = rail_spec();
  none.threads = 0;
  EXPECT_EQ(error_of([&] { Job job(none, kCatalog); }),
            "threads: threads out of range (got \"0\"; expected an integer in 1..64)");
  JobSpec many = rail_spec();
  many.threads = 65;
  EXPECT_EQ(error_of([&] { Job job(many, kCatalog); }),
            "threads: threads out of range (got \"65\"; expected an integer in 1..64)");
}

// A 64-GPU rail job with `names` as its baselines, estimate only.
JobSpec baselines_spec(std::vector<std::string> names) {
  JobSpec spec = rail_spec();
  spec.devices = 64;
  spec.verify = 0;
  spec.baselines = std::move(names);
  return spec;
}

// Every baseline of `got` is the one of `expected`: name, note, plan and price.
void expect_same_baselines(const std::vector<placer::BaselineResult>& got,
                           const std::vector<placer::BaselineResult>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].name, expected[i].name);
    EXPECT_EQ(got[i].note, expected[i].note);
    ASSERT_TRUE(got[i].plan && expected[i].plan) << got[i].name;
    EXPECT_EQ(got[i].plan->choice, expected[i].plan->choice) << got[i].name;
    EXPECT_EQ(got[i].plan->iteration_time, expected[i].plan->iteration_time) << got[i].name;
  }
}

// A name listed twice runs again in line (the queue's run is collected once), `baselines()`
// asked twice gives the same, and `start_baselines` after `baselines()` queues them again.
TEST(Job, BaselinesListedOrAskedTwiceAreTheSame) {
  Job job(baselines_spec({"anneal", "topology-agnostic", "anneal"}), kCatalog);
  job.start_baselines();
  (void)job.place();
  const auto first = job.baselines();
  job.start_baselines();
  const auto second = job.baselines();
  ASSERT_EQ(first.size(), 3u);
  expect_same_baselines(second, first);
  ASSERT_TRUE(first[0].plan && first[2].plan);
  EXPECT_EQ(first[0].name, "anneal");
  EXPECT_EQ(first[2].note, first[0].note);
  EXPECT_EQ(first[2].plan->iteration_time, first[0].plan->iteration_time);
  EXPECT_EQ(first[0].note.rfind("2000 steps from the manual plan (seed 1): ", 0), 0u)
      << first[0].note;
}

// `start_baselines` queues the topology-agnostic and anneal baselines for a thread, each on an
// oracle of its own: every baseline is what `baselines()` computes in line (the anneal's walk
// reads bounds that an oracle answers from what it already holds, so it must meet the same memo
// either way), and so is the search's plan. The topology-agnostic baseline's oracle and the
// job's read what the other has simulated by then (`coll::OracleFacts`), which changes their
// work (how much depends on timing), not their plans or prices.
TEST(Job, BaselinesStartedBesideTheSearchAreTheBaselinesInLine) {
  JobSpec spec = baselines_spec({"manual", "topology-agnostic", "anneal"});
  Job in_line(spec, kCatalog);
  const placer::Plan a = in_line.place();
  const auto expected = in_line.baselines();
  Job beside(spec, kCatalog);
  beside.start_baselines();
  beside.start_baselines();  // already running: nothing more
  const placer::Plan b = beside.place();
  const auto got = beside.baselines();
  EXPECT_EQ(a.choice, b.choice);
  ASSERT_EQ(expected.size(), 3u);
  expect_same_baselines(got, expected);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[1].name, "topology-agnostic");
  EXPECT_NE(got[1].note.find("searched on a flat network"), std::string::npos);
  const coll::OracleStats x = in_line.oracle_stats();
  EXPECT_GT(x.queries, 0u);
  EXPECT_GT(x.simulations, 0u);
  EXPECT_EQ(x.consulted, 0u);  // in line: nothing to read

  // One thread: started in line by baselines(), the same again.
  spec.threads = 1;
  Job single(spec, kCatalog);
  single.start_baselines();
  EXPECT_EQ(single.oracle_stats().queries, 0u);
  static_cast<void>(single.place());
  const auto alone = single.baselines();
  ASSERT_EQ(alone.size(), 3u);
  EXPECT_EQ(alone[1].plan->iteration_time, expected[1].plan->iteration_time);
  EXPECT_EQ(alone[2].note, expected[2].note);
}

// The search reads what the topology-agnostic baseline queued beside it has simulated: with the
// queue run out first (`baselines()` before `place()`), every structure of that baseline is
// recorded before the search asks, so the search's oracle reads some of them (they price the
// same groups) and simulates less than in line, for the same plan.
TEST(Job, TheSearchReadsWhatTheTopologyAgnosticBaselineSimulated) {
  JobSpec spec = baselines_spec({"topology-agnostic"});
  spec.workload.model = "gpt3-175b";  // 256 GPUs: the two price some of the same groups
  spec.devices = 256;
  Job in_line(spec, kCatalog);
  const placer::Plan a = in_line.place();
  const auto expected = in_line.baselines();
  Job first(spec, kCatalog);
  first.start_baselines();
  const auto got = first.baselines();
  const placer::Plan b = first.place();
  EXPECT_EQ(a.choice, b.choice);
  EXPECT_EQ(a.iteration_time, b.iteration_time);
  expect_same_baselines(got, expected);
  EXPECT_EQ(in_line.oracle_stats().consulted, 0u);
  EXPECT_GT(first.oracle_stats().consulted, 0u);
  EXPECT_LT(first.oracle_stats().simulations, in_line.oracle_stats().simulations);
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
