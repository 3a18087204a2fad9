// Hierarchical collectives on ASTRA-sim's published network configs (imported with
// `nest topology import`), each against its closed form derived by hand per dimension.
//
// Per dimension of d members, link bandwidth B and latency L (a Switch dimension's route is two
// cables, 2L; Ring and FullyConnected neighbours are one cable, L), reduce-scatter of a segment
// of s bytes held by every member (all-gather is the same, mirrored):
//   ring:             d-1 steps, each one transfer of s/d per member to its neighbour:
//                     (d-1)·(L_route + s/(d·B))
//   direct on FullyConnected: one step, s/d to each of the d-1 others on d-1 own cables:
//                     L + s/(d·B)
//   direct on Switch: one step, the d-1 transfers share the member's cable to the switch:
//                     2L + (d-1)/d · s/B
//   halving_doubling: log2 d steps, step k moves s/2^(k+1):  log2(d)·L_route + (d-1)/d · s/B
// and the segment of the next dimension is s/d. An allreduce is the reduce-scatter up the
// dimensions and the all-gather back (ASTRA-sim's localBWAware schedule), so twice the sum; the
// ring allreduce of one dimension is the textbook 2(d-1)·L + 2(d-1)/d · S/B (Patarasuk and Yuan,
// JPDC 2009; NCCL's doc/PERFORMANCE.md bus bandwidth 2(n-1)/n).

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "coll_test_util.h"
#include "nest/coll/closed_form.h"
#include "nest/coll/schedule.h"
#include "nest/coll/simulate.h"
#include "nest/config/node.h"
#include "nest/core/error.h"
#include "nest/topo/astra_sim.h"
#include "nest/topo/generators.h"
#include "nest/topo/loader.h"

namespace nest::coll {
namespace {

using testing::iota_group;
using testing::simulate_both;
using testing::to_ps;

const std::string kAstra = std::string(NEST_SOURCE_DIR) + "/tests/validation/reference/astra_sim/";
constexpr double kS = 64.0 * 1024 * 1024;  // 64 MiB
constexpr double kGiB = 1024.0 * 1024 * 1024;

topo::Topology imported(const std::string& file) {
  return topo::load_topology_string(
      topo::import_astra_sim_network(config::Node::load_file(kAstra + file)), file);
}

// Bandwidth in ASTRA-sim's GB/s (2^30 B) and latency in its ns, as seconds.
double bw(double gbps) { return gbps * kGiB; }
double ns(double v) { return v * 1e-9; }

CollectiveSpec hierarchical(Operation op = Operation::kAllReduce,
                            std::vector<Algorithm> per_level = {}) {
  CollectiveSpec spec;
  spec.op = op;
  spec.algorithm = Algorithm::kHierarchical;
  spec.size = Bytes(static_cast<std::int64_t>(kS));
  spec.level_algorithms = std::move(per_level);
  return spec;
}

// Simulated (contention-free and event runs agree) against the closed form: each transfer's
// time is rounded up to a picosecond, hence a tolerance of a few picoseconds per step.
void expect_time(const topo::Topology& t, const CollectiveSpec& spec, double closed_form_s,
                 const std::string& what) {
  const std::vector<std::vector<topo::DeviceId>> groups = {
      iota_group(static_cast<int>(t.num_devices()))};
  const SimulationResult r = simulate_both(t, spec, groups);
  EXPECT_NEAR(static_cast<double>(r.makespan.ps()), static_cast<double>(to_ps(closed_form_s)), 64.0)
      << what;
}

TEST(Dimensions, RingConfigsMatchTheRingClosedForm) {
  // Ring_{4,8,16}npus.yml and Ring.yml: 50 GB/s, 500 ns.
  for (const auto& [file, n] : {std::pair<const char*, int>{"Ring_4npus.yml", 4},
                                {"Ring_8npus.yml", 8},
                                {"Ring_16npus.yml", 16},
                                {"Ring.yml", 64}}) {
    const double t = 2 * (n - 1) * ns(500) + 2.0 * (n - 1) / n * kS / bw(50);
    expect_time(imported(file), hierarchical(), t, file);
  }
  // 4 ranks: 6 · 0.5 us + 1.5 · 64 MiB / 50 GiB/s = 3 us + 1.875 ms.
  expect_time(imported("Ring_4npus.yml"), hierarchical(), 1.878e-3, "Ring_4npus.yml by hand");
}

TEST(Dimensions, SwitchConfigsMatchTheRingOnASwitch) {
  // A ring step on a switch crosses two cables: 2L per step.
  const auto on_switch = [](int n, double gbps, double lat_ns) {
    return 2 * (n - 1) * 2 * ns(lat_ns) + 2.0 * (n - 1) / n * kS / bw(gbps);
  };
  expect_time(imported("Switch.yml"), hierarchical(), on_switch(64, 50, 500), "Switch.yml");
  expect_time(imported("HGX-H100-validated.yml"), hierarchical(), on_switch(8, 400, 936.25),
              "HGX-H100-validated.yml");
}

TEST(Dimensions, TwoDimensionalConfigsMatchTheSumOverDimensions) {
  // hgx_h100_16gpu.yml: Switch of 8 (400 GB/s, 936.25 ns) x Ring of 2 (50 GB/s, 1000 ns).
  const double hgx =
      2 * (7 * (2 * ns(936.25) + kS / (8 * bw(400))) + (ns(1000) + kS / 8 / (2 * bw(50))));
  expect_time(imported("hgx_h100_16gpu.yml"), hierarchical(), hgx, "hgx_h100_16gpu.yml");
  // tpu_v3_32_2dtorus.yml: Ring of 4 x Ring of 8, 80 GB/s and 1000 ns each.
  const double tpu =
      2 * (3 * (ns(1000) + kS / (4 * bw(80))) + 7 * (ns(1000) + kS / 4 / (8 * bw(80))));
  expect_time(imported("tpu_v3_32_2dtorus.yml"), hierarchical(), tpu, "tpu_v3_32_2dtorus.yml");
}

TEST(Dimensions, RingFullyConnectedSwitchRunsDirectOnItsFullyConnectedDimension) {
  const topo::Topology t = imported("Ring_FullyConnected_Switch.yml");
  const auto group = iota_group(64);
  const CollectiveSpec resolved = resolve(hierarchical(), t, group);
  EXPECT_EQ(resolved.levels, (std::vector<int>{2, 8, 4}));
  EXPECT_EQ(resolved.level_algorithms,
            (std::vector<Algorithm>{Algorithm::kRing, Algorithm::kDirect, Algorithm::kRing}));
  // Ring of 2 (200 GB/s, 50 ns), direct on FullyConnected 8 (100 GB/s, 500 ns) with the
  // segment S/2, ring on Switch 4 (50 GB/s, 2 us per cable) with the segment S/16.
  const double rs = (ns(50) + kS / 2 / bw(200)) + (ns(500) + kS / 2 / (8 * bw(100))) +
                    3 * (2 * ns(2000) + kS / 16 / (4 * bw(50)));
  expect_time(t, hierarchical(), 2 * rs, "allreduce");
  // 25.1 us of latency + 507.8125 us of bandwidth.
  expect_time(t, hierarchical(), 532.9125e-6, "allreduce by hand");
  expect_time(t, hierarchical(Operation::kReduceScatter), rs, "reduce_scatter");
  expect_time(t, hierarchical(Operation::kAllGather), rs, "all_gather");
  // A ring on the FullyConnected dimension uses 2 of each member's 7 cables: 7 steps there.
  const double ring_rs = (ns(50) + kS / 2 / bw(200)) + 7 * (ns(500) + kS / 2 / (8 * bw(100))) +
                         3 * (2 * ns(2000) + kS / 16 / (4 * bw(50)));
  expect_time(
      t,
      hierarchical(Operation::kAllReduce, {Algorithm::kRing, Algorithm::kRing, Algorithm::kRing}),
      2 * ring_rs, "ring everywhere");
  EXPECT_NEAR(2 * ring_rs, 1.0076625e-3, 1e-12);
}

TEST(Dimensions, HalvingDoublingAndDirectPerDimensionMatchTheirClosedForms) {
  const topo::Topology hgx = imported("HGX-H100-validated.yml");  // Switch of 8
  const double l = 2 * ns(936.25);
  const double b = bw(400);
  expect_time(hgx, hierarchical(Operation::kAllReduce, {Algorithm::kHalvingDoubling}),
              2 * (3 * l + 7.0 / 8 * kS / b), "halving_doubling on a switch");
  expect_time(hgx, hierarchical(Operation::kAllReduce, {Algorithm::kDirect}),
              2 * (l + 7.0 / 8 * kS / b), "direct on a switch");
  const topo::Topology rfs = imported("Ring_FullyConnected_Switch.yml");
  // halving_doubling on FullyConnected 8 (3 steps on own cables) and on Switch 4 (2 steps).
  const double rs = (ns(50) + kS / 2 / bw(200)) + (3 * ns(500) + 7.0 / 8 * kS / 2 / bw(100)) +
                    (2 * 2 * ns(2000) + 3.0 / 4 * kS / 16 / bw(50));
  expect_time(rfs,
              hierarchical(Operation::kAllReduce, {Algorithm::kRing, Algorithm::kHalvingDoubling,
                                                   Algorithm::kHalvingDoubling}),
              2 * rs, "halving_doubling per dimension");
}

TEST(Dimensions, DoubleBinaryTreeOnTheLastDimension) {
  const topo::Topology rfs = imported("Ring_FullyConnected_Switch.yml");
  const CollectiveSpec spec =
      hierarchical(Operation::kAllReduce, {Algorithm::kRing, Algorithm::kDirect, Algorithm::kTree});
  // The two trees of 4 members (NCCL's double binary tree: 0 <- 2 <- {1, 3} and
  // 3 <- 1 <- {2, 0}), each carrying half of the segment S/16 up and down in 4 steps of 2L;
  // steps 0 and 3 put two transfers on a member's cable (2 and 1 receive two leaves in step 0;
  // 2 and 1 send to two children in step 3): 6 half-segments in all.
  const double below = (ns(50) + kS / 2 / bw(200)) + (ns(500) + kS / 2 / (8 * bw(100)));
  const double tree = 4 * 2 * ns(2000) + 6 * (kS / 32) / bw(50);
  expect_time(rfs, spec, 2 * below + tree, "double_binary_tree");
  EXPECT_EQ(transfer_count(resolve(spec, rfs, iota_group(64)), 64),
            2U * 64 + 2U * 64 * 7 + 16U * 4 * 3);
}

// The time of `spec` on `group` alone, simulated (contention-free and event runs agree).
double simulated_s(const topo::Topology& t, const CollectiveSpec& spec,
                   const std::vector<topo::DeviceId>& group) {
  const std::vector<std::vector<topo::DeviceId>> groups = {group};
  return simulate_both(t, spec, groups).makespan.to_seconds();
}

std::string resolve_error(const CollectiveSpec& spec, const topo::Topology& t,
                          const std::vector<topo::DeviceId>& group) {
  try {
    (void)resolve(spec, t, group);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// A dimension's algorithm that cannot run on a partial group's level falls back to ring:
// halving_doubling on a level that is not a power of two.
TEST(Dimensions, HalvingDoublingFallsBackToRingOnALevelThatIsNotAPowerOfTwo) {
  // One Switch of 8 (100 GiB/s, 1 us per cable: 2 us between members), halving_doubling.
  const topo::Topology t = topo::load_topology_string(
      "kind: dimensions\nname: hd8\ntopology: [Switch]\nnpus_count: [8]\n"
      "bandwidth: [\"100 GiB/s\"]\nlatency: [\"1000 ns\"]\n"
      "collective_algorithms: [halving_doubling]\n",
      "hd8.yaml");
  const double l = 2 * ns(1000);
  const double b = bw(100);
  const std::vector<topo::DeviceId> six = iota_group(6);
  const CollectiveSpec resolved = resolve(hierarchical(), t, six);
  EXPECT_EQ(resolved.levels, (std::vector<int>{6}));
  EXPECT_EQ(resolved.level_algorithms, (std::vector<Algorithm>{Algorithm::kRing}));
  // Ring of 6 on a switch: 2 · 5 · (2L + S/(6B)) = 1.0617 ms.
  EXPECT_NEAR(simulated_s(t, hierarchical(), six), 2 * 5 * (l + kS / (6 * b)), 64e-12);
  EXPECT_NEAR(2 * 5 * (l + kS / (6 * b)), 1.0616667e-3, 1e-10);
  // A group of 4 keeps halving_doubling: 2 · (2 · 2L + 3/4 · S/B).
  const std::vector<topo::DeviceId> four = iota_group(4);
  EXPECT_EQ(resolve(hierarchical(), t, four).level_algorithms,
            (std::vector<Algorithm>{Algorithm::kHalvingDoubling}));
  EXPECT_NEAR(simulated_s(t, hierarchical(), four), 2 * (2 * l + 3.0 / 4 * kS / b), 64e-12);
  // The same algorithm asked for explicitly keeps its error.
  EXPECT_EQ(
      resolve_error(hierarchical(Operation::kAllReduce, {Algorithm::kHalvingDoubling}), t, six),
      "--level-algorithms: halving_doubling on level 0 of 6 ranks, not a power of two (got "
      "\"halving_doubling\"; expected ring or direct on that level)");
}

// double_binary_tree falls back to ring on a level that is not the last of an allreduce.
TEST(Dimensions, DoubleBinaryTreeFallsBackToRingOffTheLastLevel) {
  // Switch of 4 (100 GiB/s, 1 us) x Switch of 2 (50 GiB/s, 2 us), a tree on the first.
  const topo::Topology t = topo::load_topology_string(
      "kind: dimensions\nname: tree42\ntopology: [Switch, Switch]\nnpus_count: [4, 2]\n"
      "bandwidth: [\"100 GiB/s\", \"50 GiB/s\"]\nlatency: [\"1000 ns\", \"2000 ns\"]\n"
      "collective_algorithms: [double_binary_tree, ring]\n",
      "tree42.yaml");
  const std::vector<topo::DeviceId> all = iota_group(8);
  const CollectiveSpec resolved = resolve(hierarchical(), t, all);
  EXPECT_EQ(resolved.levels, (std::vector<int>{4, 2}));
  EXPECT_EQ(resolved.level_algorithms,
            (std::vector<Algorithm>{Algorithm::kRing, Algorithm::kRing}));
  // Reduce-scatter: ring of 4, 3 · (2 us + S/(4 · 100 GiB/s)), then ring of 2 on S/4,
  // 4 us + S/4/(2 · 50 GiB/s); the allreduce twice that (1.27 ms).
  const double rs =
      3 * (2 * ns(1000) + kS / (4 * bw(100))) + (2 * ns(2000) + kS / 4 / (2 * bw(50)));
  EXPECT_NEAR(simulated_s(t, hierarchical(), all), 2 * rs, 64e-12);
  EXPECT_NEAR(2 * rs, 1.27e-3, 1e-12);
  // Inside one group of the first dimension its level is the last: the tree stays for an
  // allreduce, and a reduce-scatter (no tree) runs the ring.
  const std::vector<topo::DeviceId> four = iota_group(4);
  EXPECT_EQ(resolve(hierarchical(), t, four).level_algorithms,
            (std::vector<Algorithm>{Algorithm::kTree}));
  EXPECT_EQ(resolve(hierarchical(Operation::kReduceScatter), t, four).level_algorithms,
            (std::vector<Algorithm>{Algorithm::kRing}));
  EXPECT_EQ(resolve_error(hierarchical(Operation::kAllReduce, {Algorithm::kTree, Algorithm::kRing}),
                          t, all),
            "--level-algorithms: double_binary_tree on level 0 (got \"tree,ring\"; expected "
            "double_binary_tree only on the last level of an allreduce)");
}

// Ring where the domains do not split a group evenly (hierarchical cannot run there), and ring
// on every other topology.
TEST(Dimensions, DefaultAlgorithmIsHierarchicalWhereTheGroupHasLevels) {
  const topo::Topology rfs = imported("Ring_FullyConnected_Switch.yml");
  const std::vector<std::vector<topo::DeviceId>> whole = {iota_group(64)};
  EXPECT_EQ(default_algorithm(rfs, Operation::kAllReduce, whole), Algorithm::kHierarchical);
  EXPECT_EQ(default_algorithm(rfs, Operation::kReduceScatter, whole), Algorithm::kHierarchical);
  EXPECT_EQ(default_algorithm(rfs, Operation::kAllGather, whole), Algorithm::kHierarchical);
  EXPECT_EQ(default_algorithm(rfs, Operation::kAllToAll, whole), Algorithm::kPairwise);
  // Devices 0-2: two in the first Ring pair, one in the next.
  const std::vector<std::vector<topo::DeviceId>> three = {iota_group(3)};
  EXPECT_FALSE(has_hierarchy_levels(rfs, three.front()));
  EXPECT_EQ(default_algorithm(rfs, Operation::kAllReduce, three), Algorithm::kRing);
  EXPECT_TRUE(has_hierarchy_levels(rfs, iota_group(6)));  // levels 2, 3
  topo::HierarchicalParams h;
  h.devices_per_level = {8};
  h.bandwidth_per_level = {Bandwidth::gigabytes_per_second(100)};
  h.latency_per_level = {Time::microseconds(1)};
  const std::vector<std::vector<topo::DeviceId>> eight = {iota_group(8)};
  EXPECT_EQ(default_algorithm(topo::build_hierarchical(h), Operation::kAllReduce, eight),
            Algorithm::kRing);
}

TEST(Dimensions, LevelAlgorithmsAreCheckedAgainstTheLevels) {
  const auto message = [](CollectiveSpec spec, int ranks) {
    try {
      validate(spec, ranks);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CollectiveSpec spec = hierarchical(Operation::kAllReduce, {Algorithm::kRing});
  spec.levels = {2, 8};
  EXPECT_EQ(message(spec, 16),
            "--level-algorithms: 1 level algorithms for 2 levels (got \"ring\"; expected one per "
            "level (2,8))");
  spec.level_algorithms = {Algorithm::kHalvingDoubling, Algorithm::kRing};
  spec.levels = {6, 2};
  EXPECT_EQ(message(spec, 12),
            "--level-algorithms: halving_doubling on level 0 of 6 ranks, not a power of two (got "
            "\"halving_doubling,ring\"; expected ring or direct on that level)");
  spec.level_algorithms = {Algorithm::kTree, Algorithm::kRing};
  EXPECT_EQ(message(spec, 12),
            "--level-algorithms: double_binary_tree on level 0 (got \"tree,ring\"; expected "
            "double_binary_tree only on the last level of an allreduce)");
}

}  // namespace
}  // namespace nest::coll
