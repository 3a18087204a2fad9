#include "nest/replay/replay.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/topo/router.h"
#include "nest/topo/topology.h"
#include "placer/stage_model.h"

namespace nest::replay {
namespace {

constexpr auto kRate = Bandwidth::gigabytes_per_second(100);  // 10 ps per byte

// `n` devices on a chain 0-1-2-... with 100 GB/s links and `latency` per hop.
topo::Topology chain(int n, Time latency) {
  topo::Topology t("chain", topo::Family::kExplicit);
  for (int i = 0; i < n; ++i) t.add_device("d" + std::to_string(i));
  for (int i = 0; i + 1 < n; ++i) {
    t.add_link(static_cast<topo::NodeId>(i), static_cast<topo::NodeId>(i + 1), kRate, latency);
  }
  return t;
}

// A two-rank ring allreduce written out by hand: two steps, each rank sends size/2 to the other.
AllreduceLauncher two_rank_ring(net::Simulator& sim, topo::Router& router) {
  return [&sim, &router](std::span<const topo::DeviceId> group, Bytes size,
                         std::function<void()> done) -> std::string {
    EXPECT_EQ(group.size(), 2u);
    const topo::DeviceId a = group[0], b = group[1];
    const Bytes half(size.count() / 2);
    // The step holds itself only weakly (a strong self-capture is a cycle that is never freed);
    // the flows' callbacks hold it strongly while a step is in flight.
    auto step = std::make_shared<std::function<void(int)>>();
    *step = [&sim, &router, a, b, half, done, self = std::weak_ptr(step)](int k) {
      if (k == 2) {
        done();
        return;
      }
      auto left = std::make_shared<int>(2);
      auto next = [left, step = self.lock(), k](net::FlowId, Time) {
        if (--*left == 0) (*step)(k + 1);
      };
      sim.start_flow(router.route(a, b), half, next);
      sim.start_flow(router.route(b, a), half, next);
    };
    (*step)(0);
    return "hand-written ring";
  };
}

StageSpec stage(Time f, Time b) {
  StageSpec s;
  s.forward = f;
  s.backward = b;
  return s;
}

ReplayInput pipeline(int stages, int microbatches, Time f, Time b) {
  ReplayInput in;
  in.devices.resize(1);
  for (int s = 0; s < stages; ++s) {
    in.stages.push_back(stage(f, b));
    in.stages.back().first_layer = s;
    in.stages.back().last_layer = s + 1;
    in.devices[0].push_back({static_cast<topo::DeviceId>(s)});
  }
  in.microbatches = {microbatches};
  return in;
}

// `in` with every stage sending `each_way` to its neighbours (activation and gradient).
ReplayInput sending(ReplayInput in, Bytes each_way) {
  for (auto& s : in.stages) {
    s.activation_out = each_way;
    s.gradient_out = each_way;
  }
  return in;
}

RunRecord run(const ReplayInput& in, const topo::Topology& t) {
  net::Simulator sim(t);
  topo::Router router(t);
  return replay(in, sim, two_rank_ring(sim, router), {});
}

TEST(Replay, OneStageOneDeviceIsTheSumOfCompute) {
  const auto t = chain(1, Time::zero());
  ReplayInput in = pipeline(1, 5, Time::milliseconds(3), Time::milliseconds(5));
  in.stages[0].optimizer = Time::milliseconds(1);
  const RunRecord r = run(in, t);
  EXPECT_EQ(r.summary.iteration_time, Time::milliseconds(41));  // 5 x (3 + 5) + 1
  EXPECT_EQ(r.summary.exposed_communication, Time::zero());
  EXPECT_EQ(r.timeline.size(), 11u);  // 5 forward, 5 backward, 1 optimizer
  EXPECT_DOUBLE_EQ(r.summary.bubble_fraction, 0.0);
}

TEST(Replay, UniformOneFOneBTakesMPlusSMinusOneStageTimes) {
  const auto t = chain(4, Time::zero());
  const RunRecord r = run(pipeline(4, 8, Time::microseconds(2), Time::microseconds(3)), t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds((8 + 4 - 1) * 5));
  // Each stage computes 8 x 5 us of the 55 us: the bubble is 3/11.
  EXPECT_NEAR(r.summary.bubble_fraction, 15.0 / 55.0, 1e-12);
}

TEST(Replay, UniformGPipeTakesMPlusSMinusOneStageTimes) {
  const auto t = chain(3, Time::zero());
  ReplayInput in = pipeline(3, 6, Time::microseconds(4), Time::microseconds(7));
  in.schedule = Schedule::kGPipe;
  const RunRecord r = run(in, t);
  // Forward phase (m + S - 1) x F, then backward phase (m + S - 1) x B.
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds((6 + 3 - 1) * 4 + (6 + 3 - 1) * 7));
}

TEST(Replay, MemoryPeaksFollowTheInFlightCount) {
  const auto t = chain(4, Time::zero());
  ReplayInput in = pipeline(4, 8, Time::microseconds(2), Time::microseconds(3));
  for (auto& s : in.stages) {
    s.weights = Bytes(1000);
    s.gradients = Bytes(1000);
    s.optimizer_state = Bytes(6000);
    s.stash = Bytes(100);
    s.working = Bytes(7);
  }
  const RunRecord r = run(in, t);
  ASSERT_EQ(r.peaks.size(), 4u);
  for (std::uint32_t s = 0; s < 4; ++s) {
    // The stage s-th from the end holds 4 - s microbatches under 1F1B (memory.h's in_flight).
    EXPECT_EQ(r.peaks[s].device, s);
    EXPECT_EQ(r.peaks[s].peak, Bytes(8000 + 100 * (4 - s) + 7)) << "stage " << s;
  }
  EXPECT_EQ(r.summary.peak_memory, Bytes(8407));
}

TEST(Replay, TwoStagesOnALinkHandComputed) {
  // d0 -- d1, 100 GB/s, 1 us. 1 MB transfers take 10 us + 1 us. F = 10 us, B = 20 us, m = 2.
  // Stage 0: F0 0-10, F1 10-20, B0 62-82 (gradient of mb 0 arrives at 62), B1 92-112.
  // Stage 1: F0 21-31, B0 31-51, F1 51-61, B1 61-81; gradients sent at 51 and 81.
  const auto t = chain(2, Time::microseconds(1));
  ReplayInput in =
      sending(pipeline(2, 2, Time::microseconds(10), Time::microseconds(20)), Bytes(1'000'000));
  const RunRecord r = run(in, t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(112));
  // Without the network: stage 1 runs 10-20, 20-40, 40-50, 50-70; stage 0 ends B1 at 90.
  EXPECT_EQ(r.summary.exposed_communication, Time::microseconds(22));
  // Microbatch 1's activation, ready at 20, leaves once microbatch 0's has arrived (at 21).
  int sends = 0;
  for (const auto& row : r.timeline) {
    if (row.kind == TaskKind::kSendActivation && row.microbatch == 1) {
      EXPECT_EQ(row.start, Time::microseconds(21));
      EXPECT_EQ(row.end, Time::microseconds(32));
      ++sends;
    }
  }
  EXPECT_EQ(sends, 1);
}

// The case of `PipelineMakespan.SendsShareTheLinkToTheNextStage` (the cost model's schedule,
// tests/unit/placer/boundary_transfer_test.cc) replayed: two stages, 2 microbatches, forward and
// backward 1 us, 300 kB (3 us) each way. Stage 0: F0 [0, 1], sent [1, 4]; F1 [1, 2], sent once
// F0's has arrived [4, 7]. Stage 1: F0 [4, 5], B0 [5, 6], sent back [6, 9], F1 [7, 8], B1 [8, 9],
// sent back [9, 12]. Stage 0: B0 [9, 10], B1 [12, 13]. Were the two activations sent at once
// they would share the link 2-6 and arrive at 6 and 7: 15 us.
TEST(Replay, SendsToTheNextStageLeaveOneAfterAnother) {
  const auto t = chain(2, Time::zero());
  ReplayInput in =
      sending(pipeline(2, 2, Time::microseconds(1), Time::microseconds(1)), Bytes(300'000));
  const RunRecord r = run(in, t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(13));
  std::vector<std::pair<Time, Time>> activations;
  for (const auto& row : r.timeline) {
    if (row.kind == TaskKind::kSendActivation) activations.emplace_back(row.start, row.end);
  }
  std::sort(activations.begin(), activations.end());
  const std::vector<std::pair<Time, Time>> expected = {
      {Time::microseconds(1), Time::microseconds(4)},
      {Time::microseconds(4), Time::microseconds(7)}};
  EXPECT_EQ(activations, expected);
}

TEST(Replay, BlockingSendsHoldTheirStageHandComputed) {
  // As above, but each stage waits for its sends (Megatron-LM's p2p of 2021-22). Stage 0:
  // F0 0-10, sends 10-21, F1 21-31, sends 31-42, B0 62-82, B1 103-123. Stage 1: F0 21-31,
  // B0 31-51, sends 51-62, F1 62-72 (its input waited since 42), B1 72-92, sends 92-103.
  const auto t = chain(2, Time::microseconds(1));
  ReplayInput in =
      sending(pipeline(2, 2, Time::microseconds(10), Time::microseconds(20)), Bytes(1'000'000));
  in.overlap_boundary_transfers = false;
  const RunRecord r = run(in, t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(123));
  int rows = 0;
  for (const auto& row : r.timeline) {
    if (row.stream != Stream::kCompute || row.device != 0 || row.microbatch != 1) continue;
    EXPECT_EQ(row.start,
              row.kind == TaskKind::kForward ? Time::microseconds(21) : Time::microseconds(103));
    ++rows;
  }
  EXPECT_EQ(rows, 2);
}

TEST(Replay, GradientBucketsOverlapTheLastBackward) {
  // Two replicas of one stage on d0 -- d1 (no latency). F = B = 10 us, 2 MB of gradients.
  const auto t = chain(2, Time::zero());
  ReplayInput in;
  in.stages = {stage(Time::microseconds(10), Time::microseconds(10))};
  in.stages[0].gradient_sync = Bytes(2'000'000);
  in.stages[0].optimizer = Time::microseconds(5);
  in.devices = {{{0}}, {{1}}};
  in.microbatches = {1, 1};
  in.gradient_buckets = 1;
  // One bucket: the ring sends 2 x 1 MB = 20 us after the backward ends at 20; optimizer 5.
  EXPECT_EQ(run(in, t).summary.iteration_time, Time::microseconds(45));
  // Two buckets: the first is ready at 15 (half the backward) and takes 10 us; the second,
  // ready at 20, waits for it and runs 25-35; optimizer 35-40.
  in.gradient_buckets = 2;
  const RunRecord r = run(in, t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(40));
  EXPECT_EQ(r.collectives.size(), 2u);
  EXPECT_EQ(r.collectives[0].start, Time::microseconds(15));
  EXPECT_EQ(r.collectives[0].algorithm, "hand-written ring");  // the launcher's name
  EXPECT_EQ(r.collectives[1].end, Time::microseconds(35));
}

TEST(Replay, RecordDescribesThePlacementAndTheStages) {
  // Two replicas of a two-stage pipeline on a chain of 4: replica r, stage g on device 2r + g.
  const auto t = chain(4, Time::microseconds(1));
  ReplayInput in;
  in.stages = {stage(Time::microseconds(1), Time::microseconds(2)),
               stage(Time::microseconds(1), Time::microseconds(2))};
  in.stages[0].last_layer = 3;
  in.stages[1].first_layer = 3;
  in.stages[1].last_layer = 5;
  in.stages[0].activation_out = Bytes(100);
  in.stages[1].gradient_out = Bytes(100);
  in.devices = {{{0}, {1}}, {{2}, {3}}};
  in.microbatches = {1, 1};
  const RunRecord r = run(in, t);
  EXPECT_TRUE(r.topology.nodes.empty());  // the caller's (replay_plan fills it)
  // By stage, then replica.
  ASSERT_EQ(r.placement.size(), 4u);
  EXPECT_EQ(r.placement[1].stage, 0);
  EXPECT_EQ(r.placement[1].replica, 1);
  EXPECT_EQ(r.placement[1].devices, std::vector<std::uint32_t>{2});
  EXPECT_EQ(r.placement[2].devices, std::vector<std::uint32_t>{1});
  ASSERT_EQ(r.stages.size(), 2u);
  EXPECT_EQ(r.stages[1].device_group, 1);
  EXPECT_EQ(r.stages[1].first_layer, 3);
  EXPECT_EQ(r.stages[1].last_layer, 5);
  EXPECT_EQ(r.stages[0].activation_out, Bytes(100));
  EXPECT_EQ(r.stages[1].gradient_out, Bytes(100));
}

TEST(Replay, UnevenMicrobatchesPerReplica) {
  const auto t = chain(2, Time::zero());
  ReplayInput in;
  in.stages = {stage(Time::microseconds(1), Time::microseconds(2))};
  in.devices = {{{0}}, {{1}}};
  in.microbatches = {3, 2};  // M = 5 over d = 2
  EXPECT_EQ(run(in, t).summary.iteration_time, Time::microseconds(9));
}

// `in` on `t` is refused with the input error `message`.
void expect_refused(const ReplayInput& in, const topo::Topology& t, const char* message) {
  try {
    (void)run(in, t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_STREQ(e.what(), message);
  }
}

TEST(Replay, DeviceOutsideTheTopologyIsAnInputError) {
  ReplayInput in = pipeline(2, 1, Time::microseconds(1), Time::microseconds(1));
  in.devices[0][1] = {7};
  expect_refused(in, chain(2, Time::zero()),
                 "devices: device 7 is outside the topology (expected a device id below 2)");
}

// A device in two stage replicas would run both planes' tasks at once: refused, naming both,
// within a replica and across two.
TEST(Replay, DeviceInTwoStageReplicasIsAnInputError) {
  const auto t = chain(2, Time::zero());
  ReplayInput in = pipeline(2, 1, Time::microseconds(1), Time::microseconds(1));
  in.devices[0][1] = {0};
  expect_refused(in, t,
                 "devices: device 0 is in stage 0 of replica 0 and in stage 1 of replica 0 "
                 "(expected each device in one stage replica)");
  ReplayInput two;
  two.stages = {stage(Time::microseconds(1), Time::microseconds(2))};
  two.devices = {{{1}}, {{1}}};
  two.microbatches = {1, 1};
  expect_refused(two, t,
                 "devices: device 1 is in stage 0 of replica 0 and in stage 0 of replica 1 "
                 "(expected each device in one stage replica)");
}

// `x` and `y` hold the same rows, row for row, but for their device.
void expect_same_rows_but_device(const std::vector<TimelineRow>& x,
                                 const std::vector<TimelineRow>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].stream, y[i].stream);
    EXPECT_EQ(x[i].kind, y[i].kind);
    EXPECT_EQ(x[i].stage, y[i].stage);
    EXPECT_EQ(x[i].microbatch, y[i].microbatch);
    EXPECT_EQ(x[i].first_layer, y[i].first_layer);
    EXPECT_EQ(x[i].last_layer, y[i].last_layer);
    EXPECT_EQ(x[i].start, y[i].start);
    EXPECT_EQ(x[i].end, y[i].end);
  }
}

// Shards of a stage replica run the same tasks: each device gets its plane's rows, the table
// sorted by device, then by time. Two stages of two shards on a chain of four, the shards
// numbered out of order (stage 0 on devices 3 and 0, stage 1 on 1 and 2), two microbatches:
// devices 0 and 3 have the same rows but for the device, as have 1 and 2; each device's rows
// start in order; stage 0's devices run 2 forward and 2 backward passes and the optimizer step
// and, on the network, send 2 activations (stage 1's, 2 gradients).
TEST(Replay, ShardsOfAStageReplicaShareTheirRows) {
  const auto t = chain(4, Time::microseconds(1));
  ReplayInput in =
      sending(pipeline(2, 2, Time::microseconds(10), Time::microseconds(20)), Bytes(1000));
  in.devices[0] = {{3, 0}, {1, 2}};
  const RunRecord r = run(in, t);
  std::vector<std::vector<TimelineRow>> rows(4);
  for (std::size_t i = 0; i < r.timeline.size(); ++i) {
    if (i > 0) {
      const TimelineRow& a = r.timeline[i - 1];
      const TimelineRow& b = r.timeline[i];
      EXPECT_TRUE(a.device < b.device || (a.device == b.device && a.start <= b.start)) << i;
    }
    rows.at(r.timeline[i].device).push_back(r.timeline[i]);
  }
  expect_same_rows_but_device(rows[0], rows[3]);
  expect_same_rows_but_device(rows[1], rows[2]);
  for (const topo::DeviceId d : {0U, 1U}) {
    int compute = 0;
    int network = 0;
    for (const TimelineRow& row : rows[d]) {
      EXPECT_EQ(row.stage, d == 0 ? 0 : 1);
      (row.stream == Stream::kCompute ? compute : network) += 1;
    }
    EXPECT_EQ(compute, 5) << d;  // and the optimizer step
    EXPECT_EQ(network, 2) << d;
  }
  // Memory: every device's rows start with its four categories at time zero.
  std::vector<int> per_device(4, 0);
  for (std::size_t i = 0; i < r.memory.size(); ++i) {
    if (i > 0) {
      EXPECT_TRUE(
          r.memory[i - 1].device < r.memory[i].device ||
          (r.memory[i - 1].device == r.memory[i].device && r.memory[i - 1].at <= r.memory[i].at));
    }
    ++per_device.at(r.memory[i].device);
  }
  EXPECT_EQ(per_device[0], per_device[3]);
  EXPECT_EQ(per_device[1], per_device[2]);
  EXPECT_GE(per_device[0], 4 + 4);  // four categories, then a change per pass
  ASSERT_EQ(r.peaks.size(), 4U);
  EXPECT_EQ(r.peaks[0].peak, r.peaks[3].peak);
}

// Against a reference: two replicas of a two-stage pipeline without network traffic, once with
// one shard per stage replica (devices 0-3) and once with two numbered out of order (replica
// 0: stage 0 on 3 and 0, stage 1 on 1 and 2; replica 1: 7 and 4, 5 and 6). Each device of the
// second run has, row for row and in the same order, the rows of its stage replica's device in
// the first (compute alone decides them), timeline and memory.
TEST(Replay, EveryShardHasItsStageReplicasRowsInOrder) {
  ReplayInput one = pipeline(2, 3, Time::microseconds(10), Time::microseconds(20));
  one.stages[0].stash = Bytes(100);
  one.stages[1].stash = Bytes(300);
  one.devices = {{{0}, {1}}, {{2}, {3}}};
  one.microbatches = {3, 2};
  ReplayInput two = one;
  two.devices = {{{3, 0}, {1, 2}}, {{7, 4}, {5, 6}}};
  const RunRecord a = run(one, chain(4, Time::zero()));
  const RunRecord b = run(two, chain(8, Time::zero()));
  // The reference device of each device of the second run.
  const std::vector<topo::DeviceId> of{0, 1, 1, 0, 2, 3, 3, 2};
  const auto rows_of = [](const auto& table, topo::DeviceId d) {
    std::vector<std::remove_cvref_t<decltype(table[0])>> out;
    for (const auto& row : table) {
      if (row.device == d) out.push_back(row);
    }
    return out;
  };
  ASSERT_EQ(b.timeline.size(), 2 * a.timeline.size());
  ASSERT_EQ(b.memory.size(), 2 * a.memory.size());
  for (topo::DeviceId d = 0; d < 8; ++d) {
    SCOPED_TRACE(d);
    const auto x = rows_of(a.timeline, of[d]);
    ASSERT_FALSE(x.empty());
    expect_same_rows_but_device(x, rows_of(b.timeline, d));
    const auto m = rows_of(a.memory, of[d]);
    const auto n = rows_of(b.memory, d);
    ASSERT_EQ(m.size(), n.size());
    for (std::size_t i = 0; i < m.size(); ++i) {
      EXPECT_EQ(m[i].at, n[i].at);
      EXPECT_EQ(m[i].bytes, n[i].bytes);
      EXPECT_EQ(m[i].category, n[i].category);
    }
    EXPECT_EQ(b.peaks.at(d).peak, a.peaks.at(of[d]).peak);
  }
  // Sorted by device: each device's rows in one run.
  for (std::size_t i = 1; i < b.timeline.size(); ++i) {
    EXPECT_LE(b.timeline[i - 1].device, b.timeline[i].device);
  }
}

TEST(Replay, SameInputSameRecord) {
  const auto t = chain(2, Time::microseconds(1));
  ReplayInput in = pipeline(2, 4, Time::microseconds(10), Time::microseconds(20));
  in.stages[0].activation_out = Bytes(12345);
  in.stages[1].gradient_out = Bytes(54321);
  const RunRecord a = run(in, t);
  const RunRecord b = run(in, t);
  ASSERT_EQ(a.timeline.size(), b.timeline.size());
  for (std::size_t i = 0; i < a.timeline.size(); ++i) {
    EXPECT_EQ(a.timeline[i].start, b.timeline[i].start);
    EXPECT_EQ(a.timeline[i].end, b.timeline[i].end);
  }
}

}  // namespace
}  // namespace nest::replay

namespace nest::replay {
namespace {

// S device groups with v chunks each, all chunks alike; stage c runs on group c mod S.
ReplayInput interleaved(int groups, int v, int microbatches, Time f, Time b) {
  ReplayInput in;
  in.schedule = Schedule::kInterleaved;
  in.devices.resize(1);
  for (int g = 0; g < groups; ++g) in.devices[0].push_back({static_cast<topo::DeviceId>(g)});
  for (int c = 0; c < groups * v; ++c) {
    StageSpec s;
    s.forward = f;
    s.backward = b;
    s.first_layer = c;
    s.last_layer = c + 1;
    s.stash = Bytes(10);
    in.stages.push_back(s);
  }
  in.microbatches = {microbatches};
  return in;
}

TEST(Replay, InterleavedBubbleShrinksByTheVirtualStages) {
  // Narayanan et al. 2021, §2.2.1: with v chunks per device the pipeline bubble is
  // (S - 1) x (chunk forward + backward) instead of (S - 1) x (stage forward + backward):
  // uniform chunks on a free network take (m·v + S - 1) chunk times.
  const auto t = chain(4, Time::zero());
  const RunRecord r = run(interleaved(4, 2, 8, Time::microseconds(1), Time::microseconds(2)), t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds((8 * 2 + 4 - 1) * 3));
  // The same work without interleaving: (m + S - 1) stage times of 2 + 4 us.
  const RunRecord plain = run(pipeline(4, 8, Time::microseconds(2), Time::microseconds(4)), t);
  EXPECT_EQ(plain.summary.iteration_time, Time::microseconds((8 + 4 - 1) * 6));
  // Every chunk ran every microbatch forward and backward.
  int forwards = 0;
  for (const auto& row : r.timeline) forwards += row.kind == TaskKind::kForward ? 1 : 0;
  EXPECT_EQ(forwards, 8 * 8);
}

// The case of `PipelineMakespan.InterleavedTwoStagesByHand` replayed (two stages of two chunks,
// 2 microbatches, forward 1 us, backward 2 us, 200 kB = 2 us each way): the cost model's 27.
TEST(Replay, InterleavedSendsRunAsTheCostModelSchedulesThem) {
  const auto t = chain(2, Time::zero());
  const RunRecord r = run(
      sending(interleaved(2, 2, 2, Time::microseconds(1), Time::microseconds(2)), Bytes(200'000)),
      t);
  EXPECT_EQ(r.summary.iteration_time, Time::microseconds(27));
}

// Three stages, stage 0 forward 1 us, 500 kB (5 us) activations: its three warm-up forwards end
// at 1, 2 and 3 us; the activations leave in that order, each when the one before has arrived:
// [1, 6], [6, 11], [11, 16] (two of them waiting at once).
TEST(Replay, QueuedSendsLeaveInTheOrderTheyWereMade) {
  const auto t = chain(3, Time::zero());
  const RunRecord r =
      run(sending(pipeline(3, 4, Time::microseconds(1), Time::microseconds(1)), Bytes(500'000)), t);
  std::vector<std::pair<std::int64_t, Time>> stage0;
  for (const auto& row : r.timeline) {
    if (row.kind == TaskKind::kSendActivation && row.device == 0 && row.microbatch < 3) {
      stage0.emplace_back(row.microbatch, row.start);
    }
  }
  std::sort(stage0.begin(), stage0.end());
  const std::vector<std::pair<std::int64_t, Time>> expected = {
      {0, Time::microseconds(1)}, {1, Time::microseconds(6)}, {2, Time::microseconds(11)}};
  EXPECT_EQ(stage0, expected);
}

// Every device linked to every other at 100 GB/s (`latency` per link).
topo::Topology mesh(int n, Time latency) {
  topo::Topology t("mesh", topo::Family::kExplicit);
  for (int i = 0; i < n; ++i) t.add_device("d" + std::to_string(i));
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      t.add_link(static_cast<topo::NodeId>(i), static_cast<topo::NodeId>(j), kRate, latency);
    }
  }
  return t;
}

// The replay against the cost model's schedule (`placer::detail::pipeline_makespan`, tested by
// hand in tests/unit/placer/boundary_transfer_test.cc) on 600 random pipelines: 2-5 stages on a
// full mesh (a stage's sends to the next and to the previous stage share no link; with two stages
// they go to one peer, one queue in both), 1F1B and interleaved with 2-3 chunks per stage, random
// pass times and sizes (0-5 us each way), without latency, with a link latency, and with a
// launch latency. The same makespan to the picosecond (with sends started at once the replay
// differed on about two thirds of them).
TEST(Replay, SendsAsTheCostModelSchedulesThem) {
  std::uint64_t state = 7;
  const auto next = [&state](std::uint64_t n) {  // splitmix64: the same draws everywhere
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
    return static_cast<int>((z ^ (z >> 31U)) % n);
  };
  for (int trial = 0; trial < 600; ++trial) {
    const int stages = 2 + next(4);
    const int v = 1 + next(3);
    const int m = v > 1 ? stages * (1 + next(3)) : 1 + next(8);
    const int mode = next(3);  // 0: no latency, 1: 1 us per link, 2: 0.7 us to launch a send
    const Time link = mode == 1 ? Time::microseconds(1) : Time::zero();
    const Time launch = mode == 2 ? Time::nanoseconds(700) : Time::zero();
    ReplayInput in = interleaved(stages, v, m, Time::zero(), Time::zero());
    in.schedule = v > 1 ? Schedule::kInterleaved : Schedule::kOneFOneB;
    const auto chunks = static_cast<std::size_t>(stages * v);
    std::vector<Time> f(chunks);
    std::vector<Time> b(chunks);
    std::vector<Time> send(chunks);
    for (std::size_t c = 0; c < chunks; ++c) {
      StageSpec& s = in.stages[c];
      s.forward = f[c] = Time::microseconds(1 + next(5));
      s.backward = b[c] = Time::microseconds(1 + next(8));
      s.activation_out = Bytes(100'000 * next(6));  // 10 ps per byte: 0-5 us
      if (c > 0) s.gradient_out = in.stages[c - 1].activation_out;
      send[c] = s.activation_out == Bytes(0)
                    ? Time::zero()
                    : Time::picoseconds(s.activation_out.count() * 10) + link + launch;
    }
    const auto t = mesh(stages, link);
    net::Simulator sim(t);
    topo::Router router(t);
    ReplayOptions options;
    if (mode == 2) options.transfer_latency = [launch](Bytes) { return launch; };
    const RunRecord r = replay(in, sim, two_rank_ring(sim, router), options);
    EXPECT_EQ(r.summary.iteration_time, placer::detail::pipeline_makespan(f, b, send, stages, m))
        << "trial " << trial << ": " << stages << " stages, v " << v << ", " << m
        << " microbatches, mode " << mode;
  }
}

TEST(Replay, InterleavedNeedsWholeGroupsOfMicrobatches) {
  const auto t = chain(4, Time::zero());
  try {
    (void)run(interleaved(4, 2, 6, Time::microseconds(1), Time::microseconds(2)), t);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "microbatches: the interleaved schedule runs microbatches in groups of the 4 "
                 "stages (got \"6\"; expected a multiple of 4 per replica)");
  }
}

}  // namespace
}  // namespace nest::replay
