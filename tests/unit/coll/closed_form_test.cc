// Closed forms of every algorithm on a non-blocking switch against the textbook alpha-beta
// formulas (tests/validation/reference/README.md, "Formulas worth testing against") and
// hand-derived ones where the reference has none.

#include "nest/coll/closed_form.h"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "coll_test_util.h"
#include "nest/coll/program.h"
#include "nest/coll/schedule.h"
#include "nest/core/error.h"
#include "nest/topo/loader.h"
#include "nest/topo/router.h"

namespace nest::coll {
namespace {

using testing::kRate;
using testing::star;
using testing::to_ps;

// Per-step latency on the star: device -> switch -> device.
constexpr double kAlpha = 1e-6;
const double kB = kRate.bytes_per_s();

std::vector<topo::DeviceId> first(int n) {
  std::vector<topo::DeviceId> g(static_cast<std::size_t>(n));
  std::iota(g.begin(), g.end(), 0U);
  return g;
}

double closed(const CollectiveSpec& spec, int n) {
  const topo::Topology t = star(16);
  topo::Router router(t);
  return closed_form(lower(spec, n), first(n), router).seconds;
}

TEST(ClosedForm, RingAllReduceIsTheTextbookFormula) {
  for (int n : {2, 3, 5, 8, 12}) {
    const double s = 2400.0 * n;
    const double expected = 2 * (n - 1) * kAlpha + 2.0 * (n - 1) / n * s / kB;
    EXPECT_EQ(to_ps(closed({Operation::kAllReduce, Algorithm::kRing, Bytes(2400 * n)}, n)),
              to_ps(expected))
        << n;
  }
}

TEST(ClosedForm, RingReduceScatterAndAllGatherAreHalfTheAllReduce) {
  for (int n : {3, 7, 16}) {
    const Bytes size(1000 * n);
    const double expected = (n - 1) * kAlpha + (n - 1.0) / n * size.as_double() / kB;
    EXPECT_EQ(to_ps(closed({Operation::kReduceScatter, Algorithm::kRing, size}, n)),
              to_ps(expected));
    EXPECT_EQ(to_ps(closed({Operation::kAllGather, Algorithm::kRing, size}, n)), to_ps(expected));
  }
}

TEST(ClosedForm, HalvingDoublingAllReduceIsTheTextbookFormula) {
  for (int n : {2, 4, 8, 16}) {
    const Bytes size(4096 * 16);
    const double expected = 2 * std::log2(n) * kAlpha + 2.0 * (n - 1) / n * size.as_double() / kB;
    EXPECT_EQ(to_ps(closed({Operation::kAllReduce, Algorithm::kHalvingDoubling, size}, n)),
              to_ps(expected))
        << n;
  }
  // Six ranks: two fold into partners (a + S/B each way) around a 4-rank halving-doubling.
  const Bytes size(4000);
  const double six = 2 * 2 * kAlpha + 2 * 3.0 / 4 * 4000 / kB + 2 * (kAlpha + 4000 / kB);
  EXPECT_EQ(to_ps(closed({Operation::kAllReduce, Algorithm::kHalvingDoubling, size}, 6)),
            to_ps(six));
}

TEST(ClosedForm, DirectAndPairwiseMatchTheirFormulas) {
  const int n = 8;
  const Bytes size(8000);
  const double s = 8000;
  // Direct allreduce: reduce-scatter then all-gather, each one step of (n-1) sends of S/n.
  EXPECT_EQ(to_ps(closed({Operation::kAllReduce, Algorithm::kDirect, size}, n)),
            to_ps(2 * kAlpha + 2.0 * (n - 1) / n * s / kB));
  EXPECT_EQ(to_ps(closed({Operation::kAllGather, Algorithm::kDirect, size}, n)),
            to_ps(kAlpha + (n - 1.0) / n * s / kB));
  EXPECT_EQ(to_ps(closed({Operation::kAllToAll, Algorithm::kDirect, size}, n)),
            to_ps(kAlpha + (n - 1.0) / n * s / kB));
  EXPECT_EQ(to_ps(closed({Operation::kAllToAll, Algorithm::kPairwise, size}, n)),
            to_ps((n - 1) * (kAlpha + s / n / kB)));
  EXPECT_EQ(to_ps(closed({Operation::kBroadcast, Algorithm::kDirect, size}, n)),
            to_ps(kAlpha + (n - 1) * s / kB));
  EXPECT_EQ(to_ps(closed({Operation::kSend, Algorithm::kDirect, size}, 2)), to_ps(kAlpha + s / kB));
}

// A chain of n ranks with the buffer in c pieces: (n-1) + (c-1) steps of a + S/(cB).
TEST(ClosedForm, PipelinedBroadcastIsTheChainFormula) {
  for (int c : {1, 2, 5}) {
    const int n = 6;
    const Bytes size(1000 * c);
    EXPECT_EQ(to_ps(closed({Operation::kBroadcast, Algorithm::kRing, size, c}, n)),
              to_ps((n - 1 + c - 1) * (kAlpha + 1000 / kB)))
        << c;
  }
}

// Double binary tree, 8 ranks, one piece. Tree 0: 1,3,5,7 -> 2,6 -> 4 -> 0 (root, one child);
// tree 1 is its mirror (r -> 7-r). Each tree carries S/2. Reduce: step 0 the leaves send (2
// and 6 receive two halves each: S), step 1 2,6 -> 4 (S into 4), step 2 4 -> 0 (S/2); the
// broadcast mirrors it: S/2, then S out of 4, then S out of 2 and 6. Tree 1 loads the mirrored
// ranks in the same steps, so: 4(a + S/B) + 2(a + S/(2B)) = 6a + 5S/B.
TEST(ClosedForm, DoubleBinaryTreeOfEightIsSixStepsOfFiveBuffers) {
  const Bytes size(64000);
  EXPECT_EQ(to_ps(closed({Operation::kAllReduce, Algorithm::kTree, size}, 8)),
            to_ps(6 * kAlpha + 5 * 64000 / kB));
}

// Two levels {4, 2}: 3 steps of S/4 inside, 1 of S/8 across, and back: 8a + 1.75 S/B (the flat
// ring's bandwidth term, 2·7/8 S/B, with 8 latencies instead of 14).
TEST(ClosedForm, HierarchicalSumsItsRings) {
  CollectiveSpec spec{Operation::kAllReduce, Algorithm::kHierarchical, Bytes(8000)};
  spec.levels = {4, 2};
  EXPECT_EQ(to_ps(closed(spec, 8)), to_ps(8 * kAlpha + 1.75 * 8000 / kB));
}

TEST(ClosedForm, ReportsStepsAndBottleneck) {
  const topo::Topology t = star(4);
  topo::Router router(t);
  const ClosedForm cf = closed_form(
      lower({Operation::kAllReduce, Algorithm::kRing, Bytes(4000)}, 4), first(4), router);
  EXPECT_EQ(cf.steps, 6U);
  EXPECT_EQ(cf.max_alpha, Time::microseconds(1));
  EXPECT_EQ(cf.bottleneck, kRate);
  EXPECT_EQ(to_ps(cf.latency_seconds), to_ps(6e-6));
  EXPECT_EQ(to_ps(cf.bandwidth_seconds), to_ps(6 * 1000 / kB));
}

// `inner`'s transfers, without saying it is a uniform ring: the closed form prices it step by
// step (a ring that forwards on arrival has no stored schedule to compare with).
class StepByStep final : public Program {
 public:
  explicit StepByStep(const Program& inner) : inner_(inner) {}
  [[nodiscard]] int ranks() const noexcept override { return inner_.ranks(); }
  [[nodiscard]] std::uint64_t transfer_count() const noexcept override {
    return inner_.transfer_count();
  }
  [[nodiscard]] std::uint32_t steps() const noexcept override { return inner_.steps(); }
  [[nodiscard]] std::uint64_t dense_gates() const noexcept override { return inner_.dense_gates(); }
  void initial_gates(std::vector<GateId>& out) const override { inner_.initial_gates(out); }
  [[nodiscard]] std::uint32_t waits(GateId gate) const override { return inner_.waits(gate); }
  void sends(GateId gate, std::vector<TransferId>& out) const override { inner_.sends(gate, out); }
  [[nodiscard]] Transfer transfer(TransferId id) const override { return inner_.transfer(id); }
  [[nodiscard]] std::array<GateId, 2> successors(TransferId id) const override {
    return inner_.successors(id);
  }
  void for_each_transfer(const std::function<void(const Transfer&)>& visit) const override {
    inner_.for_each_transfer(visit);
  }
  [[nodiscard]] bool waits_for_own_sends() const noexcept override {
    return inner_.waits_for_own_sends();
  }

 private:
  const Program& inner_;
};

// The implicit ring programs price each phase's step once and repeat its terms: the same
// numbers, bit for bit, as the stored schedule priced step by step (`lower` stores the same
// transfers), for ring, hierarchical and torus rings with one and several channels, rail
// rings, pipelined chunks and sizes that split evenly (repeated) or not (step by step), on the
// bundled H100 rail cluster (NVLink inside a node, rails between). Rings that forward on arrival
// are compared with the same program priced step by step (`StepByStep`).
TEST(ClosedForm, RepeatedRingStepsEqualTheStoredSchedule) {
  const topo::Topology t =
      topo::load_topology(std::string(NEST_SOURCE_DIR) + "/topologies/h100_rail_64.yaml");
  int repeated = 0;
  int forwarding = 0;
  for (const Algorithm a : {Algorithm::kRing, Algorithm::kHierarchical, Algorithm::kTorus}) {
    for (const Operation op :
         {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
      for (const int n : {8, 32}) {
        for (const int channels : {1, 2}) {
          for (const int rails : {0, 8}) {
            if ((channels == 1 && rails > 0) || (a != Algorithm::kRing && channels > 1)) continue;
            for (const int chunks : {1, 3}) {
              for (const std::int64_t size :
                   {std::int64_t{n} * chunks * channels * 1024, std::int64_t{1000003}}) {
                // NCCL's rings forward on arrival: uniform rings too, priced one step per phase.
                for (const bool forward : {false, true}) {
                  CollectiveSpec spec{op, a, Bytes(size), chunks};
                  spec.channels = channels;
                  spec.ranks_per_node = rails;
                  spec.forward_on_arrival = forward;
                  if (a != Algorithm::kRing) spec.levels = {8, n / 8};
                  try {
                    validate(spec, n);
                  } catch (const Error&) {
                    continue;
                  }
                  SCOPED_TRACE(
                      std::string(algorithm_name(a)) + " " + std::string(operation_name(op)) +
                      " n=" + std::to_string(n) + " channels=" + std::to_string(channels) +
                      " chunks=" + std::to_string(chunks) + " size=" + std::to_string(size) +
                      " forward=" + std::to_string(forward));
                  const auto program = ring_program(spec, n);
                  if (!program->uniform_ring().empty()) ++repeated;
                  if (forward && !program->uniform_ring().empty()) ++forwarding;
                  topo::Router ra(t, 5);
                  topo::Router rb(t, 5);
                  const ClosedForm x = closed_form(*program, first(n), ra, 5);
                  const ClosedForm y = forward ? closed_form(StepByStep(*program), first(n), rb, 5)
                                               : closed_form(lower(spec, n), first(n), rb, 5);
                  EXPECT_EQ(x.seconds, y.seconds);
                  EXPECT_EQ(x.latency_seconds, y.latency_seconds);
                  EXPECT_EQ(x.bandwidth_seconds, y.bandwidth_seconds);
                  EXPECT_EQ(x.steps, y.steps);
                  EXPECT_EQ(x.max_alpha, y.max_alpha);
                  EXPECT_EQ(x.bottleneck, y.bottleneck);
                }
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GT(repeated, 40);
  EXPECT_GT(forwarding, 20);
}

}  // namespace
}  // namespace nest::coll
