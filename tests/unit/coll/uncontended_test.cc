// The contention-free evaluation of `simulate` against the event simulation: the same numbers to
// the picosecond and byte wherever it answers, and it steps aside wherever two flows would
// share a link.

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "coll_test_util.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/topo/generators.h"

namespace nest::coll {
namespace {

using testing::kRate;
using testing::simulate_both;
using Groups = std::vector<std::vector<topo::DeviceId>>;

std::vector<topo::DeviceId> iota_group(int n, topo::DeviceId first = 0) {
  std::vector<topo::DeviceId> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), first);
  return g;
}

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
  cases.push_back({"ring8", testing::ring(8)});
  cases.push_back({"fat-tree k=4", fat_tree(4, 1)});
  cases.push_back({"fat-tree k=4 2:1", fat_tree(4, 2)});
  cases.push_back({"rail 4x4", rail(4)});
  cases.push_back({"torus 4x2", torus({4, 2})});
  int contention_free = 0;
  int contended = 0;
  for (const Case& c : cases) {
    const int devices = static_cast<int>(c.topology.num_devices());
    for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
                         Operation::kAllToAll, Operation::kBroadcast, Operation::kSend}) {
      for (Algorithm a : algorithms_for(op)) {
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
