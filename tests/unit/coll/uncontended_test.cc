// The contention-free evaluation of `simulate` against the event simulation: the same numbers to
// the picosecond and byte wherever it answers, and it steps aside wherever a flow would start on
// a link before the previous one there has drained.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "coll/uncontended.h"
#include "coll_test_util.h"
#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/core/rng.h"
#include "nest/net/simulator.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

namespace nest::coll {
namespace {

using testing::iota_group;
using testing::kRate;
using testing::simulate_both;
using Groups = std::vector<std::vector<topo::DeviceId>>;

topo::Topology fat_tree(int k, int oversubscription) {
  topo::FatTreeParams p;
  p.k = k;
  p.link_bandwidth = kRate;
  p.link_latency = Time::nanoseconds(100);
  p.edge_oversubscription = oversubscription;
  return topo::build_fat_tree(p);
}

topo::Topology rail(int nodes) {
  topo::RailOptimizedParams p;
  p.nodes = nodes;
  p.gpus_per_node = 4;
  p.nodes_per_leaf = 2;
  p.spines = 1;
  p.nvlink_bandwidth = kRate * 4;
  p.nvlink_latency = Time::nanoseconds(100);
  p.nic_bandwidth = kRate;
  p.nic_latency = Time::nanoseconds(500);
  p.spine_bandwidth = kRate;
  p.spine_latency = Time::nanoseconds(500);
  return topo::build_rail_optimized(p);
}

topo::Topology torus(std::vector<int> dims) {
  topo::TorusParams p;
  p.dims = std::move(dims);
  p.link_bandwidth = kRate;
  p.link_latency = Time::nanoseconds(200);
  return topo::build_torus(p);
}

// `count` groups of `n` ranks strided across `devices`: rank r of group g on device
// r * (devices / n) + g.
Groups strided_groups(int count, int n, int devices) {
  const int stride = devices / n;
  Groups groups;
  for (int g = 0; g < count; ++g) {
    std::vector<topo::DeviceId> group;
    for (int r = 0; r < n; ++r) group.push_back(static_cast<topo::DeviceId>(r * stride + g));
    groups.push_back(group);
  }
  return groups;
}

// Every operation and algorithm, several group sizes, chunk counts and sizes (including sizes
// smaller than the group, which make zero-byte transfers, and odd sizes that round), one group
// and two concurrent ones, on switched, direct, oversubscribed and multi-tier topologies.
TEST(Uncontended, EqualsTheEventSimulationOnEveryAlgorithmAndTopology) {
  struct Case {
    std::string name;
    topo::Topology topology;
  };
  std::vector<Case> cases;
  cases.push_back({"star16", testing::star(16)});
  cases.back().topology.set_nvlink_sharp(true);
  cases.push_back({"ring8", testing::ring(8)});
  cases.push_back({"fat-tree k=4", fat_tree(4, 1)});
  cases.push_back({"fat-tree k=4 2:1", fat_tree(4, 2)});
  cases.push_back({"rail 4x4", rail(4)});
  cases.push_back({"torus 4x2", torus({4, 2})});
  int contention_free = 0;
  int contended = 0;
  for (const Case& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (Operation op :
         {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
          Operation::kAllToAll, Operation::kBroadcast, Operation::kSend, Operation::kReduce,
          Operation::kGather, Operation::kScatter, Operation::kSendRecv}) {
      for (Algorithm a : algorithms_for(op)) {
        if (a == Algorithm::kNvls && !c.topology.nvlink_sharp()) continue;
        for (int n : {2, 3, 4, 8}) {
          for (int chunks : {1, 2}) {
            for (std::int64_t size : {std::int64_t{5}, std::int64_t{1000003}}) {
              CollectiveSpec spec{op, a, Bytes(size), chunks};
              if (a == Algorithm::kHierarchical || a == Algorithm::kTorus) {
                if (n % 2 != 0) continue;
                spec.levels = {2, n / 2};
              }
              try {
                validate(spec, n);
              } catch (const Error&) {
                continue;
              }
              for (const Groups& groups :
                   {Groups{iota_group(n)}, Groups{iota_group(n), iota_group(n, n)}}) {
                if (static_cast<int>(groups.size()) * n > devices) continue;
                SCOPED_TRACE(c.name + " " + std::string(operation_name(op)) + " " +
                             std::string(algorithm_name(a)) + " n=" + std::to_string(n) +
                             " chunks=" + std::to_string(chunks) + " size=" + std::to_string(size) +
                             " groups=" + std::to_string(groups.size()));
                const SimulationResult r = simulate_both(c.topology, spec, groups, 7);
                ++(r.contention_free ? contention_free : contended);
              }
            }
          }
        }
      }
    }
  }
  // Both ways were exercised, many times.
  EXPECT_GT(contention_free, 300);
  EXPECT_GT(contended, 300);
}

// Each rank's sends go to its successor over routes no other pair uses, one after another, so a
// ring on a 1:1 fat-tree never shares a link; on a 2:1 fat-tree neither (one flow per uplink).
// Flows: 2n(n-1); events: two per flow.
TEST(Uncontended, RingAllReduceOnAFatTreeIsEvaluatedWithoutEvents) {
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1 << 24)};
  for (int oversubscription : {1, 2}) {
    const topo::Topology t = fat_tree(8, oversubscription);
    const SimulationResult r = simulate_both(t, spec, Groups{iota_group(128)});
    EXPECT_TRUE(r.contention_free);
    EXPECT_EQ(r.flows, 2U * 128 * 127);
    EXPECT_EQ(r.events, 2 * r.flows);
    for (const LinkUse& use : r.busiest) EXPECT_EQ(use.peak_flows, 1U);
  }
}

// A direct all-to-all starts every flow of a rank at once over the rank's one cable: contended
// from the first step, so the event simulation answers (7 flows share each cable).
TEST(Uncontended, DirectAllToAllOnASwitchFallsBackToTheEventSimulation) {
  const topo::Topology t = testing::star(8);
  const CollectiveSpec spec{Operation::kAllToAll, Algorithm::kDirect, Bytes(8 * 1000)};
  const SimulationResult r = simulate_both(t, spec, Groups{iota_group(8)});
  EXPECT_FALSE(r.contention_free);
  EXPECT_EQ(r.busiest.front().peak_flows, 7U);
}

// Two rings whose cross-leaf flows share one spine uplink from the first step (the layout of
// Simulate.ConcurrentDataParallelRingsShareSpineLinks): the second group's first cross-leaf
// flow overlaps the first group's, so the evaluation steps aside.
TEST(Uncontended, ConcurrentGroupsSharingAnUplinkFallBack) {
  topo::SpineLeafParams p;
  p.leaves = 2;
  p.spines = 1;
  p.hosts_per_leaf = 2;
  p.host_bandwidth = p.uplink_bandwidth = kRate;
  p.host_latency = p.uplink_latency = Time::nanoseconds(250);
  const topo::Topology t = topo::build_spine_leaf(p);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(4000)};
  const Groups apart{{0, 2}};
  EXPECT_TRUE(simulate_both(t, spec, apart).contention_free);
  const Groups together{{0, 2}, {1, 3}};
  const SimulationResult r = simulate_both(t, spec, together);
  EXPECT_FALSE(r.contention_free);
  EXPECT_EQ(r.busiest.front().peak_flows, 2U);
}

// Random schedules (not lowered collectives: any steps and channels, transfers of a step in any
// order, zero-byte transfers) on random small topologies whose links have zero and tiny
// latencies and rates from 0.9 GB/s to 1 EB/s (drain times of 0 ps), one or two groups: wherever
// the evaluation answers, it must equal an execution on the event simulator in durations,
// events and every link's bytes, busy time and peak.
TEST(Uncontended, RandomSchedulesEqualTheirExecution) {
  Rng rng(2026);
  const auto pick = [&rng](const auto& values) { return values[rng.below(values.size())]; };
  const std::vector<double> rates{1e9, 3e9, 7.3e9, 100e9, 1e15, 1e18, 2.5e9, 0.9e9};
  const std::vector<std::int64_t> latencies{0, 0, 1, 3, 1000, 12345};
  const std::vector<std::int64_t> sizes{0, 0, 1, 3, 7, 1000, 1003, 1000000, 123457};
  int accepted = 0;
  for (int iteration = 0; iteration < 20000; ++iteration) {
    const auto devices = static_cast<int>(3 + rng.below(5));
    topo::Topology t("random", topo::Family::kExplicit);
    for (int d = 0; d < devices; ++d) t.add_device("d" + std::to_string(d));
    std::vector<topo::NodeId> switches;
    const auto switch_count = static_cast<int>(1 + rng.below(2));
    for (int i = 0; i < switch_count; ++i)
      switches.push_back(t.add_switch("s" + std::to_string(i), 1));
    const auto rate = [&] { return Bandwidth::bytes_per_second(pick(rates)); };
    const auto latency = [&] { return Time::picoseconds(pick(latencies)); };
    for (int d = 0; d < devices; ++d) {
      t.add_link(static_cast<topo::NodeId>(d), pick(switches), rate(), latency(), rate(),
                 latency());
    }
    if (switch_count == 2) t.add_link(switches[0], switches[1], rate(), latency());
    for (std::uint64_t e = rng.below(3); e > 0; --e) {
      const auto a = static_cast<topo::NodeId>(rng.below(devices));
      const auto b = static_cast<topo::NodeId>(rng.below(devices));
      if (a != b) t.add_link(a, b, rate(), latency());
    }
    std::vector<topo::DeviceId> order(static_cast<std::size_t>(devices));
    std::iota(order.begin(), order.end(), 0U);
    for (std::size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(i)]);
    std::vector<std::vector<topo::DeviceId>> groups;
    const auto first = static_cast<std::size_t>(1 + rng.below(order.size() - 1));
    groups.emplace_back(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(first));
    if (rng.below(2) == 1)
      groups.emplace_back(order.begin() + static_cast<std::ptrdiff_t>(first), order.end());
    std::vector<std::shared_ptr<const Program>> programs;
    for (const auto& group : groups) {
      const auto n = static_cast<std::uint32_t>(group.size());
      std::vector<Transfer> transfers;
      for (std::uint64_t i = n >= 2 ? rng.below(10) : 0; i > 0; --i) {
        Transfer x;
        x.src = static_cast<std::uint32_t>(rng.below(n));
        x.dst = static_cast<std::uint32_t>((x.src + 1 + rng.below(n - 1)) % n);
        x.step = static_cast<std::uint32_t>(rng.below(5));
        x.channel = static_cast<std::uint16_t>(rng.below(2));
        x.bytes = Bytes(pick(sizes));
        transfers.push_back(x);
      }
      programs.push_back(
          std::make_shared<const Schedule>(static_cast<int>(n), std::move(transfers)));
    }
    const std::uint64_t salt = rng.next();
    topo::Router router(t, salt);
    detail::UncontendedEvaluator evaluator(t);
    std::vector<detail::GroupProgram> parts;
    for (std::size_t g = 0; g < groups.size(); ++g) parts.push_back({programs[g].get(), groups[g]});
    const auto run = evaluator.evaluate(router, parts, salt);
    if (!run) continue;
    ++accepted;
    net::Simulator sim(t);
    std::vector<std::unique_ptr<Execution>> executions;
    for (std::size_t g = 0; g < groups.size(); ++g) {
      executions.push_back(std::make_unique<Execution>(sim, router, programs[g], groups[g], salt));
    }
    for (auto& e : executions) e->start();
    sim.run();
    SCOPED_TRACE("iteration " + std::to_string(iteration));
    ASSERT_EQ(run->events, sim.events_processed());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      ASSERT_EQ(run->durations[g], executions[g]->duration()) << "group " << g;
    }
    std::vector<LinkUse> used;
    for (topo::LinkId l = 0; l < t.num_links(); ++l) {
      const net::LinkStats& stats = sim.link_stats(l);
      if (stats.bytes > 0) used.push_back({l, stats.bytes, stats.busy, stats.peak_flows});
    }
    ASSERT_EQ(run->links.size(), used.size());
    for (std::size_t i = 0; i < used.size(); ++i) {
      EXPECT_EQ(run->links[i].link, used[i].link);
      EXPECT_EQ(run->links[i].bytes, used[i].bytes);
      EXPECT_EQ(run->links[i].busy, used[i].busy);
      EXPECT_EQ(run->links[i].peak_flows, used[i].peak_flows);
    }
  }
  EXPECT_GT(accepted, 5000);
}

// Two devices through a switch whose second link has no bandwidth (NaN).
topo::Topology pair_without_bandwidth() {
  topo::Topology t("nan", topo::Family::kExplicit);
  t.add_device("a");
  t.add_device("b");
  const auto sw = t.add_switch("s", 1);
  t.add_link(0, sw, kRate, Time::nanoseconds(10));
  t.add_link(sw, 1, Bandwidth::bytes_per_second(std::numeric_limits<double>::quiet_NaN()),
             Time::nanoseconds(10));
  return t;
}

// A link without bandwidth on the route: the evaluation steps aside, and the simulator reports
// the link (as without the evaluation).
TEST(Uncontended, LinkWithoutBandwidthFallsBackToTheSimulatorsError) {
  const topo::Topology t = pair_without_bandwidth();
  const CollectiveSpec spec{Operation::kSend, Algorithm::kDirect, Bytes(1000)};
  for (const bool events_only : {false, true}) {
    EXPECT_THROW((void)simulate(t, spec, Groups{{0, 1}}, {.events_only = events_only}), Error)
        << events_only;
  }
}

// A group of one device has no transfers: zero time and the one "done" event.
TEST(Uncontended, OneDeviceGroupTakesNoTimeAndOneEvent) {
  const topo::Topology t = testing::star(4);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(4000)};
  const SimulationResult r = simulate_both(t, spec, Groups{{2}});
  EXPECT_TRUE(r.contention_free);
  EXPECT_EQ(r.makespan, Time::zero());
  EXPECT_EQ(r.events, 1U);
  EXPECT_TRUE(r.busiest.empty());
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// `parts` evaluated with uniform rings derived where they can be and with the pass over every
// transfer, each on a router of its own with routing seed `seed`; how many runs were derived.
struct BothWays {
  std::optional<detail::UncontendedRun> derived;
  std::optional<detail::UncontendedRun> pass;
  std::uint64_t rings_derived = 0;
};

BothWays evaluate_both_ways(const topo::Topology& t, std::span<const detail::GroupProgram> parts,
                            std::uint64_t seed) {
  topo::Router router_a(t, seed);
  topo::Router router_b(t, seed);
  detail::UncontendedEvaluator fast(t, true);
  detail::UncontendedEvaluator slow(t, false);
  BothWays out;
  out.derived = fast.evaluate(router_a, parts, seed);
  out.pass = slow.evaluate(router_b, parts, seed);
  out.rings_derived = fast.derived();
  return out;
}

// Uniform rings derived from one step per phase (UncontendedEvaluator::evaluate_rings) against
// the transfer-by-transfer pass and the event simulation on every bundled topology: ring,
// hierarchical and torus rings, allreduce, reduce-scatter and all-gather, one and several
// channels (rotations and rail rings), pipelined chunks, even sizes (derived) and odd ones (the
// pass), one group and two concurrent ones. Wherever the derivation answers it must equal both
// in durations, events and every link's bytes and busy time; wherever it steps aside the pass's
// answer stands (asserted equal to the event simulation by the tests above).
TEST(Uncontended, DerivedRingsEqualThePassAndTheEventSimulation) {
  int derived = 0;
  int derived_forwarding = 0;
  int derived_uneven = 0;  // forwarding rings whose buffer does not split evenly
  int passed = 0;
  for (const std::string& file : testing::bundled_topology_files()) {
    const topo::Topology t = topo::load_topology(file);
    const int devices = static_cast<int>(t.num_devices());
    for (const int n : {4, 8, 32}) {
      if (n > devices) continue;
      for (const Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical, Algorithm::kTorus}) {
        for (const Operation op :
             {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
          for (const int channels : {1, 2}) {
            for (const int rails : {0, 4}) {
              if ((channels == 1 && rails > 0) || (a != Algorithm::kRing && channels > 1)) continue;
              for (const int chunks : {1, 2}) {
                for (const std::int64_t size :
                     {std::int64_t{n} * chunks * channels * 65536, std::int64_t{1000003}}) {
                  for (const bool forward : {false, true}) {
                    CollectiveSpec spec{op, a, Bytes(size), chunks};
                    spec.channels = channels;
                    spec.ranks_per_node = rails;
                    spec.forward_on_arrival = forward;
                    if (a != Algorithm::kRing)
                      spec.levels = {a == Algorithm::kTorus ? 2 : 4,
                                     n / (a == Algorithm::kTorus ? 2 : 4)};
                    try {
                      validate(spec, n);
                    } catch (const Error&) {
                      continue;
                    }
                    const auto program = ring_program(spec, n);
                    for (const int count : {1, 2}) {
                      if (count * n > devices) continue;
                      // The second group strided across the devices.
                      Groups groups{iota_group(n)};
                      if (count == 2) {
                        std::vector<topo::DeviceId> other;
                        const int stride = devices / n;
                        for (int r = 0; r < n; ++r) {
                          other.push_back(static_cast<topo::DeviceId>(r * stride + stride - 1));
                        }
                        if (std::find(other.begin(), other.end(), groups[0].back()) !=
                                other.end() ||
                            other.back() < static_cast<topo::DeviceId>(n)) {
                          other = iota_group(n, n);
                        }
                        groups.push_back(other);
                      }
                      SCOPED_TRACE(
                          file + " " + std::string(algorithm_name(a)) + " " +
                          std::string(operation_name(op)) + " n=" + std::to_string(n) +
                          " channels=" + std::to_string(channels) +
                          " rails=" + std::to_string(rails) + " chunks=" + std::to_string(chunks) +
                          " size=" + std::to_string(size) + " groups=" + std::to_string(count));
                      std::vector<detail::GroupProgram> parts;
                      for (const auto& g : groups) parts.push_back({program.get(), g});
                      const BothWays both = evaluate_both_ways(t, parts, 3);
                      const auto& x = both.derived;
                      const auto& y = both.pass;
                      ASSERT_EQ(x.has_value(), y.has_value());
                      if (both.rings_derived == 0) {
                        ++passed;
                        continue;
                      }
                      ++derived;
                      if (forward) ++derived_forwarding;
                      if (forward && size == 1000003) ++derived_uneven;
                      ASSERT_TRUE(x.has_value());
                      EXPECT_EQ(x->durations, y->durations);
                      EXPECT_EQ(x->events, y->events);
                      ASSERT_EQ(x->links.size(), y->links.size());
                      for (std::size_t i = 0; i < x->links.size(); ++i) {
                        EXPECT_EQ(x->links[i].link, y->links[i].link);
                        EXPECT_EQ(x->links[i].bytes, y->links[i].bytes);
                        EXPECT_EQ(x->links[i].busy, y->links[i].busy);
                        EXPECT_EQ(x->links[i].peak_flows, y->links[i].peak_flows);
                      }
                      // The event simulation of the same run.
                      net::Simulator simulator(t);
                      topo::Router router_c(t, 3);
                      std::vector<std::unique_ptr<Execution>> runs;
                      for (const auto& g : groups) {
                        runs.push_back(
                            std::make_unique<Execution>(simulator, router_c, program, g, 3));
                      }
                      for (auto& r : runs) r->start();
                      simulator.run();
                      for (std::size_t g = 0; g < runs.size(); ++g) {
                        EXPECT_EQ(runs[g]->duration(), x->durations[g]);
                      }
                      EXPECT_EQ(simulator.events_processed(), x->events);
                      for (const LinkUse& use : x->links) {
                        EXPECT_EQ(simulator.link_stats(use.link).bytes, use.bytes);
                        EXPECT_EQ(simulator.link_stats(use.link).busy, use.busy);
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  // Both ways were exercised, many times, and forwarding rings were derived too.
  EXPECT_GT(derived, 100);
  EXPECT_GT(derived_forwarding, 50);
  EXPECT_GT(derived_uneven, 10);
  EXPECT_GT(passed, 100);
}

// A hierarchical ring (levels 2 x 2) whose slowest hop is not one rank's in every phase: the
// derivation steps aside and the pass answers. With both slow hops rank 0's it is derived:
// phases reduce-scatter level 0, level 1, all-gather level 1, level 0, one step each, pieces of
// 4000 / 2 = 2000 bytes at level 0 and 1000 at level 1, rank 0's hops at half the rate
// (20 ps per byte), 100 ns each: 2 x (100 ns + 40 ns) + 2 x (100 ns + 20 ns) = 520 ns.
TEST(Uncontended, RingsWithoutACommonSlowestRankAreNotDerived) {
  // Cables 0-1 and 2-3 (level 0), 0-2 and 1-3 (level 1), 100 ns; out of `slow` half the rate.
  const auto build = [](topo::NodeId slow_level0, topo::NodeId slow_level1) {
    topo::Topology t("ring4", topo::Family::kExplicit);
    for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
    const auto cable = [&](topo::NodeId a, topo::NodeId b, topo::NodeId slow) {
      const Time latency = Time::nanoseconds(100);
      const Bandwidth half = testing::kRate * 0.5;
      t.add_link(a, b, a == slow ? half : testing::kRate, latency,
                 b == slow ? half : testing::kRate, latency);
    };
    cable(0, 1, slow_level0);
    cable(2, 3, slow_level0);
    cable(0, 2, slow_level1);
    cable(1, 3, slow_level1);
    return t;
  };
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kHierarchical, Bytes(4000), 1};
  spec.levels = {2, 2};
  const auto program = ring_program(spec, 4);
  const std::vector<topo::DeviceId> group{0, 1, 2, 3};
  const std::vector<detail::GroupProgram> parts{{program.get(), group}};
  {
    const topo::Topology t = build(0, 1);
    topo::Router router(t);
    detail::UncontendedEvaluator evaluator(t, true);
    const auto run = evaluator.evaluate(router, parts, 0);
    ASSERT_TRUE(run.has_value());
    EXPECT_EQ(evaluator.derived(), 0U);
    topo::Router router_b(t);
    detail::UncontendedEvaluator pass(t, false);
    EXPECT_EQ(pass.evaluate(router_b, parts, 0)->durations, run->durations);
  }
  const topo::Topology t = build(0, 0);
  topo::Router router(t);
  detail::UncontendedEvaluator evaluator(t, true);
  const auto run = evaluator.evaluate(router, parts, 0);
  ASSERT_TRUE(run.has_value());
  EXPECT_EQ(evaluator.derived(), 1U);
  EXPECT_EQ(run->durations, std::vector<Time>{Time::nanoseconds(520)});
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// A topology the bound tests run on, and its name.
struct TopologyCase {
  std::string name;
  topo::Topology topology;
};

TopologyCase bundled(const char* file) {
  return {file, topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/" + file)};
}

// An execution of `program` per group on `simulator`, started (routing seed and salt 5).
std::vector<std::unique_ptr<Execution>> start_runs(net::Simulator& simulator, topo::Router& router,
                                                   const std::shared_ptr<const Program>& program,
                                                   const Groups& groups) {
  std::vector<std::unique_ptr<Execution>> runs;
  for (const auto& g : groups) {
    runs.push_back(std::make_unique<Execution>(simulator, router, program, g, 5));
  }
  for (auto& r : runs) r->start();
  return runs;
}

// `lower_bound` against the event simulation, contended or not: never above the slowest group's
// last arrival, the same event count, and on a run that is contention-free, the last arrival
// itself less at most its rounding margin (4 ps per transfer and 1e-6 relative). Every
// algorithm of the allreduce, reduce-scatter, all-gather, all-to-all and broadcast tuner, one
// group and four concurrent ones (sharing up-links on the oversubscribed and rail clusters),
// on small hand-built and on bundled topologies.
TEST(Uncontended, LowerBoundNeverExceedsTheEventSimulation) {
  std::vector<TopologyCase> cases;
  cases.push_back({"fat-tree k=4 2:1", fat_tree(4, 2)});
  cases.push_back({"rail 4x4", rail(4)});
  cases.push_back({"torus 4x2", torus({4, 2})});
  for (const char* file :
       {"h100_rail_64.yaml", "h100_rail_1024_4to1.yaml", "fat_tree_k16.yaml", "dgx_h100.yaml"}) {
    cases.push_back(bundled(file));
  }
  int contended = 0;
  int tight = 0;
  for (const TopologyCase& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
                         Operation::kAllToAll, Operation::kBroadcast}) {
      for (Algorithm a : algorithms_for(op)) {
        if (a == Algorithm::kNvls) continue;
        for (int n : {4, 8}) {
          for (int chunks : {1, 4}) {
            for (std::int64_t size : {std::int64_t{1000003}, std::int64_t{1} << 26}) {
              CollectiveSpec spec{op, a, Bytes(size), chunks};
              if (a == Algorithm::kHierarchical || a == Algorithm::kTorus) spec.levels = {2, n / 2};
              try {
                validate(spec, n);
              } catch (const Error&) {
                continue;
              }
              const auto program = lower_program(spec, n);
              for (int count : {1, 4}) {
                if (count * n > devices) continue;
                // Groups strided across the devices, so that concurrent groups cross the same
                // switches.
                const Groups groups = strided_groups(count, n, devices);
                SCOPED_TRACE(c.name + " " + std::string(operation_name(op)) + " " +
                             std::string(algorithm_name(a)) + " n=" + std::to_string(n) +
                             " chunks=" + std::to_string(chunks) + " size=" + std::to_string(size) +
                             " groups=" + std::to_string(count));
                std::vector<detail::GroupProgram> parts;
                for (const auto& g : groups) parts.push_back({program.get(), g});
                topo::Router router_a(c.topology, 5);
                detail::UncontendedEvaluator evaluator(c.topology);
                const auto bound = evaluator.lower_bound(router_a, parts, 5);
                ASSERT_TRUE(bound.has_value());
                net::Simulator simulator(c.topology);
                topo::Router router_b(c.topology, 5);
                const auto runs = start_runs(simulator, router_b, program, groups);
                simulator.run();
                Time slowest;
                for (const auto& r : runs) slowest = std::max(slowest, r->duration());
                EXPECT_LE(bound->slowest, slowest);
                EXPECT_GT(bound->slowest.ps(), 0);
                EXPECT_EQ(bound->events, simulator.events_processed());
                const auto free = evaluator.evaluate(router_a, parts, 5);
                if (free) {
                  // Contention-free: the pass's last arrival, less the margin only.
                  const std::int64_t margin =
                      4 * static_cast<std::int64_t>(program->transfer_count()) +
                      slowest.ps() / 1000000 + 1;
                  EXPECT_GE(bound->slowest.ps(), slowest.ps() - margin);
                  ++tight;
                } else {
                  ++contended;
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(contended, 200);
  EXPECT_GT(tight, 100);
}

// `devices` hosts in runs of two per switch, alternately on switches s1 and s2 (devices 0, 1
// on s1, 2, 3 on s2, 4, 5 on s1, ...), hosts at 100 GB/s without latency, and one s1-s2 cable
// at 1 GB/s with `cable_latency`: the hand-computed load-term cases below.
topo::Topology two_switches(int devices, Time cable_latency) {
  topo::Topology t("two switches", topo::Family::kExplicit);
  for (int d = 0; d < devices; ++d) t.add_device("d" + std::to_string(d));
  const auto s1 = t.add_switch("s1", 1);
  const auto s2 = t.add_switch("s2", 1);
  const Bandwidth host = Bandwidth::bytes_per_second(100e9);
  for (topo::NodeId d = 0; d < static_cast<topo::NodeId>(devices); ++d) {
    t.add_link(d, d % 4 < 2 ? s1 : s2, host, Time::zero(), host, Time::zero());
  }
  t.add_link(s1, s2, Bandwidth::bytes_per_second(1e9), cable_latency);
  return t;
}

// The load term by hand, where it decides the bound and where each rank's route changes every
// step: a pairwise all-to-all of 4 MB over devices 0, 1 on switch s1 and 2, 3 on switch s2,
// hosts at 100 GB/s, the s1-s2 cable at 1 GB/s, no latency. Ranks 0 and 1 send 1 MB to each of
// ranks 2 and 3 across the cable (steps 0-2, a different peer each step), so s1 -> s2 carries
// 4 MB: 4 ms from the first opening at 0. Each rank's chain of steps is shorter (at most three
// crossings of 1 ms), so the bound is 4e9 ps less the margin (4 ps per transfer, 12 transfers)
// and the relative 1e-6. Summing a route's bytes only once its last flow is seen must still
// count the earlier routes' bytes (a missed sum leaves the path term, below 3.1e9 ps).
TEST(Uncontended, LowerBoundCountsEveryRouteOfAPairwiseAllToAll) {
  const topo::Topology t = two_switches(4, Time::zero());
  const auto program = lower_program(
      CollectiveSpec{Operation::kAllToAll, Algorithm::kPairwise, Bytes(4'000'000)}, 4);
  ASSERT_EQ(program->transfer_count(), 12U);
  const std::vector<topo::DeviceId> group{0, 1, 2, 3};
  const std::vector<detail::GroupProgram> parts{{program.get(), group}};
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t);
  const auto bound = evaluator.lower_bound(router, parts, 0);
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->slowest.ps(), static_cast<std::int64_t>((4e9 - 48) * (1 - 1e-6)));
  // Twice over the same evaluator: its link state starts afresh.
  EXPECT_EQ(evaluator.lower_bound(router, parts, 0)->slowest, bound->slowest);
}

// The load term by hand where each sender has more destinations than routes it keeps (three):
// a direct all-to-all of 4 MB over devices 0-7 of the two switches above (0, 1, 4, 5 on s1; 2,
// 3, 6, 7 on s2), no latency. Every rank sends 0.5 MB to each other rank in one step, so each
// s1 rank sends four pieces across the cable, among seven destinations: s1 -> s2 carries 8 MB,
// 8 ms from the first opening at 0, less the margin (4 ps per transfer, 56 transfers) and the
// relative 1e-6. A route dropped for a new destination must add its bytes first.
TEST(Uncontended, LowerBoundCountsTheRoutesASenderNoLongerKeeps) {
  const topo::Topology t = two_switches(8, Time::zero());
  const auto program =
      lower_program(CollectiveSpec{Operation::kAllToAll, Algorithm::kDirect, Bytes(4'000'000)}, 8);
  ASSERT_EQ(program->transfer_count(), 56U);
  const std::vector<topo::DeviceId> group{0, 1, 2, 3, 4, 5, 6, 7};
  const std::vector<detail::GroupProgram> parts{{program.get(), group}};
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t);
  const auto bound = evaluator.lower_bound(router, parts, 0);
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->slowest.ps(), static_cast<std::int64_t>((8e9 - 224) * (1 - 1e-6)));
}

// `progress_bound` by hand: two flows of 1 MB from device 0 to device 2 of the two switches
// above, over the 1 GB/s cable with 1 us (the hosts' links 100 GB/s, no latency), the second
// started at 3 ms. The cable's load is 2 MB and its shortest route latency 1 us. At 0.5 ms it
// has carried 0.5 MB: 0.5 + 1.5 ms + 1 us. In the gap (2 ms) the bound rises with the clock
// (2 + 1 ms + 1 us), and once the second flow starts (3 ms) it is the run's end, 4 ms + 1 us,
// each less the margin (`margin` and a relative 1e-6; a relative 1e-9 of the load too).
// Once the second flow has drained (4 ms) and before it arrives, the cable has nothing left
// to carry and the bound falls back to the clock (4.0005 ms). Never above the end, never
// rising faster than the clock.
TEST(Uncontended, ProgressBoundIsTheClockPlusWhatTheSlowestLinkStillCarries) {
  const topo::Topology t = two_switches(4, Time::microseconds(1));
  topo::Router router(t, 0);
  std::vector<topo::LinkId> route;
  router.route_into(0, 2, 0, route);
  ASSERT_EQ(route.size(), 3U);
  std::vector<detail::LinkLoad> loads;
  for (const topo::LinkId link : route) loads.push_back({link, 2e6, Time::microseconds(1)});
  net::Simulator sim(t);
  Time end;
  sim.start_flow(route, Bytes(1'000'000), [&](net::FlowId, Time at) { end = at; });
  sim.schedule(Time::milliseconds(3), [&] {
    sim.start_flow(route, Bytes(1'000'000), [&](net::FlowId, Time at) { end = at; });
  });
  constexpr std::int64_t kMargin = 40;
  const auto expected = [](double ps) {
    // The cable's 2 MB less a relative 1e-9 (2e-3 bytes at 1 GB/s: 2 ps).
    return static_cast<std::int64_t>((std::floor(ps - 2) - kMargin) * (1 - 1e-6));
  };
  std::optional<Time> last;
  Time last_now;
  for (const auto& [at, bound] : std::vector<std::pair<double, double>>{
           {0.5e9, 2.001e9}, {2e9, 3.001e9}, {3e9, 4.001e9}, {4.0005e9, 4.0005e9 + 2}}) {
    sim.run_until(Time::picoseconds(static_cast<std::int64_t>(at)));
    const Time b = detail::progress_bound(sim, loads, Time::picoseconds(kMargin));
    SCOPED_TRACE(at);
    EXPECT_NEAR(static_cast<double>(b.ps()), static_cast<double>(expected(bound)), 2.0);
    if (last) {
      EXPECT_LE(b - *last, sim.now() - last_now + Time::picoseconds(1));
    }
    EXPECT_LE(b, Time::picoseconds(4'001'000'000));
    last = b;
    last_now = sim.now();
  }
  sim.run();
  EXPECT_EQ(end, Time::picoseconds(4'001'000'000));
}

// `progress_bound` against the event simulation, contended or not: from the loads of
// `lower_bound`, at eight points of the run, never above the slowest group's last arrival,
// never rising faster than the clock (what the oracle's checkpoints rely on), and by the last
// point above the event-free bound wherever the links sat idle for a while (the point of it). Ring,
// tree and pairwise all-to-all, one group and four (sharing up-links), on small and bundled
// topologies.
TEST(Uncontended, ProgressBoundNeverExceedsTheEventSimulation) {
  std::vector<TopologyCase> cases;
  cases.push_back({"fat-tree k=4 2:1", fat_tree(4, 2)});
  cases.push_back({"rail 4x4", rail(4)});
  cases.push_back(bundled("h100_rail_64.yaml"));
  int checked = 0;
  int risen = 0;
  for (const TopologyCase& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (const auto& [op, a] : {std::pair{Operation::kAllReduce, Algorithm::kRing},
                                std::pair{Operation::kAllReduce, Algorithm::kTree},
                                std::pair{Operation::kAllToAll, Algorithm::kPairwise}}) {
      for (int count : {1, 4}) {
        const int n = 4;
        CollectiveSpec spec{op, a, Bytes(std::int64_t{1} << 26),
                            op == Operation::kAllToAll ? 1 : 8};
        const auto program = lower_program(spec, n);
        const Groups groups = strided_groups(count, n, devices);
        SCOPED_TRACE(c.name + " " + std::string(algorithm_name(a)) +
                     " groups=" + std::to_string(count));
        std::vector<detail::GroupProgram> parts;
        for (const auto& g : groups) parts.push_back({program.get(), g});
        topo::Router router_a(c.topology, 5);
        detail::UncontendedEvaluator evaluator(c.topology);
        std::vector<detail::LinkLoad> loads;
        const auto bound = evaluator.lower_bound(router_a, parts, 5, &loads);
        ASSERT_TRUE(bound.has_value());
        ASSERT_FALSE(loads.empty());
        // The run to its end, then again in eight steps.
        Time slowest;
        for (int pass = 0; pass < 2; ++pass) {
          net::Simulator simulator(c.topology);
          topo::Router router_b(c.topology, 5);
          const auto runs = start_runs(simulator, router_b, program, groups);
          if (pass == 0) {
            simulator.run();
            for (const auto& r : runs) slowest = std::max(slowest, r->duration());
            continue;
          }
          const Time margin = Time::picoseconds(
              static_cast<std::int64_t>(4 * program->transfer_count() * groups.size()));
          std::optional<Time> last;
          Time last_now;
          for (int k = 1; k <= 8; ++k) {
            const Time at = Time::picoseconds(slowest.ps() * k / 9);
            (void)simulator.run_within(std::numeric_limits<std::uint64_t>::max(), at);
            const Time b = detail::progress_bound(simulator, loads, margin);
            EXPECT_LE(b, slowest);
            if (last) {
              EXPECT_LE(b - *last, simulator.now() - last_now + Time::picoseconds(1));
            }
            last = b;
            last_now = simulator.now();
            ++checked;
          }
          if (*last > bound->slowest) ++risen;
          simulator.run();
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 3 * 2 * 8);
  EXPECT_GT(risen, 6);
}

// A sender that comes back to routes it kept: recursive halving and doubling over eight devices
// cabled to each other directly, each pair's cable at its own rate (1 to 5 GB/s) with 1 us.
// Rank q's partners q^1, q^2 and q^4 of the reduce-scatter come back in reverse in the
// all-gather, so the pass takes those flows' routes, rates and latencies from the ones it kept
// for each partner (taking another kept route fails this test). Each cable carries one pair's
// flows, one after another: contention-free, so the pass must give the event simulation's run to
// the picosecond.
TEST(Uncontended, KeptRoutesReuseTheirOwnDrainTimes) {
  topo::Topology t("mesh of rates", topo::Family::kExplicit);
  for (int d = 0; d < 8; ++d) t.add_device("d" + std::to_string(d));
  for (topo::NodeId a = 0; a < 8; ++a) {
    for (topo::NodeId b = a + 1; b < 8; ++b) {
      t.add_link(a, b, Bandwidth::bytes_per_second(1e9 * (1 + (3 * a + b) % 5)),
                 Time::microseconds(1));
    }
  }
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kHalvingDoubling, Bytes(8'000'000)};
  const std::vector<std::vector<topo::DeviceId>> groups{iota_group(8)};
  const SimulationResult r = simulate_both(t, spec, groups, 0);
  EXPECT_TRUE(r.contention_free);
}

// The load term by hand where one route carries many flows: two ring allreduces of 4 MB over
// devices {0, 1 | 2, 3} and {4, 5 | 6, 7} (switch s1 | switch s2), hosts at 100 GB/s without
// latency, the s1-s2 cable at 1 GB/s and 1 us. Ranks 1 and 5 send all six of their 1 MB steps
// across the cable, so s1 -> s2 carries 12 MB from the first opening at 0: 1 us + 12 ms. Each
// ring's chain of steps is about 6 ms (each step waits for one crossing), below it. The
// earliest opening of a route's flows must be its first step's, not its last's (~5 ms later).
TEST(Uncontended, LowerBoundTakesTheFirstOpeningOfARoutesFlows) {
  const topo::Topology t = two_switches(8, Time::microseconds(1));
  const auto program =
      lower_program(CollectiveSpec{Operation::kAllReduce, Algorithm::kRing, Bytes(4'000'000)}, 4);
  ASSERT_EQ(program->transfer_count(), 24U);
  const std::vector<topo::DeviceId> a{0, 1, 2, 3};
  const std::vector<topo::DeviceId> b{4, 5, 6, 7};
  const std::vector<detail::GroupProgram> parts{{program.get(), a}, {program.get(), b}};
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t);
  const auto bound = evaluator.lower_bound(router, parts, 0);
  ASSERT_TRUE(bound.has_value());
  EXPECT_EQ(bound->slowest.ps(), static_cast<std::int64_t>((1e6 + 12e9 - 96) * (1 - 1e-6)));
}

void expect_same_loads(std::span<const detail::LinkLoad> a, std::span<const detail::LinkLoad> b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].link, b[i].link);
    EXPECT_EQ(a[i].bytes, b[i].bytes);
    EXPECT_EQ(a[i].min_latency, b[i].min_latency);
  }
}

std::vector<TopologyCase> ring_bound_topologies() {
  std::vector<TopologyCase> cases;
  cases.push_back({"rail 4x4", rail(4)});
  cases.push_back({"fat-tree k=4 2:1", fat_tree(4, 2)});
  cases.push_back({"torus 4x2", torus({4, 2})});
  return cases;
}

// One ring of `bound_rings_both_ways`' grid, bounded by the derivation and by the pass.
struct RingBoundsBothWays {
  const TopologyCase* where;
  Algorithm algorithm;
  const Program* program;
  int groups;
  std::optional<detail::RunBound> derived;
  std::optional<detail::RunBound> pass;
  std::vector<detail::LinkLoad> derived_loads;
  std::vector<detail::LinkLoad> pass_loads;
  std::uint64_t derived_groups;  // groups the derivation answered
};

// Every ring of the grid (allreduce, reduce-scatter and all-gather; flat and two-level
// hierarchical; n in `sizes`; 1 and 4 channels, flat only; waiting for own sends or forwarding;
// 1 and 3 chunks; one group and three sharing uplinks, strided) on every topology of `cases`,
// its buffer `bytes(n, chunks, channels)`, its event-free bound computed both ways; `check`
// sees each, inside a trace naming it.
template <class Check>
void bound_rings_both_ways(const std::vector<TopologyCase>& cases, std::initializer_list<int> sizes,
                           const std::function<std::int64_t(int, int, int)>& bytes, Check check) {
  for (const TopologyCase& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
      for (Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical}) {
        for (int n : sizes) {
          for (int channels : {1, 4}) {
            for (bool forward : {false, true}) {
              for (int chunks : {1, 3}) {
                if (a == Algorithm::kHierarchical && (n < 4 || channels > 1)) continue;
                CollectiveSpec spec{op, a, Bytes(bytes(n, chunks, channels)), chunks};
                spec.channels = channels;
                spec.forward_on_arrival = forward;
                if (a == Algorithm::kHierarchical) spec.levels = {2, n / 2};
                const auto program = ring_program(spec, n);
                for (int count : {1, 3}) {
                  if (count * n > devices) continue;
                  const Groups groups = strided_groups(count, n, devices);
                  SCOPED_TRACE(c.name + " " + std::string(operation_name(op)) + " " +
                               std::string(algorithm_name(a)) + " n=" + std::to_string(n) +
                               " channels=" + std::to_string(channels) + " forward=" +
                               std::to_string(forward) + " chunks=" + std::to_string(chunks) +
                               " groups=" + std::to_string(count));
                  std::vector<detail::GroupProgram> parts;
                  for (const auto& g : groups) parts.push_back({program.get(), g});
                  topo::Router router_a(c.topology, 5);
                  topo::Router router_b(c.topology, 5);
                  detail::UncontendedEvaluator fast(c.topology, true);
                  detail::UncontendedEvaluator pass(c.topology, false);
                  RingBoundsBothWays both{
                      .where = &c, .algorithm = a, .program = program.get(), .groups = count};
                  both.derived = fast.lower_bound(router_a, parts, 5, &both.derived_loads);
                  both.pass = pass.lower_bound(router_b, parts, 5, &both.pass_loads);
                  EXPECT_EQ(pass.derived_bounds(), 0U);
                  both.derived_groups = fast.derived_bounds();
                  ASSERT_TRUE(both.derived.has_value());
                  ASSERT_TRUE(both.pass.has_value());
                  EXPECT_EQ(both.derived->events, both.pass->events);
                  expect_same_loads(both.derived_loads, both.pass_loads);
                  check(both);
                }
              }
            }
          }
        }
      }
    }
  }
}

// Uniform rings of one phase per channel (flat rings and NCCL's channel rings, waiting for their
// own sends or forwarding on arrival; one and three concurrent groups sharing uplinks), their
// bound derived from their ranks: the transfer-by-transfer pass's bound, events and link loads,
// to the picosecond and the byte. Hierarchical rings (several phases per channel) are derived
// phase by phase: the same events and link loads, a bound no higher than the pass's.
TEST(Uncontended, DerivedRingBoundsEqualThePass) {
  std::vector<TopologyCase> cases = ring_bound_topologies();
  cases.push_back(bundled("h100_rail_64.yaml"));
  int derived = 0;
  int hierarchical = 0;
  bound_rings_both_ways(
      cases, {2, 4, 8},
      [](int n, int chunks, int channels) { return std::int64_t{n} * chunks * channels * 4096; },
      [&](const RingBoundsBothWays& both) {
        ASSERT_FALSE(both.program->uniform_ring().empty());
        EXPECT_EQ(both.derived_groups, static_cast<std::uint64_t>(both.groups));
        if (both.algorithm == Algorithm::kHierarchical) {
          EXPECT_LE(both.derived->slowest, both.pass->slowest);
          ++hierarchical;
        } else {
          EXPECT_EQ(both.derived->slowest, both.pass->slowest);
          ++derived;
        }
      });
  EXPECT_GT(derived, 200);
  EXPECT_GT(hierarchical, 20);
}

// Four devices on one switch (node 4), cables at 2 GB/s with latencies of 1, 2, 3 and 4 us.
topo::Topology staggered_star() {
  topo::Topology t("star", topo::Family::kExplicit);
  for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
  const auto sw = t.add_switch("s", 1);
  for (topo::DeviceId d = 0; d < 4; ++d) {
    t.add_link(d, sw, Bandwidth::bytes_per_second(2e9), Time::microseconds(1 + d));
  }
  return t;
}

// A flat ring allreduce of `size` over its 4 devices, waiting for own sends or `forward`ing.
std::shared_ptr<const Program> star_ring(Bytes size, bool forward) {
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, size};
  spec.forward_on_arrival = forward;
  return ring_program(spec, 4);
}

// `program` over devices 0..3 of `t` (routing seed and salt 0), its event-free bound derived
// (which must answer: one group derived) and by the pass, and the derivation's link loads.
struct FourRankBounds {
  detail::RunBound derived;
  detail::RunBound pass;
  std::vector<detail::LinkLoad> loads;
};
FourRankBounds bound_four_ranks(const topo::Topology& t, const Program& program) {
  const std::vector<topo::DeviceId> group{0, 1, 2, 3};
  const std::vector<detail::GroupProgram> parts{{&program, group}};
  topo::Router router(t, 0);
  detail::UncontendedEvaluator fast(t, true);
  detail::UncontendedEvaluator pass(t, false);
  FourRankBounds out;
  const auto derived = fast.lower_bound(router, parts, 0, &out.loads);
  const auto passed = pass.lower_bound(router, parts, 0);
  EXPECT_EQ(fast.derived_bounds(), 1U);
  if (!derived || !passed) throw std::logic_error("no bound");
  out.derived = *derived;
  out.pass = *passed;
  return out;
}

// By hand: a flat ring of 4 ranks on one switch whose host cables have latencies of 1, 2, 3 and
// 4 us, links at 2 GB/s, an allreduce of 4 MB: K = 6 steps of 1 MB pieces (500 us each; its
// reduce-scatter and all-gather one phase). Rank r's transfer takes d_r = lat_r + lat_{r+1} +
// 500 us: 3, 5, 7 and 5 us of latency. Forwarding on arrival, rank r's last arrival is the sum
// of d over itself and its 5 nearest predecessors: one lap (20 us + 2 ms) and d_r + d_{r-1}
// again, largest at r = 2 or 3 (12 us + 1 ms): 3 ms + 32 us. Waiting for their own sends:
// K · max d_r = 6 · 507 us. Both above the busiest link's 6 MB (3 ms) plus its 7 us route.
// With 4,000,002 bytes (chunks 0 and 1 of 1,000,001 bytes, 2 and 3 of 1,000,000) the least
// piece is still 1 MB, so the derivation is the same; rank 0's uplink carries every chunk but 0,
// then every chunk but 1: 6,000,002 bytes (3 ms + 1 ns, plus 7 us of route), still below. The
// pass drains some pieces one byte longer (500 ps at 2 GB/s): at most 6 steps' worth more.
TEST(Uncontended, DerivedRingBoundByHand) {
  const topo::Topology t = staggered_star();
  const topo::NodeId sw = 4;
  for (const std::int64_t size : {4'000'000, 4'000'002}) {
    for (bool forward : {true, false}) {
      SCOPED_TRACE(std::to_string(size) + (forward ? " forwarding" : " waiting"));
      const auto program = star_ring(Bytes(size), forward);
      ASSERT_EQ(program->transfer_count(), 24U);
      ASSERT_EQ(program->uniform_ring().empty(), size != 4'000'000);
      const FourRankBounds both = bound_four_ranks(t, *program);
      const detail::RunBound* bound = &both.derived;
      const std::vector<detail::LinkLoad>& loads = both.loads;
      const std::int64_t end =
          forward ? std::int64_t{3'032'000'000} : 6 * std::int64_t{507'000'000};
      EXPECT_EQ(bound->slowest.ps(),
                static_cast<std::int64_t>(static_cast<double>(end - 4 * 24) * (1 - 1e-6)));
      EXPECT_EQ(bound->events, 48U);
      const topo::LinkId uplink = *t.find_link(0, sw);
      const auto load = std::find_if(loads.begin(), loads.end(),
                                     [&](const detail::LinkLoad& l) { return l.link == uplink; });
      ASSERT_NE(load, loads.end());
      EXPECT_EQ(load->bytes, size == 4'000'000 ? 6'000'000.0 : 6'000'002.0);
      EXPECT_GE(both.pass.slowest, bound->slowest);
      EXPECT_LE(both.pass.slowest.ps() - bound->slowest.ps(), size == 4'000'000 ? 0 : 6 * 501);
    }
  }
}

// By hand, a two-level ring (levels {2, 2}) over devices 0, 1 under switch A and 2, 3 under B:
// host cables 2 GB/s and 1 us, the A-B cable 1 GB/s and 1 us. A 4 MB allreduce (one chunk):
// the level-0 reduce-scatter (1 step, 2 MB pieces: d0 = 2 us + 1 ms), the level-1 reduce-scatter
// and all-gather (one phase of 2 steps, 1 MB pieces over the A-B cable: d1 = 3 us + 1 ms), the
// level-0 all-gather (d0): the chain ends at 2·d0 + 2·d1 = 4,010 us, waiting for own sends or
// forwarding. The A-B cable carries 0 -> 2 and 1 -> 3 twice, 4 MB at 1 GB/s, from the level-1
// phase's first gates, 1,002 us in: 1,002 + 4,000 + 3 us of route = 5,005 us, above the chain,
// so the bound is that load term (less 4 ps per transfer and a relative 1e-6): it holds the
// phase's opening (from 0 it would be the chain's 4,010 us). The pass gives the same.
TEST(Uncontended, DerivedHierarchicalRingBoundByHand) {
  topo::Topology t("two switches", topo::Family::kExplicit);
  for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
  const auto a = t.add_switch("a", 1);
  const auto b = t.add_switch("b", 1);
  for (topo::DeviceId d = 0; d < 4; ++d) {
    t.add_link(d, d < 2 ? a : b, Bandwidth::bytes_per_second(2e9), Time::microseconds(1));
  }
  t.add_link(a, b, Bandwidth::bytes_per_second(1e9), Time::microseconds(1));
  for (bool forward : {false, true}) {
    SCOPED_TRACE(forward);
    CollectiveSpec spec{Operation::kAllReduce, Algorithm::kHierarchical, Bytes(4'000'000)};
    spec.levels = {2, 2};
    spec.forward_on_arrival = forward;
    const auto program = ring_program(spec, 4);
    ASSERT_EQ(program->transfer_count(), 16U);
    const FourRankBounds both = bound_four_ranks(t, *program);
    const detail::RunBound* bound = &both.derived;
    const std::vector<detail::LinkLoad>& loads = both.loads;
    EXPECT_EQ(bound->slowest.ps(),
              static_cast<std::int64_t>(static_cast<double>(5'005'000'000 - 4 * 16) * (1 - 1e-6)));
    EXPECT_EQ(bound->events, 32U);
    const topo::LinkId cable = *t.find_link(a, b);
    const auto load = std::find_if(loads.begin(), loads.end(),
                                   [&](const detail::LinkLoad& l) { return l.link == cable; });
    ASSERT_NE(load, loads.end());
    EXPECT_EQ(load->bytes, 4'000'000.0);
    EXPECT_EQ(load->min_latency, Time::microseconds(3));
    EXPECT_EQ(both.pass.slowest, bound->slowest);
  }
}

// Rings whose buffer does not split evenly (pieces one byte apart): the bound is derived from
// each phase's least piece, so it is at most the pass's and short of it by no more than K steps
// of one byte's drain over the slowest link (K: the ring's steps; + 1 ps of rounding per step),
// with the pass's events and link loads to the byte. Hierarchical rings of unequal pieces are
// left to the pass.
TEST(Uncontended, DerivedBoundsOfUnevenRingsStayWithinAByteADrainOfThePass) {
  int derived = 0;
  bound_rings_both_ways(
      ring_bound_topologies(), {4, 8},
      [](int n, int chunks, int channels) {
        return std::int64_t{n} * chunks * channels * 4096 + 2 * n + 1;
      },
      [&](const RingBoundsBothWays& both) {
        ASSERT_TRUE(both.program->uniform_ring().empty());
        if (both.algorithm == Algorithm::kHierarchical) {
          EXPECT_EQ(both.derived_groups, 0U);
          EXPECT_EQ(both.derived->slowest, both.pass->slowest);
          return;
        }
        EXPECT_EQ(both.derived_groups, static_cast<std::uint64_t>(both.groups));
        double slowest_rate = std::numeric_limits<double>::infinity();
        for (const topo::Link& link : both.where->topology.links()) {
          slowest_rate = std::min(slowest_rate, link.bandwidth.bytes_per_s());
        }
        const auto byte_drain = static_cast<std::int64_t>(std::ceil(1e12 / slowest_rate)) + 1;
        EXPECT_LE(both.derived->slowest, both.pass->slowest);
        EXPECT_LE(both.pass->slowest.ps() - both.derived->slowest.ps(),
                  static_cast<std::int64_t>(both.program->steps()) * byte_drain);
        ++derived;
      });
  EXPECT_GT(derived, 100);
}

// A ring that forwards on arrival (NCCL's) is derived when no rank's send starts before its
// previous one drained: on a star of equal links every d (latency + drain) exceeds every drain.
// The derivation equals the pass and the event simulation.
TEST(Uncontended, ForwardingRingsAreDerivedWhenEverySendFollowsTheLastOnesDrain) {
  const topo::Topology t = testing::star(8);
  for (const Operation op : {Operation::kAllReduce, Operation::kAllGather}) {
    SCOPED_TRACE(operation_name(op));
    CollectiveSpec spec{op, Algorithm::kRing, Bytes(8 * 65536)};
    spec.forward_on_arrival = true;
    const auto program = ring_program(spec, 8);
    ASSERT_FALSE(program->uniform_ring().empty());
    ASSERT_FALSE(program->waits_for_own_sends());
    const std::vector<topo::DeviceId> group = iota_group(8);
    const std::vector<detail::GroupProgram> parts{{program.get(), group}};
    const BothWays both = evaluate_both_ways(t, parts, 1);
    const auto& x = both.derived;
    const auto& y = both.pass;
    EXPECT_EQ(both.rings_derived, 1U);
    ASSERT_TRUE(x.has_value());
    ASSERT_TRUE(y.has_value());
    EXPECT_EQ(x->durations, y->durations);
    EXPECT_EQ(x->events, y->events);
    net::Simulator simulator(t);
    topo::Router router_c(t, 1);
    Execution run(simulator, router_c, program, group, 1);
    run.start();
    simulator.run();
    EXPECT_EQ(run.duration(), x->durations.front());
  }
}

// A forwarding ring over cables i -> i + 1 (100 ns, 100 GB/s, 10 ps per byte) whose cable out of
// rank 0 is slower. A quarter of the rate: pieces of 100,000 bytes drain in 1 us, 4 us out of
// rank 0, so rank 0's next piece arrives 100 ns + 1 us after its previous one started, before
// that one drained: the pass refuses the run, and so does the derivation (the event simulation
// answers). With pieces of 1,000 bytes (drains 10 and 40 ns, d 110 and 140 ns) every send
// follows the last one's drain: derived, and the all-gather's 3 steps end at the slowest window
// of 3 consecutive d's, 110 + 110 + 140 = 360 ns. Half the rate, at the boundary: pieces of
// 10,000 bytes give the other ranks d = 100 + 100 ns, exactly rank 0's drain of 200 ns, so its
// next send would start as the last one drains: refused (the pass admits only a later start);
// pieces of 9,999 bytes (d 199.99 ns against a drain of 199.98 ns) are admitted and derived: the
// all-gather (its K - 1 = 2 predecessors) ends at 299.98 + 2 x 199.99 = 699.96 ns, the allreduce
// (6 steps, every rank's predecessors) at one lap, 899.95 ns, plus the best 2 consecutive,
// 499.97 ns: 1,399.92 ns.
TEST(Uncontended, ForwardingRingsWhoseSendsQueueAreNotDerived) {
  const auto build = [](double slow) {
    topo::Topology t("ring4", topo::Family::kExplicit);
    for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
    const Time latency = Time::nanoseconds(100);
    for (topo::NodeId a = 0; a < 4; ++a) {
      const topo::NodeId b = (a + 1) % 4;
      t.add_link(a, b, a == 0 ? testing::kRate * slow : testing::kRate, latency, testing::kRate,
                 latency);
    }
    return t;
  };
  struct Case {
    double slow;
    Operation op;
    std::int64_t piece;
    std::int64_t expected_ps;  // 0: refused
  };
  const std::vector<Case> cases{
      {0.25, Operation::kAllGather, 100000, 0}, {0.25, Operation::kAllGather, 1000, 360000},
      {0.5, Operation::kAllGather, 10000, 0},   {0.5, Operation::kAllGather, 9999, 699960},
      {0.5, Operation::kAllReduce, 10000, 0},   {0.5, Operation::kAllReduce, 9999, 1399920}};
  const std::vector<topo::DeviceId> group{0, 1, 2, 3};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(operation_name(c.op)) + " slow " + std::to_string(c.slow) + " piece " +
                 std::to_string(c.piece));
    const topo::Topology t = build(c.slow);
    CollectiveSpec spec{c.op, Algorithm::kRing, Bytes(4 * c.piece)};
    spec.forward_on_arrival = true;
    const auto program = ring_program(spec, 4);
    const std::vector<detail::GroupProgram> parts{{program.get(), group}};
    const BothWays both = evaluate_both_ways(t, parts, 0);
    if (c.expected_ps == 0) {
      EXPECT_EQ(both.rings_derived, 0U);
      EXPECT_FALSE(both.derived.has_value());
      EXPECT_FALSE(both.pass.has_value());
      continue;
    }
    EXPECT_EQ(both.rings_derived, 1U);
    ASSERT_TRUE(both.derived.has_value());
    ASSERT_TRUE(both.pass.has_value());
    EXPECT_EQ(both.derived->durations, both.pass->durations);
    EXPECT_EQ(both.derived->durations.front(), Time::picoseconds(c.expected_ps));
  }
}

// A forwarding ring whose buffer does not split evenly: its chunks travel (each rank forwards
// the one it received), so a chain of sends carries one chunk's bytes all along. Rings of n
// cables i -> i + 1 (10 ps per byte) with the cable out of rank `slow` at half the rate:
// - n = 4, 100 ns, the cable out of rank 0 slow, 4,002 bytes in chunks of 1,001, 1,001, 1,000
//   and 1,000: d (latency + drain) is 110 ns for 1,000 bytes (120 ns out of rank 0) and 10 ps
//   more (20 out of rank 0) for 1,001. All-gather, 3 steps: position p sends chunk p - s in step
//   s, so the last step's chains end at ranks 0..3 carrying chunks 2, 3, 0, 1; rank 2's carries
//   chunk 0 (1,001 bytes) over ranks 0, 1, 2: 120,020 + 110,010 + 110,010 = 340,040 ps, the
//   slowest. Allreduce, 6 steps (chunk p - s - 1): one lap of every rank's d plus the 2 nearest,
//   chunks 2, 3, 0, 1 again; rank 0's and rank 1's windows hold rank 0 twice, 450,000 + 230,000 =
//   680,000 ps. With chunks of 10,000 and 9,999 bytes the drain out of rank 0 (200 ns) passes
//   the others' d (199.99 ns): not derived, and the pass refuses the run too (the event
//   simulation answers).
// - n = 5, 100 ns, the cable out of rank 4 slow, 5,001 bytes (chunk 0 of 1,001 bytes, the rest
//   1,000). All-gather (4 steps): chunk 0 ends at rank 3, over ranks 0..3, all fast: 440,040 ps;
//   the slowest chain holds rank 4 with 1,000 bytes: 450,000 ps (a chunk offset of the wrong sign
//   would end chunk 0 at rank 2, over rank 4: 450,050). Reduce-scatter: chunk 0 ends at rank 4,
//   over ranks 1..4: 450,050 ps (without the reduce-scatter's extra 1, at rank 3: 450,000).
// - n = 4, 40 ps, the cable out of rank 0 slow, an allreduce of 5 bytes (chunks 2, 1, 1, 1): the
//   least d (50 ps) exceeds the largest drain (40 ps), but not by 5 steps of the largest gap
//   between the drains (20 ps): not derived. The pass refuses the run too (rank 0's send of step
//   4 opens at 210 ps while its 2-byte send of step 3, started at 180 ps, drains until 220 ps).
// Every derived run equals the pass (durations, events, link sums) and the event simulation.
TEST(Uncontended, UnevenForwardingRingsAreDerivedFromTheChunksTheyCarry) {
  const auto ring = [](int n, topo::NodeId slow, Time latency) {
    topo::Topology t("ring", topo::Family::kExplicit);
    for (int i = 0; i < n; ++i) t.add_device("d" + std::to_string(i));
    for (topo::NodeId a = 0; a < static_cast<topo::NodeId>(n); ++a) {
      const topo::NodeId b = (a + 1) % static_cast<topo::NodeId>(n);
      t.add_link(a, b, a == slow ? testing::kRate * 0.5 : testing::kRate, latency, testing::kRate,
                 latency);
    }
    return t;
  };
  struct Case {
    int n;
    topo::NodeId slow;
    Time latency;
    Operation op;
    std::int64_t size;
    std::int64_t expected_ps;  // 0: not derived
    bool refused = false;      // by the pass too
  };
  const Time ns100 = Time::nanoseconds(100);
  const std::vector<Case> cases{{4, 0, ns100, Operation::kAllGather, 4002, 340040},
                                {4, 0, ns100, Operation::kAllReduce, 4002, 680000},
                                {4, 0, ns100, Operation::kAllGather, 39998, 0, true},
                                {4, 0, ns100, Operation::kAllReduce, 39998, 0, true},
                                {5, 4, ns100, Operation::kAllGather, 5001, 450000},
                                {5, 4, ns100, Operation::kReduceScatter, 5001, 450050},
                                {4, 0, Time::picoseconds(40), Operation::kAllReduce, 5, 0, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(operation_name(c.op)) + " n " + std::to_string(c.n) + " size " +
                 std::to_string(c.size));
    const topo::Topology t = ring(c.n, c.slow, c.latency);
    CollectiveSpec spec{c.op, Algorithm::kRing, Bytes(c.size)};
    spec.forward_on_arrival = true;
    const auto program = ring_program(spec, c.n);
    ASSERT_TRUE(program->uniform_ring().empty());
    const std::vector<topo::DeviceId> group = iota_group(c.n);
    const std::vector<detail::GroupProgram> parts{{program.get(), group}};
    const BothWays both = evaluate_both_ways(t, parts, 0);
    ASSERT_EQ(both.derived.has_value(), both.pass.has_value());
    if (c.expected_ps == 0) {
      EXPECT_EQ(both.rings_derived, 0U);
      EXPECT_EQ(both.pass.has_value(), !c.refused);
      if (both.pass) {
        EXPECT_EQ(both.derived->durations, both.pass->durations);
      }
      continue;
    }
    EXPECT_EQ(both.rings_derived, 1U);
    ASSERT_TRUE(both.derived.has_value());
    EXPECT_EQ(both.derived->durations.front(), Time::picoseconds(c.expected_ps));
    EXPECT_EQ(both.derived->durations, both.pass->durations);
    EXPECT_EQ(both.derived->events, both.pass->events);
    ASSERT_EQ(both.derived->links.size(), both.pass->links.size());
    for (std::size_t i = 0; i < both.pass->links.size(); ++i) {
      EXPECT_EQ(both.derived->links[i].link, both.pass->links[i].link);
      EXPECT_EQ(both.derived->links[i].bytes, both.pass->links[i].bytes);
      EXPECT_EQ(both.derived->links[i].busy, both.pass->links[i].busy);
    }
    net::Simulator simulator(t);
    topo::Router router_c(t, 0);
    Execution run(simulator, router_c, program, group, 0);
    run.start();
    simulator.run();
    EXPECT_EQ(run.duration(), Time::picoseconds(c.expected_ps));
    EXPECT_EQ(simulator.events_processed(), both.derived->events);
  }
}

// A ring over a link without bandwidth: not derived; the pass finds the link, and there is no
// bound.
TEST(Uncontended, DerivedRingBoundStepsAsideForALinkWithoutBandwidth) {
  const topo::Topology t = pair_without_bandwidth();
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000)};
  spec.forward_on_arrival = true;
  const auto program = ring_program(spec, 2);
  ASSERT_FALSE(program->uniform_ring().empty());
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t, true);
  const std::vector<topo::DeviceId> group{0, 1};
  const std::vector<detail::GroupProgram> parts{{program.get(), group}};
  EXPECT_FALSE(evaluator.lower_bound(router, parts, 0).has_value());
  EXPECT_EQ(evaluator.derived_bounds(), 0U);
}

// A link without bandwidth: no bound (the event simulation reports the link).
TEST(Uncontended, LowerBoundStepsAsideForALinkWithoutBandwidth) {
  const topo::Topology t = pair_without_bandwidth();
  const auto program =
      lower_program(CollectiveSpec{Operation::kSend, Algorithm::kDirect, Bytes(1000)}, 2);
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t);
  const std::vector<topo::DeviceId> group{0, 1};
  const std::vector<detail::GroupProgram> parts{{program.get(), group}};
  EXPECT_FALSE(evaluator.lower_bound(router, parts, 0).has_value());
}

// The bound's pass of a keyed group (`GroupProgram::key`) taken from an earlier group of the same
// program (`repeat_pass`): the pass's bound, events and link loads (bytes and shortest latencies;
// the openings show in the bound), to the picosecond and the byte, whether the groups are asked one
// per call (as the oracle's sets are) or all in one call. Trees, rings (not derived), direct
// all-to-alls and hierarchical rings; sizes that leave some pieces empty; groups placed alike
// (whose routes have the same rates and latencies) and not.
TEST(Uncontended, RepeatedPassesEqualTheirOwnPass) {
  std::vector<TopologyCase> cases = ring_bound_topologies();
  cases.push_back({"fat-tree k=4", fat_tree(4, 1)});
  cases.push_back(bundled("h100_rail_64.yaml"));
  std::uint64_t repeated = 0;
  int checked = 0;
  for (const TopologyCase& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (Algorithm a :
         {Algorithm::kTree, Algorithm::kRing, Algorithm::kDirect, Algorithm::kHierarchical}) {
      for (int n : {4, 8}) {
        for (std::int64_t size : {std::int64_t{3}, std::int64_t{1} << 20}) {
          const Operation op =
              a == Algorithm::kDirect ? Operation::kAllToAll : Operation::kAllReduce;
          CollectiveSpec spec{op, a, Bytes(size), 4};
          if (a == Algorithm::kHierarchical) spec.levels = {2, n / 2};
          const auto program = lower_program(spec, n);
          const int count = std::min(4, devices / n);
          // Strided groups, then the same groups shifted by one device (other routes).
          Groups groups = strided_groups(count, n, devices);
          for (int g = 0; g < count; ++g) {
            std::vector<topo::DeviceId> shifted;
            for (const topo::DeviceId d : groups[static_cast<std::size_t>(g)]) {
              shifted.push_back(static_cast<topo::DeviceId>((d + 1) % devices));
            }
            groups.push_back(shifted);
          }
          SCOPED_TRACE(c.name + " " + std::string(algorithm_name(a)) + " n=" + std::to_string(n) +
                       " size=" + std::to_string(size));
          const detail::ProgramKey key{.shape = 7, .size = static_cast<std::uint64_t>(size)};
          detail::UncontendedEvaluator keyed(c.topology, false);
          detail::UncontendedEvaluator plain(c.topology, false);
          topo::Router router_a(c.topology, 5);
          topo::Router router_b(c.topology, 5);
          std::vector<detail::GroupProgram> all_keyed;
          std::vector<detail::GroupProgram> all_plain;
          for (const auto& g : groups) {
            const detail::GroupProgram one_keyed{program.get(), g, key};
            const detail::GroupProgram one_plain{program.get(), g};
            all_keyed.push_back(one_keyed);
            all_plain.push_back(one_plain);
            std::vector<detail::LinkLoad> keyed_loads;
            std::vector<detail::LinkLoad> plain_loads;
            const auto got = keyed.lower_bound(router_a, std::span(&one_keyed, 1), 5, &keyed_loads);
            const auto want =
                plain.lower_bound(router_b, std::span(&one_plain, 1), 5, &plain_loads);
            ASSERT_TRUE(got.has_value());
            ASSERT_TRUE(want.has_value());
            EXPECT_EQ(got->slowest, want->slowest);
            EXPECT_EQ(got->events, want->events);
            expect_same_loads(keyed_loads, plain_loads);
            ++checked;
          }
          std::vector<detail::LinkLoad> keyed_loads;
          std::vector<detail::LinkLoad> plain_loads;
          const auto got = keyed.lower_bound(router_a, all_keyed, 5, &keyed_loads);
          const auto want = plain.lower_bound(router_b, all_plain, 5, &plain_loads);
          ASSERT_TRUE(got.has_value());
          ASSERT_TRUE(want.has_value());
          EXPECT_EQ(got->slowest, want->slowest);
          EXPECT_EQ(got->events, want->events);
          expect_same_loads(keyed_loads, plain_loads);
          EXPECT_EQ(plain.repeated_passes(), 0U);
          repeated += keyed.repeated_passes();
        }
      }
    }
  }
  EXPECT_GT(checked, 300);
  EXPECT_GT(repeated, 300U);
}

// By hand, on the star whose cables have latencies of 1, 2, 3 and 4 us: a send from rank 0 to 1
// over devices {0, 1} (3 us of route), again over {0, 1} (taken from the first), then over
// {1, 0} (3 us as well: taken, its bytes on the other cables) and {2, 3} (7 us: a pass of its
// own, 4 us later). Each bound is the pass's: the route's latency plus 1 MB at 2 GB/s (500 us),
// less the relative margin of 1e-6.
TEST(Uncontended, RepeatedPassesByHand) {
  const topo::Topology t = staggered_star();
  const auto program =
      lower_program(CollectiveSpec{Operation::kSend, Algorithm::kDirect, Bytes(1'000'000)}, 2);
  topo::Router router(t, 0);
  detail::UncontendedEvaluator evaluator(t, false);
  const detail::ProgramKey key{.shape = 1, .size = 1'000'000};
  const auto bound = [&](std::vector<topo::DeviceId> group, std::vector<detail::LinkLoad>& loads) {
    const std::vector<detail::GroupProgram> parts{{program.get(), group, key}};
    const auto b = evaluator.lower_bound(router, parts, 0, &loads);
    if (!b) throw std::logic_error("no bound");
    return b->slowest;
  };
  const auto expected = [](std::int64_t ps) {
    return Time::picoseconds(static_cast<std::int64_t>(static_cast<double>(ps) * (1 - 1e-6)));
  };
  std::vector<detail::LinkLoad> loads;
  EXPECT_EQ(bound({0, 1}, loads), expected(503'000'000 - 4));
  EXPECT_EQ(evaluator.repeated_passes(), 0U);
  EXPECT_EQ(bound({0, 1}, loads), expected(503'000'000 - 4));
  EXPECT_EQ(evaluator.repeated_passes(), 1U);
  EXPECT_EQ(bound({1, 0}, loads), expected(503'000'000 - 4));
  EXPECT_EQ(evaluator.repeated_passes(), 2U);
  ASSERT_EQ(loads.size(), 2U);  // device 1's up-link and device 0's down-link
  EXPECT_EQ(loads[0].bytes, 1e6);
  EXPECT_EQ(loads[1].bytes, 1e6);
  EXPECT_EQ(bound({2, 3}, loads), expected(507'000'000 - 4));
  EXPECT_EQ(evaluator.repeated_passes(), 2U);
}

// Four devices on one switch, cables of 1 us: devices 0 and 1 at 2 GB/s, 2 and 3 at 1 GB/s.
topo::Topology two_speed_star() {
  topo::Topology t("two-speed star", topo::Family::kExplicit);
  for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
  const auto sw = t.add_switch("s", 1);
  for (topo::DeviceId d = 0; d < 4; ++d) {
    t.add_link(d, sw, Bandwidth::bytes_per_second(d < 2 ? 2e9 : 1e9), Time::microseconds(1));
  }
  return t;
}

// A chain of three sends of 1 MB between ranks 0 and 1 (0 -> 1, 1 -> 0, 0 -> 1), one per step.
std::shared_ptr<const Program> chain_of_sends() {
  std::vector<Transfer> list{Transfer{0, 1, 0, 0, Bytes(1'000'000)},
                             Transfer{1, 0, 1, 0, Bytes(1'000'000)},
                             Transfer{0, 1, 2, 0, Bytes(1'000'000)}};
  return std::make_shared<const Schedule>(2, std::move(list));
}

// `lower_bound` of `groups` (each a group of `program` under `key`, or unkeyed) on `evaluator`.
Time bound_of(detail::UncontendedEvaluator& evaluator, const topo::Topology& t,
              const Program& program, const std::vector<std::vector<topo::DeviceId>>& groups,
              std::optional<detail::ProgramKey> key) {
  std::vector<detail::GroupProgram> parts;
  for (const auto& g : groups) parts.push_back({&program, g, key});
  topo::Router router(t, 0);
  const auto b = evaluator.lower_bound(router, parts, 0);
  if (!b) throw std::logic_error("no bound");
  return b->slowest;
}

// Routes of the same latency but another rate are not taken from the pass: the chain over the
// 1 GB/s devices takes 3 ms of drains, not the 1.5 ms of the first group's (whose link loads,
// recomputed, would not show it: each link carries 1 or 2 MB).
TEST(Uncontended, RepeatedPassesCompareRates) {
  const topo::Topology t = two_speed_star();
  const auto program = chain_of_sends();
  const detail::ProgramKey key{.shape = 3, .size = 3};
  detail::UncontendedEvaluator keyed(t, false);
  detail::UncontendedEvaluator plain(t, false);
  EXPECT_EQ(bound_of(keyed, t, *program, {{0, 1}}, key),
            bound_of(plain, t, *program, {{0, 1}}, std::nullopt));
  const Time slow = bound_of(keyed, t, *program, {{2, 3}}, key);
  EXPECT_EQ(slow, bound_of(plain, t, *program, {{2, 3}}, std::nullopt));
  EXPECT_GT(slow, Time::milliseconds(3));
  EXPECT_EQ(keyed.repeated_passes(), 0U);
}

// A pass recorded after another group of the same call keeps its own last arrival; a program
// under another key is another program; a pass that throws leaves nothing to take.
TEST(Uncontended, RepeatedPassesKeepTheirOwnGroupAndKey) {
  const topo::Topology t = staggered_star();
  const auto program = chain_of_sends();
  const detail::ProgramKey key{.shape = 3, .size = 3};
  detail::UncontendedEvaluator keyed(t, false);
  detail::UncontendedEvaluator plain(t, false);
  // {0, 1} recorded, then {2, 3} (other latencies) recorded in its place, then taken.
  (void)bound_of(keyed, t, *program, {{0, 1}, {2, 3}}, key);
  EXPECT_EQ(keyed.repeated_passes(), 0U);
  EXPECT_EQ(bound_of(keyed, t, *program, {{2, 3}}, key),
            bound_of(plain, t, *program, {{2, 3}}, std::nullopt));
  EXPECT_EQ(keyed.repeated_passes(), 1U);
  // Another key: not taken.
  (void)bound_of(keyed, t, *program, {{2, 3}}, detail::ProgramKey{.shape = 4, .size = 3});
  EXPECT_EQ(keyed.repeated_passes(), 1U);
  // A device out of range throws inside the pass; nothing of it is taken afterwards.
  detail::UncontendedEvaluator fresh(t, false);
  EXPECT_ANY_THROW((void)bound_of(fresh, t, *program, {{0, 9}}, key));
  EXPECT_EQ(bound_of(fresh, t, *program, {{0, 1}}, key),
            bound_of(plain, t, *program, {{0, 1}}, std::nullopt));
  EXPECT_EQ(fresh.repeated_passes(), 0U);
}

// An all-to-all meets a new destination at every step: its pass is not kept (a repeat would
// cost about the pass, the record 56 bytes per transfer), and the bound is the pass's.
TEST(Uncontended, AllToAllPassesAreNotKept) {
  const topo::Topology t = fat_tree(4, 1);
  const auto program =
      lower_program(CollectiveSpec{Operation::kAllToAll, Algorithm::kDirect, Bytes(1 << 20)}, 16);
  const detail::ProgramKey key{.shape = 5, .size = 1 << 20};
  std::vector<topo::DeviceId> group(16);
  std::iota(group.begin(), group.end(), 0);
  detail::UncontendedEvaluator keyed(t, false);
  detail::UncontendedEvaluator plain(t, false);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(bound_of(keyed, t, *program, {group}, key),
              bound_of(plain, t, *program, {group}, std::nullopt));
  }
  EXPECT_EQ(keyed.repeated_passes(), 0U);
}
}  // namespace
}  // namespace nest::coll
