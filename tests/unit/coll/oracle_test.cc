// CollectiveOracle: answers equal a direct simulation, repeated queries hit the memo, shifted
// layouts that route identically hit the structural memo, and transfers are priced like flows.

#include "nest/coll/oracle.h"

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "coll_test_util.h"
#include "nest/coll/calibration.h"
#include "nest/coll/simulate.h"
#include "nest/core/error.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"

namespace nest::coll {
namespace {

using testing::kRate;
using testing::star;
using testing::to_ps;
using Groups = std::vector<std::vector<topo::DeviceId>>;

topo::Topology spine_leaf() {
  topo::SpineLeafParams p;
  p.leaves = 4;
  p.spines = 1;
  p.hosts_per_leaf = 4;
  p.host_bandwidth = kRate;
  p.host_latency = Time::nanoseconds(250);
  p.uplink_bandwidth = kRate * 2;
  p.uplink_latency = Time::nanoseconds(250);
  return topo::build_spine_leaf(p);
}

// Four rings of four devices, one per host of each leaf of `spine_leaf`: they share the leaves'
// up-links (contended).
Groups four_rings() {
  Groups g;
  for (topo::DeviceId i = 0; i < 4; ++i) g.push_back({i, 4 + i, 8 + i, 12 + i});
  return g;
}

Groups dp_groups(topo::DeviceId offset) {
  Groups g;
  for (topo::DeviceId i = 0; i < 2; ++i) g.push_back({offset + i, offset + 4 + i});
  return g;
}

TEST(Oracle, AnswersWhatTheSimulatorSays) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups groups = four_rings();
  const SimulationResult direct = simulate(t, spec, groups, {.seed = 5});
  const OracleAnswer a = oracle.collective(spec, groups);
  EXPECT_EQ(a.first, direct.durations[0]);
  EXPECT_EQ(a.slowest, direct.makespan);
  EXPECT_EQ(oracle.stats().simulations, 1U);
}

// One ring alone shares nothing (answered without events); four rings share the uplinks (the
// event simulation answers). Both equal the event simulation of `simulate`.
TEST(Oracle, ContentionFreeQueriesSkipTheEventsWithTheSameAnswer) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups four = four_rings();
  for (const Groups& groups : {Groups{four[0]}, four}) {
    const SimulationResult events = simulate(t, spec, groups, {.seed = 5, .events_only = true});
    const OracleAnswer a = oracle.collective(spec, groups);
    EXPECT_EQ(a.first, events.durations[0]);
    EXPECT_EQ(a.slowest, events.makespan);
  }
  EXPECT_EQ(oracle.stats().simulations, 2U);
  EXPECT_EQ(oracle.stats().contention_free, 1U);
}

// NCCL's two-channel ring over two GPUs of each 8-GPU node of a rail cluster: the NVLink hop
// into each InfiniBand hop is faster, so pieces queue on the NICs (not contention-free), but no
// two senders share a link: the private rings' run answers (coll/private_rings.h), with the
// event simulation's numbers; stopped at an event budget it throws as the simulator does, and
// stopped at a time to beat it rules the query out.
TEST(Oracle, PrivateRingsAnswerWhatTheSimulatorSays) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_64.yaml");
  const CollectiveSpec spec =
      testing::nccl_rail_rings(Operation::kAllGather, Bytes(std::int64_t{1} << 28));
  const std::vector<topo::DeviceId> group = testing::strided_devices(16, 4);
  const SimulationResult events =
      simulate(t, spec, Groups{group}, {.seed = 5, .events_only = true});
  CollectiveOracle oracle(t, 5);
  const OracleAnswer a = oracle.collective(spec, Groups{group});
  EXPECT_EQ(a.first, events.durations[0]);
  EXPECT_EQ(oracle.stats().simulations, 1U);
  EXPECT_EQ(oracle.stats().contention_free, 0U);
  EXPECT_EQ(oracle.stats().private_rings, 1U);
  EXPECT_EQ(oracle.stats().events, events.events);
  CollectiveOracle limited(t, 5);
  limited.limit_events(events.events / 2);
  EXPECT_THROW((void)limited.collective(spec, Groups{group}), EventLimitReached);
  EXPECT_GE(limited.stats().events, events.events / 2);
  EXPECT_LT(limited.stats().events, events.events);
  // Within a time 1 ps short of the answer: stopped there, its events counted as if it ran to
  // its end; within the answer itself: the answer.
  CollectiveOracle within(t, 5);
  EXPECT_FALSE(within.collective_within(spec, Groups{group}, a.slowest - Time::picoseconds(1)));
  EXPECT_EQ(within.stats().stopped, 1U);
  EXPECT_EQ(within.stats().events, events.events);
  const auto at = within.collective_within(spec, Groups{group}, a.slowest);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->slowest, a.slowest);
  EXPECT_EQ(within.stats().private_rings, 1U);
}

// An event limit stops a contended simulation where it is reached (the end of a timestamp): the
// query throws, nothing of it is memoized, the events it ran are counted, and once the limit is
// lifted the same query answers as on a fresh oracle. Answers known before keep answering.
TEST(Oracle, AnEventLimitStopsTheSimulationAndMemoizesNothing) {
  const topo::Topology t = spine_leaf();
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups four = four_rings();
  CollectiveOracle fresh(t, 5);
  const OracleAnswer expected = fresh.collective(spec, four);
  const std::uint64_t all = fresh.stats().events;
  ASSERT_GT(all, 100U);  // contended: event-simulated

  CollectiveOracle oracle(t, 5);
  const std::vector<topo::DeviceId> alone{0, 4, 8, 12};
  const Time known = oracle.collective(spec, alone);  // contention-free: no events
  oracle.limit_events(all / 2);
  EXPECT_THROW((void)oracle.collective(spec, four), EventLimitReached);
  const std::uint64_t spent = oracle.stats().events;
  EXPECT_GE(spent, all / 2);
  EXPECT_LT(spent, all);
  EXPECT_EQ(oracle.collective(spec, alone), known);  // memoized before: still answers
  // At the limit, a new simulation stops before its first event.
  EXPECT_THROW((void)oracle.collective(spec, four), EventLimitReached);
  EXPECT_EQ(oracle.stats().events, spent);
  oracle.limit_events(0);
  const OracleAnswer a = oracle.collective(spec, four);
  EXPECT_EQ(a.first, expected.first);
  EXPECT_EQ(a.slowest, expected.slowest);
  EXPECT_EQ(oracle.stats().events, spent + all);
}

TEST(Oracle, RepeatedQueriesHitTheMemo) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t);
  const CollectiveSpec spec{Operation::kAllGather, Algorithm::kRing, Bytes(64000)};
  const std::vector<topo::DeviceId> group{0, 4, 8, 12};
  const Time first = oracle.collective(spec, group);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(oracle.collective(spec, group), first);
  EXPECT_EQ(oracle.stats().queries, 11U);
  EXPECT_EQ(oracle.stats().exact_hits, 10U);
  EXPECT_EQ(oracle.stats().simulations, 1U);
  // Another size is another simulation.
  (void)oracle.collective(CollectiveSpec{Operation::kAllGather, Algorithm::kRing, Bytes(64001)},
                          group);
  EXPECT_EQ(oracle.stats().simulations, 2U);
}

// On one spine, the layout {0,4},{1,5} and its copy shifted by 2 ({2,6},{3,7}) use different
// links with the same rates in the same pattern: one simulation answers both. A layout whose
// pairs share an uplink differently ({0,1},{4,5}: intra-leaf) is simulated anew.
TEST(Oracle, ShiftedLayoutsWithIdenticalRoutesShareOneSimulation) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(80000)};
  const OracleAnswer base = oracle.collective(spec, dp_groups(0));
  const OracleAnswer shifted = oracle.collective(spec, dp_groups(2));
  EXPECT_EQ(shifted.slowest, base.slowest);
  EXPECT_EQ(oracle.stats().structural_hits, 1U);
  EXPECT_EQ(oracle.stats().simulations, 1U);
  // And the shared answer is the right one.
  EXPECT_EQ(shifted.slowest, simulate(t, spec, dp_groups(2)).makespan);
  (void)oracle.collective(spec, Groups{{0, 1}, {4, 5}});
  EXPECT_EQ(oracle.stats().simulations, 2U);
}

// A layout's routes are kept by its shapes and devices, its sizes added after: the same groups
// at another size, in another rank order, or under another algorithm are each priced as the
// event simulation says, never as the layout met first; the first query asked again hits the
// memo.
TEST(Oracle, ALayoutMetAgainIsPricedForItsSizeOrderAndAlgorithm) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  // Two hops inside a leaf per ring, and none once reordered.
  const Groups rings{{0, 1, 4, 5}, {8, 9, 12, 13}};
  const Groups reordered{{0, 4, 1, 5}, {8, 12, 9, 13}};
  const CollectiveSpec ring{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  CollectiveSpec other_size = ring;
  other_size.size = Bytes(250001);
  CollectiveSpec tree = ring;
  tree.algorithm = Algorithm::kTree;
  const OracleAnswer first = oracle.collective(ring, rings);
  EXPECT_EQ(first.slowest, simulate(t, ring, rings, {.seed = 5}).makespan);
  EXPECT_EQ(oracle.collective(other_size, rings).slowest,
            simulate(t, other_size, rings, {.seed = 5}).makespan);
  EXPECT_EQ(oracle.collective(ring, reordered).slowest,
            simulate(t, ring, reordered, {.seed = 5}).makespan);
  EXPECT_EQ(oracle.collective(tree, rings).slowest, simulate(t, tree, rings, {.seed = 5}).makespan);
  EXPECT_EQ(oracle.stats().simulations, 4U);
  EXPECT_EQ(oracle.stats().structural_hits, 4U);  // each query's second ring, apart from its first
  EXPECT_EQ(oracle.collective(ring, rings).slowest, first.slowest);
  EXPECT_EQ(oracle.stats().exact_hits, 1U);
  EXPECT_EQ(oracle.stats().lowered, 3U);  // ring at two sizes, tree: routing kept lowers nothing
}

// The layout's key holds every device, two to a word and the odd one last: groups of three
// that differ only in their last device (in the first leaf, or behind the spine) are each priced
// as the event simulation says.
TEST(Oracle, ALayoutsLastDeviceDecidesItsRoutes) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const CollectiveSpec ring{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups near{{0, 1, 2}};
  const Groups far{{0, 1, 8}};
  const Time in_leaf = oracle.collective(ring, near).slowest;
  const Time across = oracle.collective(ring, far).slowest;
  EXPECT_EQ(in_leaf, simulate(t, ring, near, {.seed = 5}).makespan);
  EXPECT_EQ(across, simulate(t, ring, far, {.seed = 5}).makespan);
  EXPECT_GT(across, in_leaf);
}

// `clear` forgets the layouts' routes too: a structure answered by another oracle's facts is
// routed again after it, and its program lowered again (as before the routes were kept).
TEST(Oracle, ClearForgetsTheLayoutsRoutes) {
  const topo::Topology t = spine_leaf();
  // One group (several are routed again by `link_components` anyway) whose two trees share
  // its leaves' up-links: simulated with events, and published.
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes(1000003)};
  const Groups trees{{0, 4, 8, 12}};
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, 5);
  publisher.publish_to(facts);
  const OracleAnswer published = publisher.collective(spec, trees);
  ASSERT_EQ(facts->size(), 1U);
  CollectiveOracle reader(t, 5);
  reader.consult(facts);
  EXPECT_EQ(reader.collective(spec, trees).slowest, published.slowest);
  EXPECT_EQ(reader.stats().consulted, 1U);
  EXPECT_EQ(reader.stats().lowered, 1U);  // routing the structure lowered its program
  reader.clear();
  EXPECT_EQ(reader.collective(spec, trees).slowest, published.slowest);
  EXPECT_EQ(reader.stats().consulted, 2U);
  EXPECT_EQ(reader.stats().lowered, 2U);
  EXPECT_EQ(reader.stats().simulations, 0U);
}

// Groups inside their own leaf share no link: 1, 2 and 4 such groups (one per leaf) are one
// simulation, each answer the direct simulation's. Groups across leaves share the spine: the
// query is simulated whole, as `simulate` does.
TEST(Oracle, LinkDisjointGroupsArePricedSetBySet) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  Groups leaves;
  for (topo::DeviceId l = 0; l < 4; ++l) leaves.push_back({4 * l, 4 * l + 1, 4 * l + 2, 4 * l + 3});
  for (std::size_t n : {1U, 2U, 4U}) {
    const Groups groups(leaves.begin(), leaves.begin() + static_cast<std::ptrdiff_t>(n));
    const SimulationResult direct = simulate(t, spec, groups, {.seed = 5});
    const OracleAnswer a = oracle.collective(spec, groups);
    EXPECT_EQ(a.first, direct.durations[0]) << n << " groups";
    EXPECT_EQ(a.slowest, direct.makespan) << n << " groups";
  }
  EXPECT_EQ(oracle.stats().simulations, 1U);
  EXPECT_EQ(oracle.stats().structural_hits, 0U + 2U + 4U);  // every set after the first

  // Two leaf-local groups and two that cross the spine: two sets, two new simulations.
  const Groups mixed{{0, 1}, {2, 6}, {3, 7}, {12, 13}};
  const SimulationResult direct = simulate(t, spec, mixed, {.seed = 5});
  const OracleAnswer a = oracle.collective(spec, mixed);
  EXPECT_EQ(a.first, direct.durations[0]);
  EXPECT_EQ(a.slowest, direct.makespan);
}

// A layout's link-connected sets are kept by its devices (and shapes), not by its group count:
// three leaf-local pairs are three sets; three pairs across the spine, asked next with as many
// groups of the same shape, share the first leaf's up-link (three flows on twice a host's rate)
// and are one set. Each answer, and each at another size (the kept sets), is the direct
// simulation's.
TEST(Oracle, ALayoutsLinkSetsAreItsOwn) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const Groups local{{0, 1}, {4, 5}, {8, 9}};
  const Groups across{{0, 4}, {1, 5}, {2, 6}};
  for (const std::int64_t size : {1000003, 250001}) {
    const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(size)};
    for (const Groups* groups : {&local, &across}) {
      const SimulationResult direct = simulate(t, spec, *groups, {.seed = 5});
      const OracleAnswer a = oracle.collective(spec, *groups);
      EXPECT_EQ(a.first, direct.durations[0]) << size;
      EXPECT_EQ(a.slowest, direct.makespan) << size;
    }
  }
  // The pairs across the spine are slower than alone: their sets are not the local pairs'.
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  EXPECT_GT(oracle.collective(spec, across).slowest,
            oracle.collective(spec, Groups{{0, 4}}).slowest);
}

// The groups of a layout run one program (lowered once for their spec, size and group size),
// and later queries of that kind reuse it: four contended trees, then four other groups of four,
// lower one program; another size lowers a second. Each answer is the direct simulation's.
TEST(Oracle, GroupsOfOneKindShareOneLoweredProgram) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t, 5);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kTree, Bytes(1000003)};
  const Groups rings = four_rings();
  const Groups other{{0, 5, 10, 15}, {1, 6, 11, 12}, {2, 7, 8, 13}, {3, 4, 9, 14}};
  for (const Groups& groups : {rings, other}) {
    const SimulationResult direct = simulate(t, spec, groups, {.seed = 5});
    const OracleAnswer a = oracle.collective(spec, groups);
    EXPECT_EQ(a.first, direct.durations[0]);
    EXPECT_EQ(a.slowest, direct.makespan);
  }
  EXPECT_EQ(oracle.stats().lowered, 1U);
  CollectiveSpec half = spec;
  half.size = Bytes(500001);
  EXPECT_EQ(oracle.collective(half, rings).slowest, simulate(t, half, rings, {.seed = 5}).makespan);
  EXPECT_EQ(oracle.stats().lowered, 2U);
  oracle.clear();
  (void)oracle.collective(spec, rings);
  EXPECT_EQ(oracle.stats().lowered, 3U);  // `clear` drops the programs too
}

TEST(Oracle, TrivialQueriesCostNothing) {
  const topo::Topology t = star(4);
  CollectiveOracle oracle(t);
  EXPECT_EQ(oracle.collective(CollectiveSpec{Operation::kAllReduce, Algorithm::kRing, Bytes(0)},
                              std::vector<topo::DeviceId>{0, 1}),
            Time::zero());
  EXPECT_EQ(oracle.collective(CollectiveSpec{Operation::kAllReduce, Algorithm::kRing, Bytes(9)},
                              std::vector<topo::DeviceId>{2}),
            Time::zero());
  const std::vector<topo::DeviceId> same{1, 2};
  EXPECT_EQ(oracle.transfers(Bytes(100), same, same), Time::zero());
  EXPECT_EQ(oracle.stats().trivial, 3U);
  EXPECT_EQ(oracle.stats().simulations, 0U);
}

// Stage-to-stage sends on the star: disjoint pairs run at full rate (a + S/B); two sends out of
// one device share its uplink (a + 2S/B).
TEST(Oracle, TransfersArePricedAsConcurrentFlows) {
  const topo::Topology t = star(6);
  CollectiveOracle oracle(t);
  const Bytes size(50000);
  const double a = 1e-6;
  const double sb = 50000 / kRate.bytes_per_s();
  EXPECT_EQ(
      oracle.transfers(size, std::vector<topo::DeviceId>{0, 1}, std::vector<topo::DeviceId>{2, 3})
          .ps(),
      to_ps(a + sb));
  EXPECT_EQ(
      oracle.transfers(size, std::vector<topo::DeviceId>{0, 0}, std::vector<topo::DeviceId>{4, 5})
          .ps(),
      to_ps(a + 2 * sb));
  // Shifted pairs on the symmetric star: structural hit.
  (void)oracle.transfers(size, std::vector<topo::DeviceId>{3, 4},
                         std::vector<topo::DeviceId>{5, 0});
  EXPECT_EQ(oracle.stats().structural_hits, 1U);
  EXPECT_THROW(
      (void)oracle.transfers(size, std::vector<topo::DeviceId>{0}, std::vector<topo::DeviceId>{9}),
      Error);
}

// Grouped transfers on the 4-leaf spine-leaf (hosts 0-3 on leaf 0, 4-7 on leaf 1, ...; host
// links at B, up-links at 2B, 250 ns a link): each group waits for its own pair, and alike groups
// (routes of the same links' rates) are priced at their mean. Inside leaf 0, 0->1 and 0->2 share
// host 0's link: 0.5 us + 2S/B each. Across leaves, 4->8 and 4->9 share host 4's link (2S/B
// each) while 5->12 runs at B (S/B) beside them on leaf 1's 2B up-link: 1 us + 5/3 S/B on
// average, 1 us + 2S/B for the slowest. With S/B = 40 us the leaf-0 class is the slower one.
TEST(Oracle, GroupedTransfersWaitForTheirOwnPairs) {
  const topo::Topology t = spine_leaf();
  CollectiveOracle oracle(t);
  const Bytes size(4000000);  // S/B = 40 us at 100 GB/s
  const double sb = 4e6 / kRate.bytes_per_s();
  const std::vector<topo::DeviceId> from{0, 0, 4, 4, 5};
  const std::vector<topo::DeviceId> to{1, 2, 8, 9, 12};
  const std::int64_t cross_pair = to_ps(1e-6 + 2 * sb);
  const std::int64_t cross_alone = to_ps(1e-6 + sb);
  EXPECT_EQ(oracle.transfers(size, from, to).ps(), cross_pair);
  EXPECT_EQ(oracle.transfers(size, from, to, 5).ps(), cross_pair);  // one group: the same
  EXPECT_EQ(oracle.transfers(size, from, to, 1).ps(), to_ps(0.5e-6 + 2 * sb));
  // Only the cross-leaf groups: their class's mean.
  const std::vector<topo::DeviceId> from3{4, 4, 5};
  const std::vector<topo::DeviceId> to3{8, 9, 12};
  EXPECT_EQ(oracle.transfers(size, from3, to3, 1).ps(), (2 * cross_pair + cross_alone) / 3);
  // Groups that share nothing (one pair per leaf): each alone, the slowest's wait.
  const std::vector<topo::DeviceId> apart_from{0, 4, 8};
  const std::vector<topo::DeviceId> apart_to{1, 12, 9};
  EXPECT_EQ(oracle.transfers(size, apart_from, apart_to, 1),
            oracle.transfers(size, apart_from, apart_to));
  EXPECT_EQ(oracle.transfers(size, apart_from, apart_to, 1).ps(), cross_alone);
  EXPECT_THROW((void)oracle.transfers(size, from, to, 2), Error);  // 5 pairs in groups of 2
}

TEST(Oracle, BadGroupsAreInputErrors) {
  const topo::Topology t = star(4);
  CollectiveOracle oracle(t);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(100)};
  try {
    (void)oracle.collective(spec, std::vector<topo::DeviceId>{0, 7});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(std::string(e.what()),
              "--group: device out of range (got \"7\"; expected devices 0-3)");
  }
  EXPECT_THROW((void)oracle.collective(spec, Groups{{0, 1}, {1, 2}}), Error);
}

TEST(Oracle, ClearForgetsAnswers) {
  const topo::Topology t = star(4);
  CollectiveOracle oracle(t);
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(100)};
  const std::vector<topo::DeviceId> g{0, 1, 2};
  (void)oracle.collective(spec, g);
  oracle.clear();
  (void)oracle.collective(spec, g);
  EXPECT_EQ(oracle.stats().simulations, 2U);
  // Grouped transfers too: 0->1 and 0->2 share device 0's link, two groups of one pair.
  const std::vector<topo::DeviceId> from{0, 0};
  const std::vector<topo::DeviceId> to{1, 2};
  (void)oracle.transfers(Bytes(100), from, to, 1);
  oracle.clear();
  (void)oracle.transfers(Bytes(100), from, to, 1);
  EXPECT_EQ(oracle.stats().simulations, 4U);
  EXPECT_EQ(oracle.stats().structural_hits, 0U);
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// The bundled 1,024-GPU rail cluster at 4:1, under its NCCL model.
topo::Topology rail_4to1() {
  return topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_1024_4to1.yaml");
}

// On the 8-GPU nodes of a rail cluster: one group per rail of `nodes` nodes `stride` nodes apart
// (node n of rail r is device 8n + r).
Groups rail_groups(topo::DeviceId nodes, topo::DeviceId stride) {
  Groups g;
  for (topo::DeviceId r = 0; r < 8; ++r) {
    g.emplace_back();
    for (topo::DeviceId n = 0; n < nodes; ++n) g.back().push_back(n * stride * 8 + r);
  }
  return g;
}

// The data-parallel groups of 4 pipeline stages of one node each, 8 replicas `stride` nodes
// apart (stage s of replica n on node s + stride·n), one group per stage and rail.
Groups stage_groups(topo::DeviceId stride) {
  Groups g;
  for (topo::DeviceId s = 0; s < 4; ++s) {
    for (topo::DeviceId r = 0; r < 8; ++r) {
      g.emplace_back();
      for (topo::DeviceId n = 0; n < 8; ++n) g.back().push_back((s + stride * n) * 8 + r);
    }
  }
  return g;
}

// `fastest` simulates a candidate only when its lower bound does not already exceed the fastest
// so far: its choice must be the one of every candidate simulated. On the bundled 1,024-GPU
// rail cluster at 4:1 (its NCCL model; ring, tree and hierarchical compete for groups across
// nodes): data-parallel groups of one rail, of all 8 rails at once, and the several stages of
// a pipeline reducing together, from 1 MiB to 1 GiB; each answer against a fresh oracle's
// `priced` for every tuner candidate (the same rule: slowest, then first, then the earlier).
TEST(Oracle, FastestRulesOutCandidatesByTheirBoundWithTheSameChoice) {
  const topo::Topology t = rail_4to1();
  const CalibratedNetwork network(t);
  std::vector<Groups> layouts;
  // 16 nodes x rail 0; 8 rails x 16 nodes; 4 stages (node blocks of 32) x 8 rails x 8 nodes.
  Groups one{{}};
  for (topo::DeviceId n = 0; n < 16; ++n) one[0].push_back(n * 8);
  layouts.push_back(one);
  layouts.push_back(rail_groups(16, 1));
  layouts.push_back(stage_groups(4));
  CollectiveOracle oracle(t, 1);
  // Every candidate simulated, in the tuner's order on one oracle: the events it processes are
  // what `oracle` must count (an event budget spends the same).
  CollectiveOracle every(t, 1);
  int compared = 0;
  for (const Groups& groups : layouts) {
    for (const Operation op : {Operation::kAllReduce, Operation::kReduceScatter}) {
      for (const Bytes size : {Bytes::mebibytes(1), Bytes::mebibytes(64), Bytes::gibibytes(1)}) {
        SCOPED_TRACE(std::string(operation_name(op)) + " groups=" + std::to_string(groups.size()) +
                     " size=" + std::to_string(size.count()));
        CollectiveSpec spec{op, Algorithm::kRing, size};
        spec.chunks = 0;
        spec.channels = 0;
        const OracleChoice got = oracle.fastest(spec, groups);
        std::optional<OracleChoice> best;
        for (const Algorithm a : tuner_candidates(network, op, size, groups.front())) {
          CollectiveOracle fresh(t, 1);
          const CollectiveSpec c = tuner_candidate(spec, a);
          OracleChoice x;
          try {
            x = fresh.priced(c, groups);
            (void)every.priced(c, groups);
          } catch (const Error& e) {
            ASSERT_EQ(e.kind(), ErrorKind::kInput);
            continue;
          }
          if (!best || x.answer.slowest < best->answer.slowest ||
              (x.answer.slowest == best->answer.slowest && x.answer.first < best->answer.first)) {
            best = x;
          }
        }
        ASSERT_TRUE(best.has_value());
        EXPECT_EQ(got.algorithm, best->algorithm);
        EXPECT_EQ(got.protocol, best->protocol);
        EXPECT_EQ(got.channels, best->channels);
        EXPECT_EQ(got.answer.slowest, best->answer.slowest);
        EXPECT_EQ(got.answer.first, best->answer.first);
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 18);
  // Some candidates were ruled out without a simulation (without them the test proves little),
  // and their events are counted as if simulated. (Candidates stopped part way: the tests of
  // times to beat below.)
  EXPECT_GT(oracle.stats().bounded - oracle.stats().stopped, 4U);  // without a simulation
  EXPECT_GT(oracle.stats().avoided_events, 0U);
  EXPECT_EQ(oracle.stats().events, every.stats().events);
  EXPECT_EQ(every.stats().avoided_events, 0U);
}

// An allreduce of `size` as the tuner asks it (chunks and channels left to `resolve`).
CollectiveSpec tuned_allreduce(Bytes size) {
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, size};
  spec.chunks = 0;
  spec.channels = 0;
  return spec;
}

// `fastest` prices its candidates in the order of their event-free bounds, not the tuner's: on
// `spine_leaf`, a 64 KiB allreduce over the four rings of `four_rings` (contended), where the
// double binary tree has the smaller bound and is faster than the ring, the tuner's first. The
// tree runs first and the ring, priced against its time, is ruled out part way (in the tuner's
// order it ran to its end first): the choice is the tree's, as with both run to their ends, and
// the ring's own answer afterwards costs its simulation.
TEST(Oracle, FastestRunsItsCandidatesInTheOrderOfTheirBounds) {
  const topo::Topology t = spine_leaf();
  const Groups four = four_rings();
  const CollectiveSpec spec = tuned_allreduce(Bytes::kibibytes(64));
  const CalibratedNetwork network(t);
  ASSERT_EQ(tuner_candidates(network, spec.op, spec.size, four.front()).front(), Algorithm::kRing);
  const CollectiveSpec ring = tuner_candidate(spec, Algorithm::kRing);
  const CollectiveSpec tree = tuner_candidate(spec, Algorithm::kTree);
  const OracleChoice by_tree = CollectiveOracle(t, 1).priced(tree, four);
  const OracleChoice by_ring = CollectiveOracle(t, 1).priced(ring, four);
  CollectiveOracle ring_alone(t, 1);
  (void)ring_alone.priced(ring, four);
  ASSERT_EQ(ring_alone.stats().contention_free, 0U);  // the ring is event-simulated
  ASSERT_LT(CollectiveOracle(t, 1).lower_bound(tree, four),
            CollectiveOracle(t, 1).lower_bound(ring, four));
  ASSERT_LT(by_tree.answer.slowest, by_ring.answer.slowest);

  CollectiveOracle o(t, 1);
  const OracleChoice got = o.fastest(spec, four);
  EXPECT_EQ(got.algorithm, Algorithm::kTree);
  EXPECT_EQ(got.answer.slowest, by_tree.answer.slowest);
  EXPECT_EQ(got.answer.first, by_tree.answer.first);
  EXPECT_EQ(o.stats().bounded, 1U);  // the ring, ruled out part way
  EXPECT_EQ(o.stats().stopped, 1U);
  const std::uint64_t simulated = o.stats().simulations;
  EXPECT_EQ(o.priced(ring, four).answer.slowest, by_ring.answer.slowest);
  EXPECT_EQ(o.stats().simulations, simulated + 1);  // the ring's run, now to its end
}

// A candidate answered for free goes first, whatever its bound: on the same rings at 256 KiB the
// ring wins; once the oracle holds its answer, `fastest` prices it first and the tree (whose
// bound is below the ring's time, and its time above) runs only until it loses. By bounds alone
// the tree would run to its end first.
TEST(Oracle, FastestPricesACandidateItKnowsFirst) {
  const topo::Topology t = spine_leaf();
  const Groups four = four_rings();
  const CollectiveSpec spec = tuned_allreduce(Bytes::kibibytes(256));
  const CollectiveSpec ring = tuner_candidate(spec, Algorithm::kRing);
  const CollectiveSpec tree = tuner_candidate(spec, Algorithm::kTree);
  const OracleChoice by_tree = CollectiveOracle(t, 1).priced(tree, four);
  CollectiveOracle o(t, 1);
  const OracleChoice by_ring = o.priced(ring, four);
  ASSERT_LT(by_ring.answer.slowest, by_tree.answer.slowest);
  ASSERT_LT(CollectiveOracle(t, 1).lower_bound(tree, four), by_ring.answer.slowest);
  ASSERT_GT(o.stats().simulations, o.stats().contention_free);  // the ring's run

  const OracleStats before = o.stats();
  const OracleChoice got = o.fastest(spec, four);
  EXPECT_EQ(got.algorithm, Algorithm::kRing);
  EXPECT_EQ(got.answer.slowest, by_ring.answer.slowest);
  EXPECT_EQ(got.answer.first, by_ring.answer.first);
  EXPECT_EQ(o.stats().stopped - before.stopped, 1U);  // the tree, once it had lost
  EXPECT_EQ(o.stats().simulations, before.simulations);
}

// A query with a time to beat: the answer when it is no later (equal to a fresh oracle's), else
// nullopt from a simulation stopped at that time (fewer events run, as many counted), which
// raises the structure's bound past it; the query answers in full afterwards. Four rings over
// shared uplinks (contended).
TEST(Oracle, AQueryWithinATimeStopsItsSimulationThere) {
  const topo::Topology t = spine_leaf();
  const CollectiveSpec spec{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups four = four_rings();
  CollectiveOracle fresh(t, 5);
  const OracleAnswer exact = fresh.collective(spec, four);
  const std::uint64_t all = fresh.stats().events;
  ASSERT_GT(all, 100U);

  CollectiveOracle oracle(t, 5);
  const Time early = exact.slowest - Time::microseconds(1);
  EXPECT_FALSE(oracle.collective_within(spec, four, early).has_value());
  EXPECT_EQ(oracle.stats().stopped, 1U);
  EXPECT_EQ(oracle.stats().events, all);  // counted as if it ran to its end
  EXPECT_LT(oracle.stats().avoided_events, all);
  EXPECT_GT(oracle.stats().avoided_events, 0U);
  EXPECT_GT(oracle.lower_bound(spec, four), early);
  EXPECT_LE(oracle.lower_bound(spec, four), exact.slowest);
  // Ruled out again by the raised bound, with nothing more run or counted.
  EXPECT_FALSE(oracle.collective_within(spec, four, early).has_value());
  EXPECT_EQ(oracle.stats().stopped, 1U);
  EXPECT_EQ(oracle.stats().events, all);
  const auto at = oracle.collective_within(spec, four, exact.slowest);
  ASSERT_TRUE(at.has_value());
  EXPECT_EQ(at->slowest, exact.slowest);
  EXPECT_EQ(at->first, exact.first);
  EXPECT_EQ(oracle.stats().events, all);  // counted once
  EXPECT_EQ(oracle.stats().avoided_events, 0U);
  EXPECT_EQ(oracle.collective(spec, four).slowest, exact.slowest);

  // The tuner within a time: its choice when the time is no earlier, else nullopt.
  CollectiveSpec tuned = spec;
  tuned.chunks = 0;
  tuned.channels = 0;
  CollectiveOracle a(t, 5);
  const OracleChoice best = a.fastest(tuned, four);
  CollectiveOracle b(t, 5);
  EXPECT_FALSE(b.fastest_within(tuned, four, best.answer.slowest - Time::picoseconds(1)));
  const auto same = b.fastest_within(tuned, four, best.answer.slowest);
  ASSERT_TRUE(same.has_value());
  EXPECT_EQ(same->algorithm, best.algorithm);
  EXPECT_EQ(same->answer.slowest, best.answer.slowest);
}

// The event-free bounds the search prunes with: never above the answer, computed without an
// event (contended structures are bounded, contention-free ones answered), and the answer itself
// once the oracle knows it. The 4:1 rail cluster under its NCCL model (the tuner's candidates:
// rings inside a leaf and across leaves, answered without events, trees simulated) and the
// spine-leaf network above (four rings that share the uplinks: contended).
TEST(Oracle, LowerBoundsRunNoEventsNeverExceedTheAnswerAndEqualItOnceKnown) {
  const topo::Topology rail = rail_4to1();
  const topo::Topology shared = spine_leaf();
  struct Case {
    const topo::Topology* topology;
    Groups groups;
  };
  std::vector<Case> cases;
  Groups leaf{{}};
  for (topo::DeviceId n = 0; n < 16; ++n) leaf[0].push_back(n * 8);
  cases.push_back({&rail, leaf});
  Groups rails;
  for (topo::DeviceId r = 0; r < 8; ++r) {
    rails.emplace_back();
    for (topo::DeviceId n = 0; n < 16; ++n) rails.back().push_back(n * 32 + r);
  }
  cases.push_back({&rail, rails});
  const Groups four = four_rings();
  cases.push_back({&shared, four});
  int contended = 0;
  int answered = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const topo::Topology& t = *cases[c].topology;
    const Groups& groups = cases[c].groups;
    for (const Operation op : {Operation::kAllReduce, Operation::kAllGather}) {
      for (const Bytes size : {Bytes::mebibytes(1), Bytes::mebibytes(256)}) {
        SCOPED_TRACE(std::string(operation_name(op)) + " case " + std::to_string(c) + " size " +
                     std::to_string(size.count()));
        CollectiveSpec tuned{op, Algorithm::kRing, size};
        tuned.chunks = 0;
        tuned.channels = 0;
        const CollectiveSpec ring = tuner_candidate(tuned, Algorithm::kRing);
        CollectiveOracle oracle(t, 1);
        const Time ring_bound = oracle.lower_bound(ring, groups);
        const Time fastest_bound = oracle.fastest_lower_bound(tuned, groups);
        EXPECT_EQ(oracle.stats().events, 0U);
        const auto candidates = tuner_candidates(CalibratedNetwork(t), op, size, groups.front());
        EXPECT_EQ(oracle.stats().lower_bounds, 1U + candidates.size());
        const std::uint64_t simulations = oracle.stats().simulations;
        const Time ring_time = oracle.priced(ring, groups).answer.slowest;
        EXPECT_LE(ring_bound, ring_time);
        EXPECT_LE(fastest_bound, ring_bound);
        if (oracle.stats().simulations == simulations) {
          // Contention-free: the bound was the answer, and the query needs no new simulation.
          EXPECT_EQ(ring_bound, ring_time);
          ++answered;
        } else {
          EXPECT_GT(oracle.stats().events, 0U);
          EXPECT_LT(ring_bound, ring_time);
          ++contended;
        }
        EXPECT_EQ(oracle.lower_bound(ring, groups), ring_time);  // memoized: the answer
        EXPECT_LE(fastest_bound, oracle.fastest(tuned, groups).answer.slowest);
      }
    }
  }
  EXPECT_EQ(answered, 8);   // the rings on the rail cluster
  EXPECT_EQ(contended, 4);  // the four rings over shared uplinks
}

// The contended double binary tree of the progress and facts tests below: 64 MiB in 64 chunks
// (thousands of transfers, enough for the progress check), run over all 16 hosts of `spine_leaf`,
// whose flows share the leaves' uplinks.
CollectiveSpec contended_tree() {
  return {Operation::kAllReduce, Algorithm::kTree, Bytes(std::int64_t{1} << 26), 64};
}
std::vector<topo::DeviceId> every_host(topo::DeviceId n) {
  std::vector<topo::DeviceId> all(n);
  std::iota(all.begin(), all.end(), 0);
  return all;
}

// A contended run stopped by its links' progress: a double binary tree over all 16 hosts of
// `spine_leaf` in 64 chunks (thousands of transfers, enough for the check), whose flows share
// the leaves' uplinks. Within a time its event-free bound does not rule out, the bytes its
// links still carry show that it ends later before its clock gets there: stopped by progress,
// nullopt, its events counted as if it ran to its end (a quarter of the way between the bound
// and the end, most of them not run). Not when an event budget does not cover the whole run:
// it then runs to the time as before (and would throw where the budget ran out). For times to beat
// around its end, the answer is a fresh oracle's exactly when the time is no earlier than it, else
// nullopt: stopping early never changes an answer.
TEST(Oracle, AQueryWithinATimeStopsOnceItsLinksShowItLoses) {
  const topo::Topology t = spine_leaf();
  const CollectiveSpec spec = contended_tree();
  const Groups one{every_host(16)};
  CollectiveOracle fresh(t, 5);
  const OracleAnswer exact = fresh.collective(spec, one);
  const std::uint64_t events = fresh.stats().events;
  ASSERT_EQ(fresh.stats().contention_free, 0U);  // event-simulated
  ASSERT_GT(events, 2048U);                      // over 1,024 transfers: checked

  // Times to beat between its event-free bound and its end: the bound does not rule them out,
  // the run does, by progress from a quarter of the way on.
  const Time lower = CollectiveOracle(t, 5).lower_bound(spec, one);
  ASSERT_LT(lower, exact.slowest);
  int stopped_early = 0;
  for (const double f : {0.25, 0.5, 0.75, 0.9, 0.99}) {
    const bool first = f < 0.3;
    CollectiveOracle o(t, 5);
    const Time within = lower + Time::picoseconds(static_cast<std::int64_t>(
                                    static_cast<double>((exact.slowest - lower).ps()) * f));
    SCOPED_TRACE(f);
    EXPECT_FALSE(o.collective_within(spec, one, within).has_value());
    EXPECT_EQ(o.stats().stopped, 1U);
    EXPECT_EQ(o.stats().events, events);  // counted as if it ran to its end
    if (first) {
      EXPECT_EQ(o.stats().progress_stops, 1U);
      EXPECT_GT(o.stats().avoided_events, events / 2);  // most of it not run
    }
    stopped_early += static_cast<int>(o.stats().progress_stops);
  }
  EXPECT_GE(stopped_early, 3);
  const Time quarter = lower + Time::picoseconds((exact.slowest - lower).ps() / 4);
  for (const std::uint64_t limit : {events, events - 1}) {
    CollectiveOracle o(t, 5);
    o.limit_events(limit);
    SCOPED_TRACE(limit);
    EXPECT_FALSE(o.collective_within(spec, one, quarter).has_value());
    EXPECT_EQ(o.stats().stopped, 1U);
    EXPECT_EQ(o.stats().progress_stops, limit == events ? 1U : 0U);
    EXPECT_EQ(o.stats().events, events);
  }
  for (const Time within : {exact.slowest - Time::picoseconds(1), exact.slowest,
                            exact.slowest + Time::picoseconds(1)}) {
    CollectiveOracle o(t, 5);
    const auto got = o.collective_within(spec, one, within);
    EXPECT_EQ(got.has_value(), within >= exact.slowest);
    if (got) {
      EXPECT_EQ(got->slowest, exact.slowest);
      EXPECT_EQ(got->first, exact.first);
      EXPECT_EQ(o.stats().progress_stops, 0U);
    }
  }
}

void expect_same_stats(const OracleStats& a, const OracleStats& b) {
  EXPECT_EQ(a.queries, b.queries);
  EXPECT_EQ(a.exact_hits, b.exact_hits);
  EXPECT_EQ(a.structural_hits, b.structural_hits);
  EXPECT_EQ(a.simulations, b.simulations);
  EXPECT_EQ(a.contention_free, b.contention_free);
  EXPECT_EQ(a.private_rings, b.private_rings);
  EXPECT_EQ(a.trivial, b.trivial);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.avoided_events, b.avoided_events);
  EXPECT_EQ(a.bounded, b.bounded);
  EXPECT_EQ(a.stopped, b.stopped);
  EXPECT_EQ(a.progress_stops, b.progress_stops);
  EXPECT_EQ(a.lower_bounds, b.lower_bounds);
  EXPECT_EQ(a.lowered, b.lowered);
  EXPECT_EQ(a.consulted, b.consulted);
}

// An oracle that simulates a query's link-disjoint sets on threads answers, memoizes and counts
// as one that runs them one by one. On the 4:1 rail cluster under its NCCL model, layouts of
// several sets: a double binary tree on each of the 8 rails (distinct structures: ECMP hashes
// each rail's flows apart; contended, event-simulated), 4 pipeline stages' groups on every rail
// (one set per rail), and 8 groups inside one leaf each (one structure: a set answered by an
// earlier one's run). The same calls on both oracles, compared after each: exact queries, queries
// within times around their answers (ruled out by a set's bound, by a run stopped there, which
// skips the sets after it, or answered), the tuner in full and within its answer, and every call
// again (memoized).
TEST(Oracle, ThreadsAnswerMemoizeAndCountAsOneThread) {
  const topo::Topology t = rail_4to1();
  std::vector<Groups> layouts;
  layouts.push_back(rail_groups(16, 8));
  layouts.push_back(stage_groups(16));
  Groups leaves;
  for (topo::DeviceId r = 0; r < 8; ++r) leaves.push_back({r, 8 + r, 16 + r, 24 + r});
  layouts.push_back(leaves);

  CollectiveOracle one(t, OracleSettings{.seed = 3});
  CollectiveOracle two(t, OracleSettings{.seed = 3, .threads = 2});
  const auto same = [&](const std::optional<OracleAnswer>& a,
                        const std::optional<OracleAnswer>& b) {
    ASSERT_EQ(a.has_value(), b.has_value());
    if (a) {
      EXPECT_EQ(a->slowest, b->slowest);
      EXPECT_EQ(a->first, b->first);
    }
    expect_same_stats(one.stats(), two.stats());
  };
  const CollectiveSpec tree{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(64), 16};
  for (int pass = 0; pass < 2; ++pass) {
    for (std::size_t l = 0; l < layouts.size(); ++l) {
      const Groups& groups = layouts[l];
      SCOPED_TRACE("pass " + std::to_string(pass) + " layout " + std::to_string(l));
      const OracleAnswer exact = CollectiveOracle(t, 3).collective(tree, groups);
      const Time lower = CollectiveOracle(t, 3).lower_bound(tree, groups);
      ASSERT_LE(lower, exact.slowest);
      // Below the bound, eighths of the way to the answer (sets of different speeds: a run
      // stopped before sets still to run), and around the answer.
      std::vector<Time> times{lower - Time::picoseconds(1), exact.slowest - Time::picoseconds(1),
                              exact.slowest};
      for (std::int64_t k = 1; k < 8; ++k)
        times.push_back(lower + Time::picoseconds((exact.slowest - lower).ps() * k / 8));
      for (const Time within : times) {
        same(one.collective_within(tree, groups, within),
             two.collective_within(tree, groups, within));
        // The bounds kept (raised by the runs stopped) are the same too.
        EXPECT_EQ(one.lower_bound(tree, groups), two.lower_bound(tree, groups));
      }
      same(one.collective(tree, groups), two.collective(tree, groups));
      const OracleAnswer answer = two.collective(tree, groups);
      EXPECT_EQ(answer.slowest, exact.slowest);
      EXPECT_EQ(answer.first, exact.first);
      same(one.collective(tree, groups), answer);
      for (const Bytes size : {Bytes::mebibytes(4), Bytes::mebibytes(256)}) {
        CollectiveSpec tuned{Operation::kAllReduce, Algorithm::kRing, size};
        tuned.chunks = 0;
        tuned.channels = 0;
        const OracleChoice a = one.fastest(tuned, groups);
        const OracleChoice b = two.fastest(tuned, groups);
        EXPECT_EQ(a.algorithm, b.algorithm);
        same(a.answer, b.answer);
        const auto late = a.answer.slowest - Time::picoseconds(1);
        EXPECT_FALSE(one.fastest_within(tuned, groups, late).has_value());
        EXPECT_FALSE(two.fastest_within(tuned, groups, late).has_value());
        expect_same_stats(one.stats(), two.stats());
      }
    }
  }
  // The calls took every path: sets ruled out by bounds and by runs stopped part way, sets
  // answered by an earlier set's run, and event simulations.
  EXPECT_GT(two.stats().bounded, 0U);
  EXPECT_GT(two.stats().stopped, 0U);
  EXPECT_GT(two.stats().avoided_events, 0U);
  EXPECT_GT(two.stats().structural_hits, 0U);
  EXPECT_GT(two.stats().simulations, two.stats().contention_free);
}

// Under a time to beat, a query's link-disjoint sets run largest event-free bound first: on the
// 4:1 rail cluster, a double binary tree over 16 nodes of rail 0 (the first set) and one over 64
// nodes of rail 1 (more ranks: a larger bound, and slower), both contended. Within a time that
// the first meets and the second does not, only the second runs (stopped there): the first is
// neither simulated nor memoized (before, it ran to its end first). Within the slowest time, the
// answer is the one of every set run to its end, its `first` the first group's although its set
// ran second; on two threads (`priced_sets`) the same answers and counters.
TEST(Oracle, AQueryWithinATimeRunsItsSetOfLargestBoundFirst) {
  const topo::Topology t = rail_4to1();
  const CollectiveSpec tree{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(64), 16};
  Groups groups(2);
  for (topo::DeviceId n = 0; n < 16; ++n) groups[0].push_back(n * 8 * 8);
  for (topo::DeviceId n = 0; n < 64; ++n) groups[1].push_back(n * 2 * 8 + 1);
  CollectiveOracle fresh(t, 3);
  const OracleAnswer exact = fresh.collective(tree, groups);
  ASSERT_EQ(fresh.stats().simulations, 2U);
  ASSERT_EQ(fresh.stats().contention_free, 0U);  // both event-simulated
  const OracleAnswer first = CollectiveOracle(t, 3).collective(tree, Groups{groups[0]});
  const OracleAnswer second = CollectiveOracle(t, 3).collective(tree, Groups{groups[1]});
  ASSERT_LT(first.slowest, second.slowest);
  ASSERT_EQ(exact.slowest, second.slowest);
  ASSERT_EQ(exact.first, first.first);
  const Time bound_first = CollectiveOracle(t, 3).lower_bound(tree, Groups{groups[0]});
  const Time bound_second = CollectiveOracle(t, 3).lower_bound(tree, Groups{groups[1]});
  ASSERT_LT(bound_first, bound_second);
  const Time within = first.slowest + Time::picoseconds((second.slowest - first.slowest).ps() / 2);
  ASSERT_LT(bound_second, within);  // not ruled out by a bound: by the run

  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    CollectiveOracle o(t, OracleSettings{.seed = 3, .threads = threads});
    EXPECT_FALSE(o.collective_within(tree, groups, within).has_value());
    EXPECT_EQ(o.stats().stopped, 1U);
    EXPECT_EQ(o.stats().simulations, 0U);
    EXPECT_EQ(o.stats().structural_hits, 0U);
    // The first group alone now runs: its set was not memoized.
    EXPECT_EQ(o.collective(tree, Groups{groups[0]}).slowest, first.slowest);
    EXPECT_EQ(o.stats().simulations, 1U);

    CollectiveOracle met(t, OracleSettings{.seed = 3, .threads = threads});
    const auto got = met.collective_within(tree, groups, exact.slowest);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->slowest, exact.slowest);
    EXPECT_EQ(got->first, exact.first);
    expect_same_stats(met.stats(), fresh.stats());
  }
}

// The queries of the facts tests below: on the 4:1 rail cluster under its NCCL model, a double
// binary tree on each of the 8 rails (contended, event-simulated) and 4 pipeline stages' groups on
// every rail; each within times that its bound rules out, that stop its run part way, and around
// its answer, then in full, and the tuner in full and within its answer. Every answer in order.
std::vector<std::optional<OracleAnswer>> facts_queries(CollectiveOracle& o,
                                                       const topo::Topology& t) {
  std::vector<std::optional<OracleAnswer>> out;
  const CollectiveSpec tree{Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(64), 16};
  for (const Groups& groups : {rail_groups(16, 8), stage_groups(16)}) {
    const OracleAnswer exact = CollectiveOracle(t, 3).collective(tree, groups);
    const Time lower = CollectiveOracle(t, 3).lower_bound(tree, groups);
    for (const Time within :
         {lower - Time::picoseconds(1), lower + Time::picoseconds((exact.slowest - lower).ps() / 2),
          exact.slowest - Time::picoseconds(1), exact.slowest}) {
      out.push_back(o.collective_within(tree, groups, within));
    }
    out.push_back(o.collective(tree, groups));
    CollectiveSpec tuned{Operation::kAllReduce, Algorithm::kRing, Bytes::mebibytes(256)};
    tuned.chunks = 0;
    tuned.channels = 0;
    const OracleChoice c = o.fastest(tuned, groups);
    out.push_back(c.answer);
    const auto late = o.fastest_within(tuned, groups, c.answer.slowest - Time::picoseconds(1));
    out.push_back(late ? std::optional<OracleAnswer>(late->answer) : std::nullopt);
  }
  return out;
}

void expect_same_answers(const std::vector<std::optional<OracleAnswer>>& a,
                         const std::vector<std::optional<OracleAnswer>>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(i);
    ASSERT_EQ(a[i].has_value(), b[i].has_value());
    if (!a[i]) continue;
    EXPECT_EQ(a[i]->slowest, b[i]->slowest);
    EXPECT_EQ(a[i]->first, b[i]->first);
  }
}

// A query under a time to beat orders its sets by their `lower_bound` terms, so it counts as a
// `lower_bound` followed by the query: each structure evaluated once, and a set the ordering
// answered (the contention-free evaluation) a structural hit when priced. On `spine_leaf`, a ring
// over the four hosts of leaf 0 (contention-free, its own set) and two rings over three leaves'
// hosts that share the leaves' up-links (event-simulated), within their own answer, on one and
// two threads.
TEST(Oracle, AnOrderedQueryCountsAsItsBoundThenItsQuery) {
  const topo::Topology t = spine_leaf();
  const CollectiveSpec ring{Operation::kAllReduce, Algorithm::kRing, Bytes(1000003)};
  const Groups groups{{0, 1, 2, 3}, {4, 8, 12}, {5, 9, 13}};
  CollectiveOracle reference(t, 5);
  (void)reference.lower_bound(ring, groups);
  const OracleAnswer exact = reference.collective(ring, groups);
  ASSERT_EQ(reference.stats().simulations, 2U);
  ASSERT_EQ(reference.stats().contention_free, 1U);
  ASSERT_EQ(reference.stats().structural_hits, 1U);
  for (const int threads : {1, 2}) {
    SCOPED_TRACE(threads);
    CollectiveOracle o(t, OracleSettings{.seed = 5, .threads = threads});
    expect_same_answers({o.collective_within(ring, groups, exact.slowest)}, {exact});
    EXPECT_EQ(o.stats().simulations, 2U);
    EXPECT_EQ(o.stats().contention_free, 1U);
    EXPECT_EQ(o.stats().structural_hits, 1U);
  }
}

// An oracle that publishes what it simulates answers and counts as one that does not; an oracle
// that consults those facts answers as a fresh one without simulating a single event: a
// structure the publisher ran to its end (event-simulated or contention-free) is answered from
// the facts, each once (then from its own memo), and a run the publisher stopped at a time to
// beat rules the same query out, or is answered by the run that later went to the end. The
// reader orders its tuner candidates and a query's sets by what the facts say, so it may need
// fewer of them than were published.
TEST(Oracle, ConsultedFactsAnswerAsTheOracleWouldItself) {
  const topo::Topology t = rail_4to1();
  CollectiveOracle alone(t, OracleSettings{.seed = 3});
  const auto expected = facts_queries(alone, t);
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, OracleSettings{.seed = 3});
  publisher.publish_to(facts);
  expect_same_answers(facts_queries(publisher, t), expected);
  expect_same_stats(publisher.stats(), alone.stats());
  // The calls took the paths that publish: runs to the end and runs stopped part way.
  const OracleStats& p = publisher.stats();
  ASSERT_GT(p.simulations, p.contention_free);
  ASSERT_GT(p.stopped, 0U);
  EXPECT_GT(facts->size(), 0U);

  CollectiveOracle reader(t, OracleSettings{.seed = 3});
  reader.consult(facts);
  expect_same_answers(facts_queries(reader, t), expected);
  const OracleStats& r = reader.stats();
  EXPECT_EQ(r.simulations, r.contention_free);  // no event simulation
  EXPECT_EQ(r.stopped, 0U);
  // Each fact read once at most; not every one: the reader orders its candidates and sets by the
  // times the facts give (the publisher by its bounds), so it may rule out sooner.
  EXPECT_GT(r.consulted, 0U);
  EXPECT_LE(r.consulted, facts->size());
  EXPECT_EQ(r.events, r.avoided_events);  // only those of queries ruled out

  // The same with a query's link-disjoint sets on two threads (`priced_sets`: the lookups on the
  // asking thread, the runs on others).
  CollectiveOracle threaded(t, OracleSettings{.seed = 3, .threads = 2});
  threaded.consult(facts);
  expect_same_answers(facts_queries(threaded, t), expected);
  EXPECT_EQ(threaded.stats().simulations, threaded.stats().contention_free);
  EXPECT_EQ(threaded.stats().stopped, 0U);
  EXPECT_EQ(threaded.stats().consulted, r.consulted);

  // Under an event limit the facts are not read: the budget counts this oracle's own runs.
  CollectiveOracle budgeted(t, OracleSettings{.seed = 3});
  budgeted.consult(facts);
  budgeted.limit_events(std::uint64_t{1} << 62);
  expect_same_answers(facts_queries(budgeted, t), expected);
  expect_same_stats(budgeted.stats(), alone.stats());
}

// A run stopped at its time to beat, published: the same query of a consulting oracle is ruled
// out without a run (its events counted as avoided, as the publisher counted them), while a
// later time to beat, which that fact does not settle (even a picosecond later), is simulated by
// the reader itself.
TEST(Oracle, APublishedStopRulesOutTheSameQueryOfAConsultingOracle) {
  const topo::Topology t = spine_leaf();
  const CollectiveSpec spec = contended_tree();
  const Groups one{every_host(16)};
  CollectiveOracle fresh(t, 5);
  const OracleAnswer exact = fresh.collective(spec, one);
  const Time lower = CollectiveOracle(t, 5).lower_bound(spec, one);
  const Time half = lower + Time::picoseconds((exact.slowest - lower).ps() / 2);
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, 5);
  publisher.publish_to(facts);
  ASSERT_FALSE(publisher.collective_within(spec, one, half).has_value());
  ASSERT_EQ(publisher.stats().stopped, 1U);
  EXPECT_EQ(facts->size(), 1U);

  CollectiveOracle reader(t, 5);
  reader.consult(facts);
  EXPECT_FALSE(reader.collective_within(spec, one, half).has_value());
  // The bound that fact raised rules out an earlier time too, now without the facts.
  EXPECT_FALSE(reader.collective_within(spec, one, lower).has_value());
  EXPECT_EQ(reader.stats().consulted, 1U);
  EXPECT_EQ(reader.stats().simulations, 0U);
  EXPECT_EQ(reader.stats().stopped, 0U);
  EXPECT_EQ(reader.stats().bounded, 2U);
  EXPECT_EQ(reader.stats().events, fresh.stats().events);  // counted once, as avoided
  EXPECT_EQ(reader.stats().avoided_events, fresh.stats().events);
  // Its lower bound is the raised one: a picosecond past `half` (the fact), where a fresh
  // oracle's is the event-free bound; a consulting oracle that meets the structure first in a
  // bound query raises it there.
  EXPECT_EQ(reader.lower_bound(spec, one), half + Time::picoseconds(1));
  EXPECT_EQ(fresh.lower_bound(spec, one), exact.slowest);  // fresh holds the answer
  CollectiveOracle bounder(t, 5);
  bounder.consult(facts);
  EXPECT_EQ(bounder.lower_bound(spec, one), half + Time::picoseconds(1));
  EXPECT_EQ(bounder.stats().simulations, 0U);
  // A picosecond past the published time (the fact is that it ends after `half`): the reader's
  // own run, stopped there; then to the answer.
  EXPECT_FALSE(reader.collective_within(spec, one, half + Time::picoseconds(1)).has_value());
  EXPECT_EQ(reader.stats().stopped, 1U);
  const auto got = reader.collective_within(spec, one, exact.slowest);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->slowest, exact.slowest);
  EXPECT_EQ(got->first, exact.first);
  EXPECT_EQ(reader.stats().simulations, 1U);
  EXPECT_EQ(reader.stats().consulted, 1U);
}

// A reader on its own thread while the publisher runs: the same answers whichever got there first.
TEST(Oracle, ConsultedFactsAnswerTheSameWhileTheyArePublished) {
  const topo::Topology t = rail_4to1();
  CollectiveOracle alone(t, OracleSettings{.seed = 3});
  const auto expected = facts_queries(alone, t);
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, OracleSettings{.seed = 3});
  publisher.publish_to(facts);
  CollectiveOracle reader(t, OracleSettings{.seed = 3});
  reader.consult(facts);
  std::vector<std::optional<OracleAnswer>> published;
  std::thread other([&] { published = facts_queries(publisher, t); });
  const auto read = facts_queries(reader, t);
  other.join();
  expect_same_answers(published, expected);
  expect_same_answers(read, expected);
  expect_same_stats(publisher.stats(), alone.stats());
}

// Facts are shared only by oracles of one topology and the same settings: the structure's
// digest does not name the seed's routes' origin or the calibration, so another topology
// object, seed or ideal network is refused.
TEST(Oracle, FactsOfAnotherTopologyOrOtherSettingsAreRefused) {
  const topo::Topology t = spine_leaf();
  const topo::Topology other = spine_leaf();
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle first(t, OracleSettings{.seed = 5});
  first.publish_to(facts);
  CollectiveOracle same(t, OracleSettings{.seed = 5});
  EXPECT_NO_THROW(same.consult(facts));
  const auto refused = [&](CollectiveOracle o) {
    try {
      o.consult(facts);
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInternal);
      EXPECT_STREQ(e.what(), "internal error: oracle: facts of another topology or other settings");
    }
  };
  refused(CollectiveOracle(t, OracleSettings{.seed = 6}));
  refused(CollectiveOracle(t, OracleSettings{.seed = 5, .ideal = true}));
  refused(CollectiveOracle(other, OracleSettings{.seed = 5}));
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// One group of a rail's GPUs on every node of the bundled 4:1 rail cluster, for a double
// binary tree of 256 MiB in 512 chunks (`long_tree`): one contended structure whose event
// simulation takes long enough (half a million events) for another thread to meet it running.
Groups one_rail_of_every_node() {
  Groups g(1);
  for (topo::DeviceId n = 0; n < 128; ++n) g.front().push_back(8 * n);
  return g;
}
CollectiveSpec long_tree() {
  return {Operation::kAllReduce, Algorithm::kTree, Bytes::mebibytes(256), 512};
}

// Runs `publish` on another thread and, once its oracle has claimed a structure in `facts` (or
// recorded one, or `publish` has ended), `read` on this one: the reader never starts first.
template <class Publish, class Read>
void read_while_publishing(const OracleFacts& facts, Publish publish, Read read) {
  std::atomic<bool> done{false};
  std::thread other([&] {
    publish();
    done = true;
  });
  while (facts.claimed() == 0 && facts.size() == 0 && !done) std::this_thread::yield();
  read();
  other.join();
}

// A consulting oracle that meets a structure another oracle is simulating (to the same time to
// beat or a later one) waits for what that run records instead of running it too: it answers
// as a fresh oracle does, having simulated nothing. Polls until the publisher has claimed the
// structure (or settled it) before asking, so the reader never starts first; without the wait
// the reader would run the structure itself (its event simulation is the long part of the
// publisher's query).
TEST(Oracle, AConsultingOracleWaitsForAStructureBeingSimulated) {
  const topo::Topology t = rail_4to1();
  const CollectiveSpec spec = long_tree();
  const Groups groups = one_rail_of_every_node();
  CollectiveOracle fresh(t, OracleSettings{.seed = 3});
  const OracleAnswer expected = fresh.collective(spec, groups);
  ASSERT_EQ(fresh.stats().simulations, 1U);
  ASSERT_EQ(fresh.stats().contention_free, 0U);  // event-simulated
  ASSERT_GT(fresh.stats().events, 400'000U);

  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, OracleSettings{.seed = 3});
  publisher.publish_to(facts);
  CollectiveOracle reader(t, OracleSettings{.seed = 3});
  reader.consult(facts);
  OracleAnswer published;
  OracleAnswer read;
  read_while_publishing(
      *facts, [&] { published = publisher.collective(spec, groups); },
      [&] { read = reader.collective(spec, groups); });
  EXPECT_EQ(facts->claimed(), 0U);  // dropped once settled
  EXPECT_EQ(facts->size(), 1U);
  EXPECT_EQ(published.slowest, expected.slowest);
  EXPECT_EQ(read.slowest, expected.slowest);
  EXPECT_EQ(read.first, expected.first);
  EXPECT_EQ(reader.stats().simulations, 0U);
  EXPECT_EQ(reader.stats().events, 0U);
  EXPECT_EQ(reader.stats().consulted, 1U);
  expect_same_stats(publisher.stats(), fresh.stats());
}

// The same while the publisher's run is stopped at the reader's time to beat (within 7/8 of the
// way from the event-free bound to the end): the reader waits for its fact, that the structure
// ends after that time, and rules its query out unsimulated, its events counted as avoided
// as a fresh oracle counts its own stopped run's.
TEST(Oracle, AConsultingOracleWaitsForARunStoppedAtItsTimeToBeat) {
  const topo::Topology t = rail_4to1();
  const CollectiveSpec spec = long_tree();
  const Groups groups = one_rail_of_every_node();
  const OracleAnswer exact = CollectiveOracle(t, 3).collective(spec, groups);
  const Time lower = CollectiveOracle(t, 3).lower_bound(spec, groups);
  const Time within = lower + Time::picoseconds((exact.slowest - lower).ps() * 7 / 8);
  CollectiveOracle fresh(t, OracleSettings{.seed = 3});
  ASSERT_FALSE(fresh.collective_within(spec, groups, within).has_value());
  ASSERT_EQ(fresh.stats().stopped, 1U);

  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, OracleSettings{.seed = 3});
  publisher.publish_to(facts);
  CollectiveOracle reader(t, OracleSettings{.seed = 3});
  reader.consult(facts);
  read_while_publishing(
      *facts, [&] { (void)publisher.collective_within(spec, groups, within); },
      [&] { EXPECT_FALSE(reader.collective_within(spec, groups, within).has_value()); });
  EXPECT_EQ(reader.stats().simulations, 0U);
  EXPECT_EQ(reader.stats().stopped, 0U);
  EXPECT_EQ(reader.stats().bounded, 1U);
  EXPECT_EQ(reader.stats().consulted, 1U);
  EXPECT_EQ(reader.stats().events, fresh.stats().events);
  EXPECT_EQ(reader.stats().avoided_events, reader.stats().events);
  EXPECT_GT(reader.lower_bound(spec, groups), within);
}

// A claim whose run throws (the publisher's event limit) records nothing: the waiting reader
// then simulates the structure itself, to the exact answer.
TEST(Oracle, AConsultingOracleRunsWhatAThrowingClaimantLeft) {
  const topo::Topology t = rail_4to1();
  const CollectiveSpec spec = long_tree();
  const Groups groups = one_rail_of_every_node();
  const OracleAnswer exact = CollectiveOracle(t, 3).collective(spec, groups);
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle publisher(t, OracleSettings{.seed = 3});
  publisher.publish_to(facts);
  publisher.limit_events(300'000);
  CollectiveOracle reader(t, OracleSettings{.seed = 3});
  reader.consult(facts);
  bool threw = false;
  OracleAnswer read;
  read_while_publishing(
      *facts,
      [&] {
        try {
          (void)publisher.collective(spec, groups);
        } catch (const EventLimitReached&) {
          threw = true;
        }
      },
      [&] { read = reader.collective(spec, groups); });
  EXPECT_TRUE(threw);
  EXPECT_EQ(read.slowest, exact.slowest);
  EXPECT_EQ(read.first, exact.first);
  EXPECT_EQ(reader.stats().simulations, 1U);
  EXPECT_EQ(reader.stats().consulted, 0U);
  EXPECT_EQ(facts->claimed(), 0U);
  EXPECT_EQ(facts->size(), 0U);
}

// Two oracles that each publish and consult the same facts, asking the same queries at once on
// threads of their own (each simulating a query's link-disjoint sets on two threads): no wait
// closes a cycle (the test would hang), and both answer as an oracle alone does.
TEST(Oracle, OraclesThatPublishAndConsultEachOtherAnswerAsAlone) {
  const topo::Topology t = rail_4to1();
  CollectiveOracle alone(t, OracleSettings{.seed = 3});
  const auto expected = facts_queries(alone, t);
  auto facts = std::make_shared<OracleFacts>();
  CollectiveOracle a(t, OracleSettings{.seed = 3, .threads = 2});
  CollectiveOracle b(t, OracleSettings{.seed = 3, .threads = 2});
  for (CollectiveOracle* o : {&a, &b}) {
    o->publish_to(facts);
    o->consult(facts);
  }
  std::vector<std::optional<OracleAnswer>> from_a;
  std::thread other([&] { from_a = facts_queries(a, t); });
  const auto from_b = facts_queries(b, t);
  other.join();
  expect_same_answers(from_a, expected);
  expect_same_answers(from_b, expected);
  EXPECT_EQ(facts->claimed(), 0U);
}

}  // namespace
}  // namespace nest::coll
