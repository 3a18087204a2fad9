// The private rings' run (coll/private_rings.h) against the event simulator: the same
// durations to the picosecond, the same events counted, the same link statistics, and the same
// stopping point under an event budget or a time limit; and it steps aside where its
// conditions fail.

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "coll/private_rings.h"
#include "coll_test_util.h"
#include "nest/coll/execution.h"
#include "nest/coll/schedule.h"
#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/topo/loader.h"

namespace nest::coll {
namespace {

using testing::iota_group;
using Groups = std::vector<std::vector<topo::DeviceId>>;

// The event simulation of `program` on `groups`, run with `run_within(max_events, until)`.
struct Simulated {
  bool finished = false;
  std::vector<Time> durations;
  std::uint64_t events = 0;
  std::vector<net::LinkStats> links;  // every link's, by id
};

// The simulator's rating paths: both shortcuts (its default), the component refilling with
// kept lower levels only, and the plain component refilling.
enum class Rating { kDefault, kLevelsOnly, kPlain };

constexpr std::uint64_t kNoLimit = std::numeric_limits<std::uint64_t>::max();

Simulated simulate(const topo::Topology& t, const std::shared_ptr<const Program>& program,
                   const Groups& groups, std::uint64_t seed, Time until = Time::max(),
                   std::uint64_t max_events = kNoLimit, Rating rating = Rating::kDefault) {
  Simulated out;
  net::Simulator simulator(t);
  simulator.verified_refills(rating == Rating::kDefault);
  simulator.reuse_lower_levels(rating != Rating::kPlain);
  topo::Router router(t, seed);
  std::vector<std::unique_ptr<Execution>> runs;
  for (const auto& g : groups) {
    runs.push_back(std::make_unique<Execution>(simulator, router, program, g, seed));
  }
  for (auto& r : runs) r->start();
  (void)simulator.run_within(max_events, until);
  out.events = simulator.events_processed();
  for (std::size_t l = 0; l < t.num_links(); ++l) {
    out.links.push_back(simulator.link_stats(static_cast<topo::LinkId>(l)));
  }
  out.finished = std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r->finished(); });
  if (out.finished) {
    for (const auto& r : runs) out.durations.push_back(r->duration());
  }
  simulator.reset();  // drops the callbacks into `runs`
  return out;
}

std::optional<detail::PrivateRingRun> private_run(const topo::Topology& t,
                                                  const std::shared_ptr<const Program>& program,
                                                  const Groups& groups, std::uint64_t seed,
                                                  Time until = Time::max(),
                                                  std::uint64_t max_events = kNoLimit) {
  topo::Router router(t, seed);
  std::vector<detail::GroupProgram> parts;
  for (const auto& g : groups) parts.push_back({program.get(), g});
  detail::PrivateRingSimulator simulator(t);
  return simulator.run(router, parts, seed, until, max_events);
}

// The private run `fast` against the simulator's `slow`, both finished: every group's duration,
// the events, and every link's bytes, busy time and peak flows (and exactly the links the
// simulation used). Returns the largest peak.
std::uint32_t expect_same_run(const detail::PrivateRingRun& fast, const Simulated& slow) {
  EXPECT_TRUE(fast.finished);
  EXPECT_TRUE(slow.finished);
  EXPECT_EQ(fast.durations, slow.durations);
  EXPECT_EQ(fast.events, slow.events);
  std::uint32_t peak = 0;
  for (const LinkUse& use : fast.links) {
    const net::LinkStats& s = slow.links[use.link];
    EXPECT_EQ(use.bytes, s.bytes) << "link " << use.link;
    EXPECT_EQ(use.busy, s.busy) << "link " << use.link;
    EXPECT_EQ(use.peak_flows, s.peak_flows) << "link " << use.link;
    peak = std::max(peak, use.peak_flows);
  }
  std::size_t used = 0;
  for (const net::LinkStats& s : slow.links) used += s.bytes > 0 ? 1 : 0;
  EXPECT_EQ(fast.links.size(), used);
  return peak;
}

// NCCL's rings (forwarding on arrival) on every bundled topology, one and two channels (rail
// orders too), one and two chunks, even and odd sizes, groups packed and strided, one group and
// two apart: wherever the private run answers, it equals the event simulation to the picosecond
// in every group's duration, the events processed, and every link's bytes, busy time and peak
// flows (and lists exactly the links the simulation used). Many of those runs queue pieces on
// a link (peak >= 2: where the contention-free evaluation steps aside).
TEST(PrivateRings, EqualTheEventSimulationOnEveryBundledTopology) {
  int answered = 0;
  int queued = 0;
  int aside = 0;
  int reduced = 0;  // simulated over one period of each ring
  for (const std::string& file : testing::bundled_topology_files()) {
    const topo::Topology t = topo::load_topology(file);
    const int devices = static_cast<int>(t.num_devices());
    for (const int n : {4, 16}) {
      for (const int stride : {1, 4}) {
        if (n * stride > devices) continue;
        for (const Operation op :
             {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
          for (const int channels : {1, 2}) {
            for (const int rails : {0, 2}) {
              if (channels == 1 && rails > 0) continue;
              for (const int chunks : {1, 2}) {
                // Pieces of 2^k and of an odd 100,003 bytes: both split evenly (uniform rings).
                for (const std::int64_t size :
                     {std::int64_t{1} << 26, std::int64_t{n} * chunks * channels * 100003}) {
                  CollectiveSpec spec{op, Algorithm::kRing, Bytes(size), chunks};
                  spec.channels = channels;
                  spec.ranks_per_node = rails;
                  spec.forward_on_arrival = true;
                  try {
                    validate(spec, n);
                  } catch (const nest::Error&) {
                    continue;
                  }
                  const auto program = ring_program(spec, n);
                  for (const int count : {1, 2}) {
                    if (count * n * stride > devices) continue;
                    Groups groups{testing::strided_devices(n, stride)};
                    if (count == 2)
                      groups.push_back(testing::strided_devices(n, stride, devices / 2));
                    SCOPED_TRACE(
                        file + " " + std::string(operation_name(op)) + " n=" + std::to_string(n) +
                        " stride=" + std::to_string(stride) +
                        " channels=" + std::to_string(channels) +
                        " rails=" + std::to_string(rails) + " chunks=" + std::to_string(chunks) +
                        " size=" + std::to_string(size) + " groups=" + std::to_string(count));
                    const auto fast = private_run(t, program, groups, 5);
                    if (!fast) {
                      ++aside;
                      continue;
                    }
                    ++answered;
                    const std::uint32_t peak =
                        expect_same_run(*fast, simulate(t, program, groups, 5));
                    queued += peak >= 2 ? 1 : 0;
                    reduced += fast->simulated < fast->senders ? 1 : 0;
                    EXPECT_EQ(fast->senders, static_cast<std::size_t>(count * n * channels));
                  }
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(answered, 300);
  EXPECT_GT(queued, 100);
  EXPECT_GT(reduced, 100);
  EXPECT_GT(aside, 20);  // rings whose channels or groups share links
}

// Stopped part way, as the oracle stops a simulation at the time to beat or at its event
// budget: the same events processed and the same answer to "finished?" as
// `Simulator::run_within(max_events, until)`, for limits before, at and after the end.
TEST(PrivateRings, StopWhereTheSimulatorStops) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_64.yaml");
  const auto program = ring_program(
      testing::nccl_rail_rings(Operation::kAllGather, Bytes(std::int64_t{1} << 27)), 16);
  const Groups groups{testing::strided_devices(16, 4)};
  const auto whole = private_run(t, program, groups, 0);
  ASSERT_TRUE(whole.has_value());
  ASSERT_TRUE(whole->finished);
  const Time end = whole->durations.front();
  int stopped = 0;
  for (const Time until :
       {Time::zero(), Time::picoseconds(end.ps() / 3), Time::picoseconds(end.ps() / 2),
        end - Time::picoseconds(1), end, end + Time::picoseconds(1)}) {
    for (const std::uint64_t limit : {std::uint64_t{1}, std::uint64_t{17}, whole->events / 2,
                                      whole->events - 1, whole->events, kNoLimit}) {
      SCOPED_TRACE("until " + std::to_string(until.ps()) + " ps, limit " + std::to_string(limit));
      const auto fast = private_run(t, program, groups, 0, until, limit);
      const Simulated slow = simulate(t, program, groups, 0, until, limit);
      ASSERT_TRUE(fast.has_value());
      EXPECT_EQ(fast->finished, slow.finished);
      EXPECT_EQ(fast->events, slow.events);
      if (fast->finished) {
        EXPECT_EQ(fast->durations, slow.durations);
      }
      stopped += fast->finished ? 0 : 1;
      EXPECT_LT(fast->simulated, fast->senders);  // one period of each ring
    }
  }
  EXPECT_GT(stopped, 10);
}

// At the placer's scale: the data-parallel rings of a 1,024-GPU rail cluster (GPUs r and r + 4
// of each of its 128 nodes, as t = 4 places them; leaves of 32 nodes, so a ring's senders repeat
// every 64 ranks), all-gather and reduce-scatter, pieces split evenly and a size that leaves
// one-byte remainders per channel (not a uniform ring: the simulator runs it). The private run
// simulates one period (128 of 512 senders) and equals the event simulation in every number,
// also stopped at a third and two thirds of its events and of its time.
TEST(PrivateRings, OnePeriodOfARailRingIsTheWholeRing) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_1024.yaml");
  std::vector<topo::DeviceId> group;
  for (topo::DeviceId node = 0; node < 128; ++node) {
    group.push_back(node * 8 + 1);
    group.push_back(node * 8 + 5);
  }
  const Groups groups{group};
  for (const Operation op : {Operation::kAllGather, Operation::kReduceScatter}) {
    for (const std::int64_t size : {std::int64_t{1} << 30, (std::int64_t{1} << 30) + 3}) {
      SCOPED_TRACE(std::string(operation_name(op)) + " " + std::to_string(size));
      const auto program = ring_program(testing::nccl_rail_rings(op, Bytes(size)), 256);
      const auto fast = private_run(t, program, groups, 3);
      if (size % 512 != 0) {
        EXPECT_FALSE(fast.has_value());
        continue;
      }
      ASSERT_TRUE(fast.has_value());
      ASSERT_TRUE(fast->finished);
      EXPECT_EQ(fast->senders, 512U);
      EXPECT_EQ(fast->simulated, 128U);
      const std::uint32_t peak = expect_same_run(*fast, simulate(t, program, groups, 3));
      EXPECT_GE(peak, 2U);  // pieces queue on the NICs
      const Time end = fast->durations.front();
      for (const std::uint64_t limit : {fast->events / 3, 2 * fast->events / 3}) {
        const auto part = private_run(t, program, groups, 3, Time::max(), limit);
        const Simulated whole = simulate(t, program, groups, 3, Time::max(), limit);
        ASSERT_TRUE(part.has_value());
        EXPECT_FALSE(part->finished);
        EXPECT_EQ(part->events, whole.events) << "limit " << limit;
      }
      for (const Time until :
           {Time::picoseconds(end.ps() / 3), Time::picoseconds(2 * end.ps() / 3)}) {
        const auto part = private_run(t, program, groups, 3, until);
        const Simulated whole = simulate(t, program, groups, 3, until);
        ASSERT_TRUE(part.has_value());
        EXPECT_FALSE(part->finished);
        EXPECT_EQ(part->events, whole.events) << "until " << until.ps();
      }
    }
  }
}

// The simulator rates a bundle's flows the same in each of its paths (the verified refilling,
// the component refilling with kept lower levels, the plain one): the private run equals each,
// on two-channel rail rings over two GPUs of each node (pieces queue behind the NVLink hops) and
// over one GPU of each node (one channel).
TEST(PrivateRings, EqualEveryRatingPathOfTheSimulator) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_64.yaml");
  int queued = 0;
  for (const Operation op : {Operation::kAllReduce, Operation::kAllGather}) {
    for (const int stride : {4, 8}) {
      const int n = 64 / stride;
      CollectiveSpec spec = testing::nccl_rail_rings(op, Bytes(std::int64_t{n} * 2 * 100003));
      if (stride == 8) {
        spec.channels = 1;  // two channels of one GPU per node share its NIC
        spec.ranks_per_node = 0;
      }
      const auto program = ring_program(spec, n);
      const Groups groups{testing::strided_devices(n, stride)};
      SCOPED_TRACE(std::string(operation_name(op)) + " stride " + std::to_string(stride));
      const auto fast = private_run(t, program, groups, 1);
      ASSERT_TRUE(fast.has_value());
      for (const Rating rating : {Rating::kDefault, Rating::kLevelsOnly, Rating::kPlain}) {
        SCOPED_TRACE("rating " + std::to_string(static_cast<int>(rating)));
        const Simulated slow = simulate(t, program, groups, 1, Time::max(), kNoLimit, rating);
        EXPECT_EQ(fast->durations, slow.durations);
        EXPECT_EQ(fast->events, slow.events);
        for (const LinkUse& use : fast->links) {
          EXPECT_EQ(use.busy, slow.links[use.link].busy) << "link " << use.link;
          EXPECT_EQ(use.peak_flows, slow.links[use.link].peak_flows) << "link " << use.link;
        }
      }
      for (const LinkUse& use : fast->links) queued += use.peak_flows >= 2 ? 1 : 0;
    }
  }
  EXPECT_GT(queued, 0);
}

// NCCL's rail rings over GPUs 1 and 5 of a few nodes (rail orders: the ring visits ranks out of
// rank order), with and without a period along the ring: odd counts of nodes, nodes in
// different leaves of the 1,024-GPU cluster, several leaves' worth. Whether one period runs or
// the whole ring, the private run equals the event simulation in durations, events and every
// link; both kinds occur.
TEST(PrivateRings, RailRingsWithAndWithoutAPeriodEqualTheSimulation) {
  int whole = 0;
  int reduced = 0;
  for (const std::string name : {"h100_rail_64", "h100_rail_1024"}) {
    const topo::Topology t =
        topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/" + name + ".yaml");
    const auto nodes_of_cluster = static_cast<topo::DeviceId>(t.num_devices() / 8);
    for (const std::vector<topo::DeviceId>& nodes :
         std::vector<std::vector<topo::DeviceId>>{{1, 3, 5},
                                                  {0, 1, 2, 3, 4},
                                                  {2, 3, 6, 7},
                                                  {0, 40, 70},
                                                  {5, 33, 64, 100, 127},
                                                  {0, 1, 32, 33, 64, 65, 96, 97}}) {
      if (*std::max_element(nodes.begin(), nodes.end()) >= nodes_of_cluster) continue;
      std::vector<topo::DeviceId> group;
      for (const topo::DeviceId node : nodes) {
        group.push_back(node * 8 + 1);
        group.push_back(node * 8 + 5);
      }
      const auto n = static_cast<std::int64_t>(group.size());
      for (const Operation op : {Operation::kAllGather, Operation::kAllReduce}) {
        SCOPED_TRACE(name + " " + std::string(operation_name(op)) + " over " +
                     std::to_string(nodes.size()) + " nodes from " + std::to_string(nodes[0]));
        const auto program =
            ring_program(testing::nccl_rail_rings(op, Bytes(n * 2 * 1000003)), static_cast<int>(n));
        const Groups groups{group};
        const auto fast = private_run(t, program, groups, 7);
        if (!fast) continue;
        expect_same_run(*fast, simulate(t, program, groups, 7));
        (fast->simulated < fast->senders ? reduced : whole) += 1;
      }
    }
  }
  EXPECT_GE(whole, 4);
  EXPECT_GE(reduced, 2);
}

// Where its conditions fail it steps aside (nullopt): rings that wait for their own sends (the
// contention-free evaluation derives those), hierarchical rings (two phases per channel), and
// two rings over the same devices' links.
TEST(PrivateRings, StepAsideOutsideTheirConditions) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_64.yaml");
  CollectiveSpec spec{Operation::kAllGather, Algorithm::kRing, Bytes(std::int64_t{1} << 24)};
  spec.forward_on_arrival = true;
  EXPECT_TRUE(private_run(t, ring_program(spec, 8), Groups{iota_group(8)}, 0).has_value());
  EXPECT_FALSE(
      private_run(t, ring_program(spec, 8), Groups{iota_group(8), iota_group(8)}, 0).has_value());
  spec.forward_on_arrival = false;
  EXPECT_FALSE(private_run(t, ring_program(spec, 8), Groups{iota_group(8)}, 0).has_value());
  CollectiveSpec hierarchical{Operation::kAllReduce, Algorithm::kHierarchical,
                              Bytes(std::int64_t{1} << 24)};
  hierarchical.levels = {4, 4};
  hierarchical.forward_on_arrival = true;
  EXPECT_FALSE(
      private_run(t, ring_program(hierarchical, 16), Groups{testing::strided_devices(16, 4)}, 0)
          .has_value());
}

}  // namespace
}  // namespace nest::coll
