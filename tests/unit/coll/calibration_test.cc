// Calibrated collectives (nest/coll/calibration.h): hand-computed base latency + efficiency
// cases, the protocol switch points, NVLink SHARP, the link classes, rail rings that never leave
// their rail, the new nccl-tests operations by hand, and the tuner's choices on the bundled DGX.

#include "nest/coll/calibration.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <vector>

#include "coll/fastest.h"
#include "coll_test_util.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"

namespace nest::coll {
namespace {

using testing::iota_group;
using testing::star;
using Groups = std::vector<std::vector<topo::DeviceId>>;
using topo::LinkClass;
using topo::Protocol;

// Simple only: 10 us per collective, scale-up links at 80% of line rate and 2 us each.
topo::CollectiveModel simple_model() {
  topo::CollectiveModel m;
  m.name = "test";
  auto& p = m.protocols[static_cast<std::size_t>(Protocol::kSimple)];
  p.enabled = true;
  p.base_latency = Time::microseconds(10);
  p.links[static_cast<std::size_t>(LinkClass::kScaleUp)] =
      topo::LinkCalibration{0.8, Time::microseconds(2)};
  return m;
}

topo::Topology with_model(topo::Topology t, topo::CollectiveModel m) {
  t.set_collective_model(std::make_shared<const topo::CollectiveModel>(std::move(m)));
  return t;
}

Time makespan(const topo::Topology& t, const CollectiveSpec& spec, const Groups& groups,
              bool ideal = false) {
  return simulate(t, spec, groups, {.ideal = ideal}).makespan;
}

// 8 ranks, 8 MB: 14 steps of (two 2 us links + 1 MB at 80 GB/s = 12.5 us) + 10 us = 241 us; the
// ideal network: 14 x (1 us + 10 us) = 154 us.
TEST(Calibration, RingAllreduceIsBaseLatencyPlusTheClosedFormAtCalibratedRates) {
  const topo::Topology t = with_model(star(8), simple_model());
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(8'000'000)};
  const Groups g{iota_group(8)};
  const SimulationResult r = simulate(t, spec, g);
  EXPECT_TRUE(r.calibrated);
  EXPECT_EQ(r.protocol, Protocol::kSimple);
  EXPECT_EQ(r.base_latency, Time::microseconds(10));
  EXPECT_EQ(r.makespan, Time::microseconds(241));
  const CalibratedNetwork network(t);
  const ClosedForm cf = closed_form(network, spec, g.front());
  EXPECT_DOUBLE_EQ(cf.base_latency_seconds, 10e-6);
  EXPECT_NEAR(cf.seconds, 241e-6, 1e-15);
  EXPECT_EQ(makespan(t, spec, g, true), Time::microseconds(154));
  // The calibrated copy: same links, 80 GB/s and 2 us on every (scale-up) link.
  const topo::Topology& copy = network.topology(Protocol::kSimple);
  ASSERT_EQ(copy.num_links(), t.num_links());
  EXPECT_DOUBLE_EQ(copy.link(3).bandwidth.bytes_per_s(), 80e9);
  EXPECT_EQ(copy.link(3).latency, Time::microseconds(2));
  // A one-device group runs nothing and pays no base latency.
  EXPECT_EQ(makespan(t, spec, Groups{{3}}), Time::zero());
}

// LL up to 64 KiB at half the line rate, 0.25 us per link, 3 us base (5 us for allreduce).
TEST(Calibration, SwitchPointsPickTheProtocolAndItsLatencies) {
  topo::CollectiveModel m = simple_model();
  auto& ll = m.protocols[static_cast<std::size_t>(Protocol::kLL)];
  ll.enabled = true;
  ll.up_to = Bytes::kibibytes(64);
  ll.base_latency = Time::microseconds(3);
  ll.operation_latency = {{"allreduce", Time::microseconds(5)}};
  ll.links[0] = topo::LinkCalibration{0.5, Time::nanoseconds(250)};
  const topo::Topology t = with_model(star(8), m);
  const Groups g{iota_group(8)};
  // 64 KiB: 14 x (0.5 us + 8 KiB at 50 GB/s = 163.84 ns) + 5 us.
  const CollectiveSpec allreduce{Operation::kAllReduce, Algorithm::kRing, Bytes::kibibytes(64)};
  const SimulationResult r = simulate(t, allreduce, g);
  EXPECT_EQ(r.protocol, Protocol::kLL);
  EXPECT_EQ(r.makespan, Time::picoseconds(14 * (500'000 + 163'840) + 5'000'000));
  // All-gather of 64 KiB: 7 steps at LL with the default 3 us.
  const CollectiveSpec gather{Operation::kAllGather, Algorithm::kRing, Bytes::kibibytes(64)};
  EXPECT_EQ(makespan(t, gather, g), Time::picoseconds(7 * (500'000 + 163'840) + 3'000'000));
  // One byte more is Simple: 14 x (4 us + 8193 B at 80 GB/s, rounded up) + 10 us.
  const CollectiveSpec big{Operation::kAllReduce, Algorithm::kRing,
                           Bytes::kibibytes(64) + Bytes(1)};
  const SimulationResult s = simulate(t, big, g);
  EXPECT_EQ(s.protocol, Protocol::kSimple);
  EXPECT_GT(s.makespan, Time::picoseconds(14 * 4'102'400 + 10'000'000 - 14));
  EXPECT_LE(s.makespan, Time::picoseconds(14 * 4'102'413 + 10'000'000));
}

// NVLS: each rank's switch port carries S + S/n at the Simple rate x the NVLS efficiency.
// 8 MB over 8 ranks: 9 MB at 100 x 0.8 x 0.5 = 40 GB/s = 225 us, + 4 us route + 20 us base.
TEST(Calibration, NvlsIsItsSwitchPortLoadsAtTheNvlsRate) {
  topo::CollectiveModel m = simple_model();
  m.nvls = topo::NvlsModel{0.5, Time::microseconds(20)};
  topo::Topology t = with_model(star(8), m);
  t.set_nvlink_sharp(true);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kNvls, Bytes(8'000'000)};
  EXPECT_EQ(makespan(t, spec, Groups{iota_group(8)}), Time::microseconds(249));
  // Ideal: 1 us + 9 MB at 100 GB/s.
  EXPECT_EQ(makespan(t, spec, Groups{iota_group(8)}, true), Time::microseconds(91));
  const CalibratedNetwork network(t);
  EXPECT_NEAR(closed_form(network, spec, iota_group(8)).seconds, 249e-6, 1e-15);
  // Without in-switch reduction, nvls is refused.
  topo::Topology plain = star(8);
  EXPECT_THROW((void)makespan(plain, spec, Groups{iota_group(8)}), Error);
}

// The nccl-tests operations NEST lacked, by hand on the ideal star (1 us per route, 10 ps per
// byte), 8 ranks, S = 8 MB.
TEST(Calibration, ReduceGatherScatterSendrecvMatchTheirFormulas) {
  const topo::Topology t = star(8);
  const Groups g{iota_group(8)};
  const auto us = [](double x) { return Time::seconds(x * 1e-6); };
  const Bytes s(8'000'000);
  // Ring reduce in 4 pieces: (n + c - 2) steps of (1 us + 2 MB x 10 ps).
  EXPECT_EQ(makespan(t, {Operation::kReduce, Algorithm::kRing, s, 4}, g), us(10 * 21));
  // Direct reduce: the root's port takes 7 buffers.
  EXPECT_EQ(makespan(t, {Operation::kReduce, Algorithm::kDirect, s}, g), us(1 + 7 * 80));
  // Gather and scatter: 7/8 of the buffer through the root's port.
  EXPECT_EQ(makespan(t, {Operation::kGather, Algorithm::kDirect, s}, g), us(71));
  EXPECT_EQ(makespan(t, {Operation::kScatter, Algorithm::kDirect, s}, g), us(71));
  // Sendrecv: every rank sends its buffer to the next at once.
  EXPECT_EQ(makespan(t, {Operation::kSendRecv, Algorithm::kDirect, s}, g), us(81));
}

TEST(Calibration, LinkClassesOfARailCluster) {
  const topo::Topology t = topo::build_rail_optimized({.nodes = 2,
                                                       .gpus_per_node = 4,
                                                       .nodes_per_leaf = 2,
                                                       .spines = 2,
                                                       .nvlink_bandwidth = testing::kRate,
                                                       .nvlink_latency = Time::nanoseconds(500),
                                                       .nic_bandwidth = testing::kRate,
                                                       .nic_latency = Time::microseconds(1),
                                                       .spine_bandwidth = testing::kRate,
                                                       .spine_latency = Time::microseconds(1)});
  int counts[3] = {0, 0, 0};
  for (const LinkClass c : link_classes(t)) ++counts[static_cast<int>(c)];
  EXPECT_EQ(counts[0], 16);  // 8 GPUs to their NVSwitch, both ways
  EXPECT_EQ(counts[1], 16);  // 8 GPUs to their rail's leaf
  EXPECT_EQ(counts[2], 16);  // 4 leaves to 2 spines
}

topo::Topology rail(int nodes, int gpus, int spines) {
  return topo::build_rail_optimized({.nodes = nodes,
                                     .gpus_per_node = gpus,
                                     .nodes_per_leaf = nodes,
                                     .spines = spines,
                                     .nvlink_bandwidth = Bandwidth::gigabytes_per_second(400),
                                     .nvlink_latency = Time::nanoseconds(500),
                                     .nic_bandwidth = Bandwidth::gigabytes_per_second(50),
                                     .nic_latency = Time::microseconds(1),
                                     .spine_bandwidth = Bandwidth::gigabytes_per_second(50),
                                     .spine_latency = Time::microseconds(1)});
}

// GPU i of each node on rail i: every hop between nodes joins the same local GPU, and with as
// many channels as rails every node's channels leave it on distinct rails.
TEST(Calibration, RailRingsNeverLeaveTheirRail) {
  for (const int k : {2, 3, 4, 8}) {
    for (int nodes = 1; nodes <= 7; ++nodes) {
      const int n = nodes * k;
      const auto orders = ring_orders(n, k, k);
      ASSERT_EQ(orders.size(), static_cast<std::size_t>(k));
      std::vector<std::set<int>> exits(static_cast<std::size_t>(nodes));
      for (const auto& order : orders) {
        // Each channel visits every rank once.
        EXPECT_EQ(std::set<std::uint32_t>(order.begin(), order.end()).size(),
                  static_cast<std::size_t>(n));
        for (int p = 0; p < n; ++p) {
          const auto a = static_cast<int>(order[static_cast<std::size_t>(p)]);
          const auto b = static_cast<int>(order[static_cast<std::size_t>((p + 1) % n)]);
          if (a / k == b / k) continue;
          exits[static_cast<std::size_t>(a / k)].insert(a % k);
          // k = 2 with an odd count of nodes cannot close the ring on one rail pair.
          if (k == 2 && nodes % 2 == 1) continue;
          EXPECT_EQ(a % k, b % k) << "k=" << k << " nodes=" << nodes << " hop " << a << "->" << b;
        }
      }
      if (nodes > 1) {
        for (const auto& e : exits) EXPECT_EQ(e.size(), static_cast<std::size_t>(k));
      }
    }
  }
  // Simulated: 4 rail rings on 4 nodes of 4 GPUs put no byte on a spine; one ring in device
  // order crosses rails at every node boundary (GPU 3 to GPU 4) and does.
  const topo::Topology t = rail(4, 4, 2);
  const auto spine_bytes = [&](const SimulationResult& r) {
    double bytes = 0;
    for (const LinkUse& u : r.busiest) {
      if (t.node(t.link(u.link).src).tier == 3 || t.node(t.link(u.link).dst).tier == 3) {
        bytes += u.bytes;
      }
    }
    return bytes;
  };
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1 << 24)};
  spec.channels = 4;
  const SimulationResult railed =
      testing::simulate_both(t, resolve(spec, t, iota_group(16)), Groups{iota_group(16)});
  EXPECT_EQ(spine_bytes(railed), 0.0);
  spec.channels = 1;
  const SimulationResult flat = simulate(t, spec, Groups{iota_group(16)}, {.busiest_links = 1000});
  EXPECT_GT(spine_bytes(flat), 0.0);
  // The rail rings use all 4 NICs of a node: 4x the flat ring's inter-node rate, so much faster
  // on 16 MiB.
  EXPECT_LT(railed.makespan.ps() * 2, flat.makespan.ps());
}

// The closed form of a multi-channel ring sums, per step, the bytes every channel puts on a
// port: on the rail cluster it equals the simulation within a picosecond per step.
TEST(Calibration, RailRingsMatchTheirClosedForm) {
  const topo::Topology t = rail(4, 4, 2);
  for (const Operation op : {Operation::kAllReduce, Operation::kAllGather}) {
    CollectiveSpec spec{op, Algorithm::kRing, Bytes(48'000'000)};
    spec.channels = 4;
    const CollectiveSpec r = resolve(spec, t, iota_group(16));
    EXPECT_EQ(r.ranks_per_node, 4);
    const SimulationResult sim = simulate(t, r, Groups{iota_group(16)});
    const ClosedForm cf = closed_form(CalibratedNetwork(t), r, iota_group(16));
    EXPECT_NEAR(static_cast<double>(sim.makespan.ps()), cf.seconds * 1e12, cf.steps + 1.0);
  }
}

// Under a model a ring forwards each piece as it arrives: its latency is paid along the ring,
// not by every step at its slowest hop. Two nodes of 4 GPUs, one rail ring (entering node 0 at
// GPU 0 and leaving at GPU 1, node 1 the other way round): 6 NVLink hops of 2 us and 2 NIC hops
// of 10 us. The 14 steps of an 8-byte allreduce reach their last rank after the worst run of 14
// consecutive hops: one lap (32 us) and 6 more holding both NIC hops (28 us) = 60 us; the
// bulk-synchronous closed form pays 14 x 10 us.
TEST(Calibration, RingsForwardOnArrivalUnderAModel) {
  topo::CollectiveModel m;
  m.channels = 1;
  auto& simple = m.protocols[static_cast<std::size_t>(Protocol::kSimple)];
  simple.enabled = true;
  simple.links[static_cast<std::size_t>(LinkClass::kScaleUp)] =
      topo::LinkCalibration{1, Time::microseconds(1)};
  simple.links[static_cast<std::size_t>(LinkClass::kNic)] =
      topo::LinkCalibration{1, Time::microseconds(5)};
  const topo::Topology t = with_model(rail(2, 4, 1), m);
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(8)};
  spec.channels = 0;  // the model's one channel, along the rails
  const CollectiveSpec r = resolve(spec, CalibratedNetwork(t), iota_group(8));
  EXPECT_TRUE(r.forward_on_arrival);
  EXPECT_EQ(r.channels, 1);
  EXPECT_EQ(r.ranks_per_node, 4);
  const SimulationResult sim = testing::simulate_both(t, spec, Groups{iota_group(8)});
  // One-byte pieces drain in picoseconds.
  EXPECT_NEAR(static_cast<double>(sim.makespan.ps()), 60e6, 1000);
  const ClosedForm cf = closed_form(CalibratedNetwork(t), spec, iota_group(8));
  EXPECT_NEAR(cf.seconds, 140e-6, 1e-9);
  // The ideal network keeps the step-by-step rule and the group order.
  EXPECT_FALSE(resolve(spec, t, iota_group(8)).forward_on_arrival);
  EXPECT_EQ(resolve(spec, t, iota_group(8)).ranks_per_node, 0);
}

TEST(Calibration, ResolveChoosesChannelsAndPiecesUnderAModel) {
  topo::CollectiveModel m = simple_model();
  m.channels = 8;
  const topo::Topology t = with_model(rail(4, 4, 2), m);
  const CalibratedNetwork calibrated(t);
  const CalibratedNetwork ideal(t, true);
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(256), 0};
  spec.channels = 0;
  // Rail by rail over 4 nodes: min(8 channels, 4 GPUs per node).
  EXPECT_EQ(resolve(spec, calibrated, iota_group(16)).channels, 4);
  EXPECT_EQ(resolve(spec, calibrated, iota_group(16)).ranks_per_node, 4);
  EXPECT_EQ(resolve(spec, ideal, iota_group(16)).channels, 1);
  // One node: nothing to spread over NICs. Not rail by rail: one ring.
  EXPECT_EQ(resolve(spec, calibrated, iota_group(4)).channels, 1);
  const std::vector<topo::DeviceId> shuffled = {0, 1, 2, 3, 5, 4, 6, 7};
  EXPECT_EQ(resolve(spec, calibrated, shuffled).channels, 1);
  EXPECT_EQ(rail_block(t, shuffled), 0);
  EXPECT_EQ(rail_block(t, std::vector<topo::DeviceId>{1, 2, 5, 6, 9, 10}), 2);
  // A pipelined tree: 128 MiB per tree in 512 KiB pieces, at most 16; 1 MiB: one piece.
  spec.algorithm = Algorithm::kTree;
  EXPECT_EQ(resolve(spec, calibrated, iota_group(16)).chunks, 16);
  EXPECT_EQ(resolve(spec, ideal, iota_group(16)).chunks, 1);
  spec.size = Bytes::mebibytes(1);
  EXPECT_EQ(resolve(spec, calibrated, iota_group(16)).chunks, 1);
  spec.op = Operation::kBroadcast;
  spec.algorithm = Algorithm::kRing;
  EXPECT_EQ(resolve(spec, calibrated, iota_group(16)).chunks, 2);
}

// The tuner on the bundled DGX H100 picks what NCCL runs there: LL rings for small messages,
// LL128 rings in between, NVLink SHARP for large ones; across nodes, rail rings.
TEST(Calibration, TunerPicksNcclsAlgorithmsOnTheBundledDgx) {
  const std::string dir = std::string(NEST_SOURCE_DIR) + "/topologies/";
  const topo::Topology dgx = topo::load_topology(dir + "dgx_h100.yaml");
  const CalibratedNetwork network(dgx);
  const Groups node{iota_group(8)};
  // Chunks and channels 0: as resolve chooses them under the model.
  const auto automatic = [](Bytes size) {
    CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, size, 0};
    spec.channels = 0;
    return spec;
  };
  const auto pick = [&](const CalibratedNetwork& net, const Groups& g, Bytes size) {
    const TunedRun r = simulate_fastest(net, automatic(size), g);
    return std::make_pair(r.spec.algorithm, r.result.protocol);
  };
  EXPECT_EQ(pick(network, node, Bytes::kibibytes(64)),
            std::make_pair(Algorithm::kRing, Protocol::kLL));
  EXPECT_EQ(pick(network, node, Bytes::mebibytes(4)),
            std::make_pair(Algorithm::kRing, Protocol::kLL128));
  EXPECT_EQ(pick(network, node, Bytes::gibibytes(1)),
            std::make_pair(Algorithm::kNvls, Protocol::kSimple));
  const topo::Topology cluster = topo::load_topology(dir + "h100_rail_64.yaml");
  const CalibratedNetwork rails(cluster);
  const TunedRun big =
      simulate_fastest(rails, automatic(Bytes::gibibytes(16)), Groups{iota_group(64)});
  EXPECT_EQ(big.spec.algorithm, Algorithm::kRing);
  EXPECT_EQ(big.spec.channels, 8);
  // Bus bandwidth: 8 NICs at 47.5 GB/s, within the latency of 126 steps.
  const double busbw = Bytes::gibibytes(16).as_double() / big.result.makespan.to_seconds() *
                       bus_bandwidth_factor(Operation::kAllReduce, 64);
  EXPECT_NEAR(busbw, 8 * 47.5e9, 0.03 * 8 * 47.5e9);
}

// The tuner simulates its candidates in the order of their event-free bounds and stops a run
// once it cannot win (`simulate_fastest`): its choice and result must be those of simulating every
// candidate to the end in the tuner's order and keeping the first of the fastest. On the bundled
// topologies, every tuned operation, sizes from 64 KiB to 1 GiB (one that does not split evenly),
// one group, a strided one, two concurrent ones and one beside a group of one device (no bounds
// then); with the default options, and with the busiest links, the event simulation only (the
// simulator's stops) and another seed.
TEST(Calibration, TunerChoosesAsEveryCandidateSimulatedInTurn) {
  const std::string dir = std::string(NEST_SOURCE_DIR) + "/topologies/";
  int cases = 0;
  int close = 0;  // cases whose two fastest candidates are within 1% (the order matters there)
  const std::vector<SimulationOptions> settings{
      SimulationOptions{}, SimulationOptions{.seed = 3, .busiest_links = 8, .events_only = true}};
  for (const char* file : {"dgx_h100.yaml", "h100_rail_64.yaml", "fat_tree_k16.yaml",
                           "tpuv4_torus_8x8x16.yaml", "nest_h100_spineleaf.yaml"}) {
    const topo::Topology t = topo::load_topology(dir + file);
    const CalibratedNetwork network(t);
    const auto devices = static_cast<topo::DeviceId>(t.num_devices());
    std::vector<Groups> layouts{Groups{iota_group(8)}};
    if (devices >= 10) layouts.push_back(Groups{iota_group(8), {9}});
    if (devices >= 64) {
      layouts.push_back(Groups{iota_group(64)});
      layouts.push_back(Groups{testing::strided_devices(16, 4)});
      layouts.push_back(Groups{iota_group(16), iota_group(16, 32)});
    }
    for (const Operation op : {Operation::kAllReduce, Operation::kAllGather,
                               Operation::kReduceScatter, Operation::kBroadcast}) {
      for (const Bytes size : {Bytes::kibibytes(64), Bytes::mebibytes(4), Bytes::mebibytes(256),
                               Bytes(Bytes::gibibytes(1).count() + 1)}) {
        for (const Groups& groups : layouts) {
          for (const SimulationOptions& options : settings) {
            if (options.events_only && size > Bytes::mebibytes(4)) continue;  // the tests' time
            SCOPED_TRACE(std::string(file) + " " + std::string(operation_name(op)) + " " +
                         std::to_string(size.count()) + " bytes, " + std::to_string(groups.size()) +
                         " group(s) of " + std::to_string(groups.front().size()) +
                         (options.events_only ? ", events only" : ""));
            CollectiveSpec spec{op, Algorithm::kRing, size, 0};
            spec.channels = 0;
            // Every candidate in turn, to the end (the tuner's rule before its bounds).
            std::optional<SimulationResult> best;
            CollectiveSpec chosen = spec;
            std::vector<Time> times;
            for (const Algorithm a : tuner_candidates(network, op, size, groups.front())) {
              CollectiveSpec c = spec;
              c.algorithm = a;
              if (a != Algorithm::kRing) c.channels = std::min(c.channels, 1);
              if (a != Algorithm::kRing && a != Algorithm::kTree && a != Algorithm::kHierarchical &&
                  a != Algorithm::kTorus) {
                c.chunks = 1;
              }
              SimulationResult r = simulate(network, c, groups, options);
              times.push_back(r.makespan);
              if (!best || r.makespan < best->makespan) {
                best = std::move(r);
                chosen = c;
              }
            }
            std::sort(times.begin(), times.end());
            if (times.size() >= 2 && times[1].ps() - times[0].ps() <= times[0].ps() / 100) {
              ++close;
            }
            const TunedRun tuned = simulate_fastest(network, spec, groups, options);
            ASSERT_TRUE(best.has_value());
            EXPECT_EQ(tuned.spec, resolve(chosen, network, groups.front()));
            EXPECT_EQ(tuned.result.makespan, best->makespan);
            EXPECT_EQ(tuned.result.durations, best->durations);
            EXPECT_EQ(tuned.result.events, best->events);
            EXPECT_EQ(tuned.result.flows, best->flows);
            EXPECT_EQ(tuned.result.protocol, best->protocol);
            EXPECT_EQ(tuned.result.base_latency, best->base_latency);
            EXPECT_EQ(tuned.result.calibrated, best->calibrated);
            EXPECT_EQ(tuned.result.contention_free, best->contention_free);
            ASSERT_EQ(tuned.result.busiest.size(), best->busiest.size());
            for (std::size_t i = 0; i < best->busiest.size(); ++i) {
              EXPECT_EQ(tuned.result.busiest[i].link, best->busiest[i].link);
              EXPECT_EQ(tuned.result.busiest[i].bytes, best->busiest[i].bytes);
              EXPECT_EQ(tuned.result.busiest[i].busy, best->busiest[i].busy);
              EXPECT_EQ(tuned.result.busiest[i].peak_flows, best->busiest[i].peak_flows);
            }
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 200);
  EXPECT_GT(close, 5);
}

// `detail::fastest_candidate` against the rule it keeps (the smallest makespan, ties to the
// earliest), on random candidates of a few makespans apart (so that ties are common, also between
// a later candidate whose bound sorts first and an earlier one), bounds anywhere from zero to
// the makespan and bases (the part a run does not simulate) up to it: a run answers only when its
// simulated end, makespan - base, is at most `until`.
TEST(Calibration, FastestCandidateKeepsTheFirstOfTheFastest) {
  std::mt19937_64 rng(7);
  int ties = 0;
  int stopped = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const std::size_t n = 1 + rng() % 5;
    std::vector<Time> makespans;
    std::vector<Time> bounds;
    std::vector<Time> bases;
    for (std::size_t i = 0; i < n; ++i) {
      const auto m = static_cast<std::int64_t>(10 + rng() % 4);
      makespans.push_back(Time::picoseconds(m));
      bounds.push_back(Time::picoseconds(static_cast<std::int64_t>(rng() % (m + 1))));
      bases.push_back(Time::picoseconds(static_cast<std::int64_t>(rng() % (m + 1))));
    }
    std::size_t expected = 0;
    for (std::size_t i = 1; i < n; ++i) {
      if (makespans[i] < makespans[expected]) expected = i;
    }
    for (std::size_t i = 0; i < n; ++i) {
      ties += i != expected && makespans[i] == makespans[expected] ? 1 : 0;
    }
    const std::size_t chosen = detail::fastest_candidate(
        bounds, bases, [&](std::size_t i, Time until) -> std::optional<Time> {
          if (makespans[i] - bases[i] > until) {
            ++stopped;
            return std::nullopt;
          }
          return makespans[i];
        });
    EXPECT_EQ(chosen, expected) << "trial " << trial;
  }
  EXPECT_GT(ties, 1000);
  EXPECT_GT(stopped, 1000);
}

}  // namespace
}  // namespace nest::coll
