#include "nest/replay/plan_replay.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <string>

#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/placer/baselines.h"
#include "nest/placer/comm_cost.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/topo/collective_model.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/workload/profile_file.h"

namespace nest::replay {
namespace {

// Eight identical layers on one variant of one device per replica.
workload::LayerProfile uniform_profile(Bytes output, std::int64_t microbatches) {
  workload::LayerProfile p;
  p.model = "uniform";
  p.global_batch = microbatches;
  p.sequence_length = 1024;
  p.hbm = Bytes::gibibytes(80);
  workload::Variant v;
  v.microbatches = microbatches;
  for (int i = 0; i < 8; ++i) {
    workload::Layer l;
    l.name = "block";
    l.forward = Time::microseconds(100);
    l.backward = Time::microseconds(200);
    l.recompute = Time::microseconds(100);
    l.parameter_bytes = Bytes(2'000'000);
    l.parameters = 1'000'000;
    l.activation_bytes = Bytes(10'000'000);
    l.input_bytes = Bytes(1'000'000);
    l.output_bytes = output;
    v.layers.push_back(l);
  }
  p.variants.push_back(v);
  return p;
}

topo::Topology hierarchy(int devices) {
  topo::HierarchicalParams h;
  h.devices_per_level = {devices};
  h.bandwidth_per_level = {Bandwidth::gigabytes_per_second(100)};
  h.latency_per_level = {Time::microseconds(1)};
  return topo::build_hierarchical(h);
}

// Two stages of four layers, two replicas, 4 MB boundary transfers, on a 4-device hierarchy,
// priced on the collective oracle.
struct TwoStagesTwoReplicas {
  workload::LayerProfile profile = uniform_profile(Bytes(4'000'000), 16);
  topo::Topology topology = hierarchy(4);
  placer::Plan plan = priced();

 private:
  placer::Plan priced() const {
    placer::PlanChoice c;
    c.boundaries = {0, 4, 8};
    c.data_parallel = 2;
    placer::OracleCommCost oracle(topology);
    placer::CostOptions o;
    o.devices = 4;
    return placer::evaluate(profile, c, oracle, o);
  }
};

TEST(PlanReplay, UniformStagesOnAZeroCostNetworkMatchTheEstimateExactly) {
  const auto profile = uniform_profile(Bytes(0), 16);
  placer::PlanChoice c;
  c.boundaries = {0, 2, 4, 6, 8};
  c.data_parallel = 1;
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 4;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  const auto topology = hierarchy(4);
  const RunRecord r = replay_plan(plan, profile, topology, {});
  // (M + S - 1) x (2 layers x 300 us) = 19 x 600 us.
  EXPECT_EQ(plan.iteration_time, Time::microseconds(19 * 600));
  EXPECT_EQ(r.summary.iteration_time, plan.iteration_time);
  EXPECT_EQ(r.summary.estimate, plan.iteration_time);
  // Memory peaks equal the memory model's per-stage figures (stage p holds S - p microbatches).
  for (std::size_t p = 0; p < 4; ++p) {
    const topo::DeviceId device = plan.device_map().device(static_cast<int>(p), 0, 0);
    bool found = false;
    for (const auto& peak : r.peaks) {
      if (peak.device != device) continue;
      EXPECT_EQ(peak.peak, plan.stages[p].memory.total()) << "stage " << p;
      found = true;
    }
    EXPECT_TRUE(found);
  }
}

TEST(PlanReplay, BusiestLinksSeriesCarryTheirBytesAndLeaveTheRecordAsItWas) {
  const TwoStagesTwoReplicas setup;
  const auto& [profile, topology, plan] = setup;
  const RunRecord plain = replay_plan(plan, profile, topology, {});
  PlanReplayOptions options;
  options.utilization_links = 3;
  const RunRecord r = replay_plan(plan, profile, topology, options);
  EXPECT_TRUE(plain.link_series.empty());
  // The topology table: every node and directed link of the topology, as given.
  ASSERT_EQ(r.topology.nodes.size(), topology.num_nodes());
  ASSERT_EQ(r.topology.links.size(), topology.num_links());
  EXPECT_EQ(r.topology.name, topology.name());
  EXPECT_EQ(r.topology.nodes[4].name, topology.node(4).name);
  EXPECT_EQ(r.topology.nodes[4].kind, topo::NodeKind::kSwitch);
  EXPECT_EQ(r.topology.links[3].dst, topology.link(3).dst);
  EXPECT_EQ(r.topology.links[3].bandwidth, topology.link(3).bandwidth);
  EXPECT_EQ(r.summary.iteration_time, plain.summary.iteration_time);
  ASSERT_EQ(r.timeline.size(), plain.timeline.size());
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    EXPECT_EQ(r.timeline[i].end, plain.timeline[i].end) << "row " << i;
  }
  ASSERT_EQ(r.link_series.size(), 3u);
  const double seconds = r.summary.iteration_time.to_seconds();
  double previous = 2;
  for (const LinkSeries& s : r.link_series) {
    const topo::Link& link = topology.link(s.link);
    EXPECT_EQ(s.src, link.src);
    EXPECT_EQ(s.dst, link.dst);
    // Busiest first, and the series integrates to the bytes the link carried.
    const LinkRow* row = nullptr;
    for (const LinkRow& l : r.links) {
      if (l.src == s.src && l.dst == s.dst) row = &l;
    }
    ASSERT_NE(row, nullptr);
    EXPECT_LE(row->utilization, previous);
    previous = row->utilization;
    ASSERT_GE(s.points.size(), 2u);
    EXPECT_EQ(s.points.back().utilization, 0.0);
    double bytes = 0;
    for (std::size_t i = 0; i + 1 < s.points.size(); ++i) {
      EXPECT_LT(s.points[i].at, s.points[i + 1].at);
      EXPECT_GE(s.points[i].utilization, 0.0);
      EXPECT_LE(s.points[i].utilization, 1.0 + 1e-12);
      bytes += s.points[i].utilization * link.bandwidth.bytes_per_s() *
               (s.points[i + 1].at - s.points[i].at).to_seconds();
    }
    EXPECT_NEAR(bytes, row->bytes, 1e-6 * row->bytes);
    EXPECT_NEAR(row->utilization, row->bytes / (link.bandwidth.bytes_per_s() * seconds), 1e-12);
  }
}

TEST(PlanReplay, TransfersAndReductionsOnARealNetworkCostTime) {
  const TwoStagesTwoReplicas setup;
  const auto& [profile, topology, plan] = setup;
  const RunRecord r = replay_plan(plan, profile, topology, {});
  // Lower bound: the pipeline's compute alone, 8 microbatches per replica over 2 stages of
  // 4 x 300 us; the transfers (4 MB at 100 GB/s = 40 us + latency) add to it.
  const Time compute_only = Time::microseconds((8 + 2 - 1) * 1200);
  EXPECT_GT(r.summary.iteration_time, compute_only);
  EXPECT_GT(r.summary.exposed_communication, Time::zero());
  EXPECT_FALSE(r.links.empty());
  // Every collective row is a gradient bucket reduced over the 2 replicas, no faster than its
  // closed form.
  ASSERT_FALSE(r.collectives.empty());
  for (const auto& col : r.collectives) {
    EXPECT_EQ(col.group.size(), 2u);
    EXPECT_GE(col.end - col.start, col.closed_form);
  }
}

// A replay given a stop flag that stays false is the replay without one; a raised flag stops it
// with `net::Stopped` (what `Job::search(verify_with)` does to a candidate that drops out).
TEST(PlanReplay, AStopFlagStopsTheReplayAndOtherwiseChangesNothing) {
  const TwoStagesTwoReplicas setup;
  const auto& [profile, topology, plan] = setup;
  const RunRecord plain = replay_plan(plan, profile, topology, {});
  std::atomic<bool> stop{false};
  const RunRecord watched = replay_plan(plan, profile, topology, {}, nullptr, &stop);
  EXPECT_EQ(watched.summary.iteration_time, plain.summary.iteration_time);
  EXPECT_EQ(watched.timeline.size(), plain.timeline.size());
  ASSERT_EQ(watched.links.size(), plain.links.size());
  for (std::size_t i = 0; i < plain.links.size(); ++i) {
    EXPECT_EQ(watched.links[i].bytes, plain.links[i].bytes);
    EXPECT_EQ(watched.links[i].busy, plain.links[i].busy);
  }
  stop = true;
  EXPECT_THROW((void)replay_plan(plan, profile, topology, {}, nullptr, &stop), net::Stopped);
}

// Under a collective model each gradient bucket runs the tuner's algorithm for its group: four
// replicas on one NVLink SHARP switch reduce 4 MB buckets with NVLS (1 us + 2 us + 5 MB at
// 90 GB/s = 58.6 us) rather than the ring (5 us + 6 x 2 us + 6 MB at 100 GB/s = 77 us); a fixed
// algorithm and the ideal network are kept.
TEST(PlanReplay, BucketsRunTheTunersAlgorithmUnderACollectiveModel) {
  const auto profile = uniform_profile(Bytes(0), 16);
  placer::PlanChoice c;
  c.boundaries = {0, 8};
  c.data_parallel = 4;
  topo::Topology topology = hierarchy(4);
  topology.set_nvlink_sharp(true);
  auto model = std::make_shared<topo::CollectiveModel>();
  auto& simple = model->protocols[static_cast<std::size_t>(topo::Protocol::kSimple)];
  simple.enabled = true;
  simple.base_latency = Time::microseconds(5);
  model->nvls = topo::NvlsModel{0.9, Time::microseconds(1)};
  topology.set_collective_model(model);
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 4;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  const RunRecord tuned = replay_plan(plan, profile, topology, {});
  ASSERT_EQ(tuned.collectives.size(), 4u);  // one per bucket
  for (const auto& col : tuned.collectives) {
    EXPECT_EQ(col.algorithm, "nvls");
    EXPECT_EQ(col.size, Bytes(4'000'000));
    EXPECT_EQ(col.closed_form, Time::nanoseconds(58'555) + Time::picoseconds(556));
    EXPECT_GE(col.end - col.start, col.closed_form);
  }
  PlanReplayOptions ring;
  ring.data_parallel_algorithm = coll::Algorithm::kRing;
  const RunRecord fixed = replay_plan(plan, profile, topology, ring);
  for (const auto& col : fixed.collectives) {
    EXPECT_EQ(col.algorithm, "ring");
    EXPECT_EQ(col.closed_form, Time::microseconds(77));
  }
  PlanReplayOptions ideal;
  ideal.ideal = true;
  for (const auto& col : replay_plan(plan, profile, topology, ideal).collectives) {
    EXPECT_EQ(col.algorithm, "ring");
    EXPECT_EQ(col.closed_form, Time::microseconds(6 * 2 + 60));  // no base latency, line rate
  }
}

// On a `kind: dimensions` network (Ring of 2, 200 GiB/s, 50 ns x FullyConnected of 4, 100 GiB/s,
// 500 ns) the gradient buckets of 8 replicas run hierarchical with direct on the FullyConnected
// dimension, as the placer prices them: 4 MB allreduce 2 · ((50 ns + S/(2 · 200 GiB/s)) +
// (500 ns + S/2/(4 · 100 GiB/s))) = 29.040 us, the oracle's figure for the same group.
TEST(PlanReplay, BucketsRunTheDimensionsAlgorithmsOnADimensionsNetwork) {
  const auto profile = uniform_profile(Bytes(0), 16);
  placer::PlanChoice c;
  c.boundaries = {0, 8};
  c.data_parallel = 8;
  const topo::Topology topology = topo::load_topology_string(
      "kind: dimensions\nname: rfc\ntopology: [Ring, FullyConnected]\nnpus_count: [2, 4]\n"
      "bandwidth: [\"200 GiB/s\", \"100 GiB/s\"]\nlatency: [\"50 ns\", \"500 ns\"]\n",
      "rfc.yaml");
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 8;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  const RunRecord r = replay_plan(plan, profile, topology, {});
  const double s = 4e6;
  const double gib = 1024.0 * 1024 * 1024;
  const double expected = 2 * ((50e-9 + s / (2 * 200 * gib)) + (500e-9 + s / 2 / (4 * 100 * gib)));
  EXPECT_NEAR(expected, 29.040e-6, 1e-9);
  placer::OracleCommCost oracle(topology);
  const placer::GroupLayout all{.member = {8, 1}};
  const Time priced = oracle.collective(workload::CollectiveOp::kAllReduce, Bytes(4'000'000), all);
  EXPECT_EQ(oracle.choice(workload::CollectiveOp::kAllReduce, Bytes(4'000'000), all)->algorithm,
            coll::Algorithm::kHierarchical);
  ASSERT_EQ(r.collectives.size(), 4u);  // one per bucket
  for (const auto& col : r.collectives) {
    EXPECT_EQ(col.algorithm, "hierarchical");
    EXPECT_EQ(col.size, Bytes(4'000'000));
    EXPECT_NEAR(col.closed_form.to_seconds(), expected, 8e-12);
    EXPECT_NEAR(col.closed_form.to_seconds(), priced.to_seconds(), 8e-12);
    EXPECT_GE(col.end - col.start, col.closed_form);
  }
}

}  // namespace
}  // namespace nest::replay

namespace nest::replay {
namespace {

TEST(PlanReplay, InterleavedChunksShortenTheBubbleOfTheSamePlan) {
  const auto profile = uniform_profile(Bytes(0), 16);
  placer::PlanChoice c;
  c.boundaries = {0, 2, 4, 6, 8};
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 4;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  const auto topology = hierarchy(4);
  PlanReplayOptions interleaved;
  interleaved.schedule = Schedule::kInterleaved;
  interleaved.virtual_stages = 2;
  const RunRecord r = replay_plan(plan, profile, topology, interleaved);
  // 8 chunks of one 300 us layer: (M·v + S - 1) chunk times = (32 + 3) x 300 us, against
  // (M + S - 1) x 600 us = 19 x 600 us for the plan's own 1F1B.
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(35 * 300));
  EXPECT_EQ(r.summary.estimate, Time::microseconds(19 * 600));
  // Chunk c runs on the devices of plan stage c mod 4.
  for (const auto& row : r.timeline) {
    if (row.kind != TaskKind::kForward) continue;
    EXPECT_EQ(row.device, plan.device_map().device(row.stage % 4, 0, 0));
  }
}

TEST(PlanReplay, AnInterleavedPlanReplaysAsItsEstimateOnAZeroNetwork) {
  const auto profile = uniform_profile(Bytes(0), 16);
  placer::PlanChoice c;
  c.boundaries = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  c.virtual_stages = 2;
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 4;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  // (M·v + S − 1) chunk slots of 300 us, with a hand-computed bubble of (S − 1)·300 us.
  EXPECT_EQ(plan.iteration_time, Time::microseconds(35 * 300));
  EXPECT_EQ(plan.breakdown.bubble, Time::microseconds(3 * 300));
  const auto topology = hierarchy(4);
  const RunRecord r = replay_plan(plan, profile, topology, {});  // 1f1b: the plan's own
  EXPECT_EQ(r.summary.iteration_time, plan.iteration_time);
  // Peaks equal the cost model's interleaved memory per stage.
  for (std::size_t p = 0; p < 4; ++p) {
    const topo::DeviceId device = plan.device_map().device(static_cast<int>(p), 0, 0);
    for (const auto& peak : r.peaks) {
      if (peak.device == device) {
        EXPECT_EQ(peak.peak, plan.stages[p].memory.total()) << p;
      }
    }
  }
  PlanReplayOptions other;
  other.schedule = Schedule::kInterleaved;
  other.virtual_stages = 4;
  try {
    (void)replay_plan(plan, profile, topology, other);
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--schedule: the plan is interleaved with 2 virtual stages (expected 1f1b (the "
                 "plan's schedule) or interleaved with --virtual-stages 2)");
  }
}

// An embedding, six blocks and a head, as Megatron-LM splits them: every chunk the same blocks.
workload::LayerProfile chain_with_ends() {
  workload::LayerProfile p = uniform_profile(Bytes(0), 4);
  auto& layers = p.variants[0].layers;
  layers.resize(6);
  workload::Layer embedding = layers[0];
  embedding.name = "embedding";
  embedding.forward = Time::microseconds(10);
  workload::Layer head = layers[0];
  head.name = "head";
  head.forward = Time::microseconds(60);
  layers.insert(layers.begin(), embedding);
  layers.push_back(head);
  return p;
}

TEST(PlanReplay, ChunksHoldEqualBlocksWithTheEmbeddingAndHeadOnTheEnds) {
  const auto profile = chain_with_ends();
  // S = 2, v = 3: chunks {embedding, block}, block, block, block, block, {block, head}; each
  // device 3 blocks (529.6B on 35 stages: 3 each; counting the ends as layers gave one 4).
  const auto b = placer::interleaved_partition(profile.variants[0], 2, 3);
  EXPECT_EQ(b, (std::vector<std::size_t>{0, 2, 3, 4, 5, 6, 8}));
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 2;
  const placer::Plan plan =
      placer::evaluate(profile, {.boundaries = b, .virtual_stages = 3}, zero, o);
  const auto topology = hierarchy(2);
  const RunRecord r = replay_plan(plan, profile, topology, {});
  // A 1F1B plan replayed with 3 virtual stages is cut the same way.
  const placer::Plan plain = placer::evaluate(
      profile, {.boundaries = placer::even_partition(profile.variants[0], 2)}, zero, o);
  PlanReplayOptions three;
  three.schedule = Schedule::kInterleaved;
  three.virtual_stages = 3;
  const RunRecord again = replay_plan(plain, profile, topology, three);
  for (const RunRecord* run : {&r, &again}) {
    std::vector<std::pair<int, int>> forwards(6, {-1, -1});
    for (const auto& row : run->timeline) {
      if (row.kind != TaskKind::kForward) continue;
      forwards[static_cast<std::size_t>(row.stage)] = {row.first_layer, row.last_layer};
    }
    EXPECT_EQ(forwards,
              (std::vector<std::pair<int, int>>{{0, 2}, {2, 3}, {3, 4}, {4, 5}, {5, 6}, {6, 8}}));
  }
}

TEST(PlanReplay, SelectiveRecomputationReplaysAsItsEstimateWithItsMemory) {
  auto profile = uniform_profile(Bytes(0), 16);
  profile.selective_recompute_allowed = true;
  for (auto& l : profile.variants[0].layers) {
    l.selective_recompute = Time::microseconds(20);
    l.selective_activation_bytes = Bytes(3'000'000);
  }
  placer::PlanChoice c;
  c.boundaries = {0, 2, 4, 6, 8};
  c.recompute = workload::Recompute::kSelective;
  placer::ZeroCommCost zero;
  placer::CostOptions o;
  o.devices = 4;
  const placer::Plan plan = placer::evaluate(profile, c, zero, o);
  // (M + S − 1) × 2 layers × (100 + 200 + 20) us.
  EXPECT_EQ(plan.iteration_time, Time::microseconds(19 * 640));
  const auto topology = hierarchy(4);
  const RunRecord r = replay_plan(plan, profile, topology, {});
  EXPECT_EQ(r.summary.iteration_time, plan.iteration_time);
  for (std::size_t p = 0; p < 4; ++p) {
    const topo::DeviceId device = plan.device_map().device(static_cast<int>(p), 0, 0);
    for (const auto& peak : r.peaks) {
      if (peak.device == device) {
        EXPECT_EQ(peak.peak, plan.stages[p].memory.total()) << p;
      }
    }
  }
  // Stage 0: 4 in flight × 2 × 3 MB kept + one core of 7 MB.
  EXPECT_EQ(plan.stages[0].memory.activations, Bytes(4 * 6'000'000 + 7'000'000));
}

// The cost model prices the data-parallel reduction as the replay runs it: in buckets beside
// the last backward pass, each stage ending its pipeline when the cooldown reaches it. On one
// switch the buckets of the two stages never share a link, so the two agree.
TEST(PlanReplay, BucketedGradientSyncMatchesTheCostModel) {
  auto profile = uniform_profile(Bytes(0), 16);
  for (auto& l : profile.variants[0].layers) l.parameter_bytes = Bytes(400'000'000);
  placer::PlanChoice c;
  c.boundaries = {0, 4, 8};
  c.data_parallel = 2;
  const auto topology = hierarchy(4);
  placer::OracleCommCost oracle(topology);
  for (const bool overlap : {true, false}) {
    placer::CostOptions o;
    o.devices = 4;
    o.overlap_gradient_sync = overlap;
    const placer::Plan plan = placer::evaluate(profile, c, oracle, o);
    PlanReplayOptions ro;
    ro.overlap_gradient_sync = overlap;
    const RunRecord r = replay_plan(plan, profile, topology, ro);
    // 1.6 GB per stage in 4 buckets of 400 MB, 4 ms each on 100 GB/s (+ latency), against a
    // last backward of 4 x 200 us: overlapped, the last bucket starts when its 200 us of
    // backward end, at least 12 ms after the first.
    EXPECT_GT(plan.breakdown.data_parallel_sync, Time::milliseconds(overlap ? 15 : 16));
    EXPECT_NEAR(r.summary.iteration_time.to_seconds(), plan.iteration_time.to_seconds(), 2e-6)
        << (overlap ? "overlap" : "after the backward");
  }
}

}  // namespace
}  // namespace nest::replay

namespace nest::replay {
namespace {

// ---- Shard planes: one shard simulated for all, only where it is exact ----

const std::string kRoot = NEST_SOURCE_DIR;

// GPT-3 175B from the artifact profile (t = 4), `stages` stages over `chunks` chunks of equal
// blocks, d replicas, 8 microbatches per replica, placed in `order` and priced on `topology`.
placer::Plan gpt3_plan(const workload::LayerProfile& profile, const topo::Topology& topology,
                       int stages, int virtual_stages, int d, placer::PlacementOrder order) {
  placer::PlanChoice c;
  const int chunks = stages * virtual_stages;
  c.boundaries = {0};
  for (int i = 1; i < chunks; ++i) c.boundaries.push_back(1 + 96 * i / chunks);
  c.boundaries.push_back(97);
  c.data_parallel = d;
  c.virtual_stages = virtual_stages;
  c.order = order;
  c.recompute = workload::Recompute::kFull;
  placer::OracleCommCost comm(topology);
  const placer::CostOptions o{.rules = workload::MemoryRules::kNestArtifact,
                              .devices = static_cast<std::int64_t>(topology.num_devices())};
  return placer::evaluate(profile, c, comm, o);
}

workload::LayerProfile gpt3_profile(std::int64_t microbatches) {
  workload::LayerProfile p =
      workload::load_layer_profile(kRoot + "/workloads/profiles/gpt3-175b-h100.yaml");
  p.variants.resize(1);  // t = 4
  p.variants[0].microbatches = microbatches;
  p.global_batch = microbatches;
  return p;
}

// Every field of the two records, to the picosecond and the byte.
void expect_same_record(const RunRecord& a, const RunRecord& b) {
  EXPECT_EQ(a.summary.iteration_time, b.summary.iteration_time);
  EXPECT_EQ(a.summary.exposed_communication, b.summary.exposed_communication);
  EXPECT_EQ(a.summary.peak_memory, b.summary.peak_memory);
  EXPECT_EQ(a.summary.bubble_fraction, b.summary.bubble_fraction);
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (std::size_t i = 0; i < a.timeline.size(); ++i) {
    const TimelineRow& x = a.timeline[i];
    const TimelineRow& y = b.timeline[i];
    ASSERT_TRUE(x.device == y.device && x.kind == y.kind && x.stream == y.stream &&
                x.stage == y.stage && x.microbatch == y.microbatch && x.start == y.start &&
                x.end == y.end && x.first_layer == y.first_layer && x.last_layer == y.last_layer)
        << "timeline row " << i << ": device " << x.device << " vs " << y.device << ", end "
        << x.end.ps() << " vs " << y.end.ps();
  }
  ASSERT_EQ(a.memory.size(), b.memory.size());
  for (std::size_t i = 0; i < a.memory.size(); ++i) {
    ASSERT_TRUE(a.memory[i].device == b.memory[i].device && a.memory[i].at == b.memory[i].at &&
                a.memory[i].bytes == b.memory[i].bytes &&
                a.memory[i].category == b.memory[i].category)
        << "memory row " << i;
  }
  ASSERT_EQ(a.peaks.size(), b.peaks.size());
  for (std::size_t i = 0; i < a.peaks.size(); ++i) {
    ASSERT_TRUE(a.peaks[i].device == b.peaks[i].device && a.peaks[i].peak == b.peaks[i].peak)
        << "peak " << i;
  }
  ASSERT_EQ(a.links.size(), b.links.size());
  for (std::size_t i = 0; i < a.links.size(); ++i) {
    EXPECT_EQ(a.links[i].src, b.links[i].src) << "link " << i;
    EXPECT_EQ(a.links[i].dst, b.links[i].dst) << "link " << i;
    EXPECT_EQ(a.links[i].bytes, b.links[i].bytes) << "link " << i;
    EXPECT_EQ(a.links[i].busy, b.links[i].busy) << "link " << i;
    EXPECT_EQ(a.links[i].utilization, b.links[i].utilization) << "link " << i;
  }
  ASSERT_EQ(a.collectives.size(), b.collectives.size());
  for (std::size_t i = 0; i < a.collectives.size(); ++i) {
    EXPECT_EQ(a.collectives[i].op, b.collectives[i].op) << "collective " << i;
    EXPECT_EQ(a.collectives[i].size, b.collectives[i].size) << "collective " << i;
    EXPECT_EQ(a.collectives[i].group, b.collectives[i].group) << "collective " << i;
    EXPECT_EQ(a.collectives[i].algorithm, b.collectives[i].algorithm) << "collective " << i;
    EXPECT_EQ(a.collectives[i].start, b.collectives[i].start) << "collective " << i;
    EXPECT_EQ(a.collectives[i].end, b.collectives[i].end) << "collective " << i;
    EXPECT_EQ(a.collectives[i].closed_form, b.collectives[i].closed_form) << "collective " << i;
  }
  ASSERT_EQ(a.link_series.size(), b.link_series.size());
  for (std::size_t i = 0; i < a.link_series.size(); ++i) {
    EXPECT_EQ(a.link_series[i].link, b.link_series[i].link);
    ASSERT_EQ(a.link_series[i].points.size(), b.link_series[i].points.size());
    for (std::size_t j = 0; j < a.link_series[i].points.size(); ++j) {
      EXPECT_EQ(a.link_series[i].points[j].at, b.link_series[i].points[j].at);
      EXPECT_EQ(a.link_series[i].points[j].utilization, b.link_series[i].points[j].utilization);
    }
  }
}

struct PlaneCase {
  const char* name;
  std::string topology;  // file under topologies/, or YAML text
  int stages;
  int virtual_stages;  // replayed interleaved (the 1F1B plan cut into S x v chunks) when > 1
  int d;
  placer::PlacementOrder order;
  std::int32_t expected_simulated;  // 1: merged; 4: every shard simulated
};

// A case's topology (a file under topologies/, or YAML text), the GPT-3 plan on it (8
// microbatches per replica) and replay options recording the 4 busiest links' series,
// interleaved when v > 1.
struct CaseRun {
  topo::Topology topology;
  workload::LayerProfile profile;
  placer::Plan plan;
  PlanReplayOptions options;
};

CaseRun case_run(const char* name, const std::string& topology, int stages, int virtual_stages,
                 int d, placer::PlacementOrder order) {
  CaseRun c{topology.find('\n') == std::string::npos
                ? topo::load_topology(kRoot + "/topologies/" + topology)
                : topo::load_topology_string(topology, name, {}),
            gpt3_profile(8 * d),
            {},
            {}};
  c.plan = gpt3_plan(c.profile, c.topology, stages, 1, d, order);
  c.options.utilization_links = 4;
  if (virtual_stages > 1) {
    c.options.schedule = Schedule::kInterleaved;
    c.options.virtual_stages = virtual_stages;
  }
  return c;
}

void check_plane_case(const PlaneCase& pc) {
  SCOPED_TRACE(pc.name);
  const CaseRun c = case_run(pc.name, pc.topology, pc.stages, pc.virtual_stages, pc.d, pc.order);
  PlanReplayOptions full = c.options;
  full.merge_shards = false;
  const RunRecord a = replay_plan(c.plan, c.profile, c.topology, c.options);
  const RunRecord b = replay_plan(c.plan, c.profile, c.topology, full);
  EXPECT_EQ(a.simulated_shards, pc.expected_simulated);
  EXPECT_EQ(b.simulated_shards, 4);
  EXPECT_GT(a.summary.iteration_time.ps(), a.summary.estimate.ps() / 2);
  expect_same_record(a, b);
}

// One leaf per rail (h100_rail_64: 8 nodes, every rail on its own leaf): shard k of every stage
// replica sits on rail k (or k + 4), its transfers and its reduction ring stay on that rail's
// links and its NVLink ports, so the planes are disjoint and alike; merged, and equal to the
// full replay under the NCCL model (tuner per group, base latencies) in both orders and
// interleaved.
TEST(PlanReplay, ShardPlanesMergeOnSeparateRailsAndEqualTheFullReplay) {
  using enum placer::PlacementOrder;
  check_plane_case({"tp-pp-dp", "h100_rail_64.yaml", 2, 1, 8, kTensorPipelineData, 1});
  check_plane_case({"tp-dp-pp", "h100_rail_64.yaml", 2, 1, 8, kTensorDataPipeline, 1});
  check_plane_case({"interleaved", "h100_rail_64.yaml", 2, 2, 8, kTensorPipelineData, 1});
  check_plane_case({"pp-tp-dp", "h100_rail_64.yaml", 4, 1, 4, kPipelineTensorData, 1});
}

// Where shards' flows meet on links the condition fails and every shard is simulated, with the
// same result as before: a k = 8 fat-tree (shards of one stage replica share their edge switch's
// uplinks), and a thin rail network of one node per leaf and two spines, where the rings and
// transfers of different shards take ECMP paths that collide differently in each rail.
TEST(PlanReplay, ShardPlanesAreNotMergedWhereShardsShareLinks) {
  using enum placer::PlacementOrder;
  const std::string fat_tree =
      "kind: fat_tree\nname: ft8\nk: 8\nlink_bandwidth: 400 Gb/s\nlink_latency: 1 us\n";
  check_plane_case({"fat-tree tp-dp-pp", fat_tree, 2, 1, 4, kTensorDataPipeline, 4});
  const std::string thin =
      "kind: rail_optimized\nname: thin\nnodes: 8\ngpus_per_node: 8\nnodes_per_leaf: 1\n"
      "spines: 2\nnvlink_bandwidth: 450 GB/s\nnvlink_latency: 0.5 us\nnic_bandwidth: 400 Gb/s\n"
      "nic_latency: 1 us\nspine_bandwidth: 100 Gb/s\nspine_latency: 1 us\n";
  check_plane_case({"thin rail tp-dp-pp", thin, 2, 1, 8, kTensorDataPipeline, 4});
}

// ---- Reductions timed alone: the same record as flow by flow, where it applies ----

struct AloneCase {
  const char* name;
  std::string topology;  // file under topologies/, or YAML text
  int stages;
  int virtual_stages;
  int d;
  placer::PlacementOrder order;
  bool merge_shards;
  std::int32_t alone;                                       // reductions timed alone
  std::int32_t simulated;                                   // reductions simulated flow by flow
  std::optional<coll::Algorithm> algorithm = std::nullopt;  // the reductions' (else the tuner's)
};

// Replays with and without `alone_reductions` (and with the busiest links' series, whose second
// replay keeps the recorded links' reductions in the simulator) and compares every field.
void check_alone_case(const AloneCase& ac) {
  SCOPED_TRACE(ac.name);
  CaseRun c = case_run(ac.name, ac.topology, ac.stages, ac.virtual_stages, ac.d, ac.order);
  c.options.merge_shards = ac.merge_shards;
  c.options.data_parallel_algorithm = ac.algorithm;
  PlanReplayOptions simulated = c.options;
  simulated.alone_reductions = false;
  const RunRecord a = replay_plan(c.plan, c.profile, c.topology, c.options);
  const RunRecord b = replay_plan(c.plan, c.profile, c.topology, simulated);
  EXPECT_EQ(a.alone_reductions, ac.alone);
  EXPECT_EQ(a.simulated_reductions, ac.simulated);
  EXPECT_EQ(b.alone_reductions, 0);
  EXPECT_EQ(b.simulated_reductions, ac.alone + ac.simulated);
  EXPECT_EQ(a.link_series.size(), 4U);
  expect_same_record(a, b);
}

const std::string kThinRail =
    "kind: rail_optimized\nname: thin\nnodes: 8\ngpus_per_node: 8\nnodes_per_leaf: 1\n"
    "spines: 2\nnvlink_bandwidth: 450 GB/s\nnvlink_latency: 0.5 us\nnic_bandwidth: 400 Gb/s\n"
    "nic_latency: 1 us\nspine_bandwidth: 100 Gb/s\nspine_latency: 1 us\n";

// 2 stages x 4 buckets per shard. tp-pp-dp on h100_rail_64: a replica fills a node, so the
// transfers between stages stay on NVLink while each shard's ring runs over its own rail and
// leaf: every bucket runs alone (shard 0 standing for the four), interleaved too. tp-dp-pp on
// the thin rail network (every shard simulated, their ECMP paths colliding differently): the
// last stage starts its first bucket during its last backward pass, while that pass's gradient
// transfers are still to leave over the ring's links, so those four (one per shard) run in the
// simulator, and the other 28 alone. With 0.5 Gb/s spines and 4 stages of 2 chunks, some
// buckets start while a transfer of their stage still drains over their links, and 12 of 64 stay
// in the simulator. Checked by hand: dropping from the condition the transfers still to
// start (thin rail), the flows still draining (slow spines) or other groups' routes (the
// fat-tree below) changes that case's record (reductions timed alone that share links, finishing
// too early), and the case fails.
TEST(PlanReplay, AloneReductionsEqualTheFlowByFlowReplay) {
  using enum placer::PlacementOrder;
  check_alone_case({"tp-pp-dp", "h100_rail_64.yaml", 2, 1, 8, kTensorPipelineData, true, 8, 0});
  check_alone_case({"interleaved", "h100_rail_64.yaml", 2, 2, 8, kTensorPipelineData, true, 8, 0});
  check_alone_case({"thin rail", kThinRail, 2, 1, 8, kTensorDataPipeline, true, 28, 4});
  std::string slow = kThinRail;
  slow.replace(slow.find("spine_bandwidth: 100 Gb/s"), 25, "spine_bandwidth: 0.5 Gb/s");
  check_alone_case({"slow spines", slow, 4, 2, 4, kTensorDataPipeline, true, 52, 12});
}

// Reductions whose own flows share links, timed by their event simulation alone
// (`coll::AloneSimulator`) where the condition holds. tp-dp-pp on h100_rail_64: a group spans
// nodes two GPUs per node, so its ring runs two channels whose flows share NICs and NVLink
// ports and the contention-free evaluation declines; no other group crosses its links, so 6 of
// its 8 buckets run alone (24 of 32 with every shard simulated), the last stage's first bucket
// waiting for its gradient transfers. NCCL's double binary tree (chosen for the reductions),
// whose pieces go up and down a node's links at once: tp-pp-dp on h100_rail_64 (each group on
// its own rail), on the thin rail network (ECMP over two spines) and with 0.5 Gb/s spines,
// where buckets start while their stage's transfers still drain over their links.
TEST(PlanReplay, ReductionsWhoseFlowsShareLinksAreTimedByTheirRunAlone) {
  using enum placer::PlacementOrder;
  check_alone_case({"two channels", "h100_rail_64.yaml", 2, 1, 8, kTensorDataPipeline, true, 6, 2});
  check_alone_case(
      {"every shard", "h100_rail_64.yaml", 2, 1, 8, kTensorDataPipeline, false, 24, 8});
  const auto tree = coll::Algorithm::kTree;
  check_alone_case({"tree", "h100_rail_64.yaml", 2, 1, 8, kTensorPipelineData, true, 8, 0, tree});
  check_alone_case({"tree, thin rail", kThinRail, 2, 1, 8, kTensorDataPipeline, true, 28, 4, tree});
  std::string slow = kThinRail;
  slow.replace(slow.find("spine_bandwidth: 100 Gb/s"), 25, "spine_bandwidth: 0.5 Gb/s");
  check_alone_case({"tree, slow spines", slow, 4, 2, 4, kTensorDataPipeline, true, 52, 12, tree});
}

// The buckets' algorithms chosen on the oracle that priced the plan (as `nest simulate` does):
// its memo answers what pricing simulated, and the record is a fresh tuner's. GPT-3 tp-dp-pp
// on h100_rail_64 under its collective model (the tuner weighs ring and tree per group). An
// oracle of another seed is refused.
TEST(PlanReplay, ATunerThatPricedThePlanGivesTheSameRecord) {
  CaseRun c = case_run("rail 64", "h100_rail_64.yaml", 2, 1, 8,
                       placer::PlacementOrder::kTensorDataPipeline);
  placer::PlanChoice choice;
  choice.boundaries = {0, 49, 97};
  choice.data_parallel = 8;
  choice.order = placer::PlacementOrder::kTensorDataPipeline;
  choice.recompute = workload::Recompute::kFull;
  placer::OracleCommCost comm(c.topology);
  const placer::CostOptions o{.rules = workload::MemoryRules::kNestArtifact,
                              .devices = static_cast<std::int64_t>(c.topology.num_devices())};
  c.plan = placer::evaluate(c.profile, choice, comm, o);
  const RunRecord fresh = replay_plan(c.plan, c.profile, c.topology, c.options);
  const coll::OracleStats before = comm.stats();
  const RunRecord shared =
      replay_plan(c.plan, c.profile, c.topology, c.options, &comm.collective_oracle());
  expect_same_record(shared, fresh);
  EXPECT_GT(comm.stats().queries, before.queries);
  EXPECT_GT(comm.stats().exact_hits + comm.stats().structural_hits,
            before.exact_hits + before.structural_hits);
  coll::CollectiveOracle other(c.topology, coll::OracleSettings{.seed = 1});
  try {
    (void)replay_plan(c.plan, c.profile, c.topology, c.options, &other);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_STREQ(e.what(), "internal error: replay: the tuner given prices another network");
  }
}

// Reductions stay in the simulator where the condition fails. A k = 8 fat-tree: the shards'
// rings share their edge switches' uplinks, so only the one group whose routes no other
// reduction crosses runs its four buckets alone (the first stage's, which has no gradient left
// to send), 28 simulated.
TEST(PlanReplay, ReductionsThatShareLinksStayInTheSimulator) {
  using enum placer::PlacementOrder;
  const std::string fat_tree =
      "kind: fat_tree\nname: ft8\nk: 8\nlink_bandwidth: 400 Gb/s\nlink_latency: 1 us\n";
  check_alone_case({"fat-tree", fat_tree, 2, 1, 4, kTensorDataPipeline, true, 4, 28});
}

}  // namespace
}  // namespace nest::replay
