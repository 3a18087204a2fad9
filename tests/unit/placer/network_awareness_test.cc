// Network awareness, shown (issue 5): the same workload gets different plans on different
// networks, and the plan chosen for a network beats, on that network, the plan chosen for
// another. Workload: GPT-3 175B (workloads/models) on H100s (workloads/accelerators), megatron
// rules, micro-batches 1 and 2, tensor parallel up to 8.
//
// Networks, 128 devices each:
// - rail-optimized, 64 nodes of 2 GPUs (tensor groups of 4 or 8 span nodes and cross rails
//   through the spine), 8 nodes per leaf, NVLink 450 GB/s, NICs and spine cables 400 Gb/s;
//   full bisection with 8 spines, 4:1 oversubscribed with 2;
// - a 4 x 4 x 8 torus of 400 Gb/s links.
// (On DGX-style 8-GPU nodes with rail-aligned plans, 4:1 oversubscription changes nothing: the
// traffic of the best plans never leaves its rail. results/placer_network.md shows it.)

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "nest/core/error.h"
#include "nest/placer/cost_model.h"
#include "nest/placer/oracle_comm_cost.h"
#include "nest/placer/search.h"
#include "nest/placer/variants.h"
#include "nest/topo/generators.h"
#include "nest/workload/accelerator.h"
#include "nest/workload/model.h"
#include "nest/workload/model_profile.h"
#include "unit/placer/fixtures.h"
#include "unit/placer/printers.h"

namespace nest::placer {
namespace {

topo::Topology rail(int spines) {
  return topo::build_rail_optimized({.nodes = 64,
                                     .gpus_per_node = 2,
                                     .nodes_per_leaf = 8,
                                     .spines = spines,
                                     .nvlink_bandwidth = Bandwidth::gigabytes_per_second(450),
                                     .nvlink_latency = Time::microseconds(0.5),
                                     .nic_bandwidth = Bandwidth::gigabits_per_second(400),
                                     .nic_latency = Time::microseconds(1),
                                     .spine_bandwidth = Bandwidth::gigabits_per_second(400),
                                     .spine_latency = Time::microseconds(1)});
}

class NetworkAwareness : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = NEST_SOURCE_DIR;
    const auto model = workload::load_model(root + "/workloads/models/gpt3-175b.yaml");
    const auto device = workload::load_accelerator(root + "/workloads/accelerators/h100-sxm.yaml");
    const workload::BuildOptions build;
    CandidateOptions candidates;
    candidates.micro_batches = {1, 2};
    profile_ =
        workload::build_profile(model, device, candidate_configs(model, build, candidates), build);
    options_.cost = {.rules = workload::MemoryRules::kMegatron,
                     .devices = 128,
                     .memory_bandwidth = device.hbm_bandwidth * device.memory_efficiency};
    // 1F1B plans (results/placer_network.md); interleaving hides the difference here.
    options_.virtual_stages = {1};
  }

  Plan best_on(CommCost& network) {
    const SearchResult r = search(profile_, network, options_);
    EXPECT_TRUE(r.best.has_value()) << r.infeasible_reason;
    return *r.best;
  }

  workload::LayerProfile profile_;
  SearchOptions options_;
};

TEST_F(NetworkAwareness, OversubscribedRailClusterGetsItsOwnBetterPlan) {
  const topo::Topology full = rail(8);
  const topo::Topology over = rail(2);
  OracleCommCost on_full(full);
  OracleCommCost on_over(over);
  // With the stages' syncs priced together (the default since issue 15) the stages' rings,
  // which cross the spine in both clusters, contend in both, and both get the 4:1 cluster's
  // plan: the same choice and price on the 4:1 cluster.
  const Plan joint_full = best_on(on_full);
  const Plan joint_over = best_on(on_over);
  EXPECT_EQ(joint_full.choice, joint_over.choice);
  // Priced as before issue 15 (each stage's sync alone, the boundary transfers in every
  // microbatch slot), each cluster gets its own plan. (With the transfers overlapped and the
  // syncs alone the two get the same plan too: what told them apart was the transfers.)
  options_.cost.joint_data_parallel_sync = false;
  options_.cost.overlap_boundary_transfers = false;
  const Plan for_full = best_on(on_full);
  const Plan for_over = best_on(on_over);
  EXPECT_NE(for_full.choice, for_over.choice);
  // Each plan is the better one on its own network.
  const Plan full_plan_on_over = evaluate(profile_, for_full.choice, on_over, options_.cost);
  const Plan over_plan_on_full = evaluate(profile_, for_over.choice, on_full, options_.cost);
  EXPECT_LT(for_over.iteration_time, full_plan_on_over.iteration_time);
  EXPECT_LE(for_full.iteration_time, over_plan_on_full.iteration_time);
  // Oversubscription never makes a plan faster.
  EXPECT_GE(full_plan_on_over.iteration_time, for_full.iteration_time);
}

TEST_F(NetworkAwareness, TorusGetsItsOwnBetterPlan) {
  const topo::Topology full = rail(8);
  const topo::Topology torus =
      topo::build_torus({.dims = {4, 4, 8},
                         .link_bandwidth = Bandwidth::gigabits_per_second(400),
                         .link_latency = Time::microseconds(1)});
  OracleCommCost on_full(full);
  OracleCommCost on_torus(torus);
  const Plan for_full = best_on(on_full);
  const Plan for_torus = best_on(on_torus);
  EXPECT_NE(for_full.choice, for_torus.choice);
  const Plan full_plan_on_torus = evaluate(profile_, for_full.choice, on_torus, options_.cost);
  EXPECT_LT(for_torus.iteration_time, full_plan_on_torus.iteration_time);
  // The torus has no NVLink: the full-bisection plan's tensor-parallel collectives dominate its
  // loss there.
  EXPECT_GT(full_plan_on_torus.breakdown.collectives, for_full.breakdown.collectives);
}

// keep_per_order (nest place --verify): the search keeps the best k plans of each placement
// order; its best is the same plan as without them, and the best of each order is the plan of
// the search restricted to that order.
TEST_F(NetworkAwareness, KeepsTheBestPlansOfEachOrder) {
  const topo::Topology over = rail(2);
  OracleCommCost network(over);
  const Plan best = best_on(network);
  SearchOptions keep = options_;
  keep.keep_per_order = 3;
  const SearchResult kept = search(profile_, network, keep);
  ASSERT_TRUE(kept.best);
  EXPECT_EQ(kept.best->choice, best.choice);
  EXPECT_EQ(kept.best->iteration_time, best.iteration_time);
  ASSERT_EQ(kept.candidates.size(), 6u);  // 3 of each of the 2 orders
  EXPECT_EQ(kept.candidates.front().choice, best.choice);
  for (std::size_t i = 0; i < kept.candidates.size(); ++i) {
    const Plan& c = kept.candidates[i];
    EXPECT_EQ(c.iteration_time,
              evaluate(profile_, c.choice, network, options_.cost).iteration_time);
    if (i > 0) {
      EXPECT_LE(kept.candidates[i - 1].iteration_time, c.iteration_time);
    }
    for (std::size_t j = 0; j < i; ++j) {
      EXPECT_NE(kept.candidates[j].choice, c.choice);
    }
  }
  for (const PlacementOrder order : options_.orders) {
    SearchOptions one = options_;
    one.orders = {order};
    const SearchResult r = search(profile_, network, one);
    ASSERT_TRUE(r.best);
    const auto first = std::find_if(kept.candidates.begin(), kept.candidates.end(),
                                    [&](const Plan& c) { return c.choice.order == order; });
    ASSERT_NE(first, kept.candidates.end());
    EXPECT_EQ(first->iteration_time, r.best->iteration_time);
    // Every kept plan of the order is no faster than that order's best and the others it beat.
    int of_order = 0;
    for (const Plan& c : kept.candidates) {
      if (c.choice.order != order) continue;
      ++of_order;
      EXPECT_GE(c.iteration_time, r.best->iteration_time);
    }
    EXPECT_EQ(of_order, 3);
  }
  EXPECT_TRUE(search(profile_, network, options_).candidates.empty());
  SearchOptions bad = options_;
  bad.keep_per_order = -1;
  try {
    (void)search(profile_, network, bad);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "keep_per_order: negative number of plans to keep (got \"-1\"; expected an integer "
              ">= 0)");
  }
}

// Hand-computed: orders A A B A B with plan 0 over memory. The first that fits of each order
// (1 for A, 2 for B) always; then the next that fit, in order, up to K in all.
TEST(ReplaySelection, TakesTheFirstOfEachOrderThenTheRestUpToK) {
  const PlacementOrder a = PlacementOrder::kTensorPipelineData;
  const PlacementOrder b = PlacementOrder::kTensorDataPipeline;
  std::vector<Plan> plans(5);
  const std::vector<PlacementOrder> orders = {a, a, b, a, b};
  for (std::size_t i = 0; i < plans.size(); ++i) {
    plans[i].choice.order = orders[i];
    plans[i].capacity = Bytes(100);
    plans[i].stages.push_back(StageReport{});
    plans[i].stages.back().memory.weights = Bytes(i == 0 ? 101 : 100);
  }
  ASSERT_FALSE(plans[0].fits());
  using Take = std::vector<bool>;
  EXPECT_EQ(replay_selection(plans, 0), (Take{false, true, true, false, false}));
  EXPECT_EQ(replay_selection(plans, 1), (Take{false, true, true, false, false}));
  EXPECT_EQ(replay_selection(plans, 3), (Take{false, true, true, true, false}));
  EXPECT_EQ(replay_selection(plans, 9), (Take{false, true, true, true, true}));
  EXPECT_TRUE(replay_selection({}, 4).empty());
}

// `search(..., {.kept})` tells of every plan it keeps, as it keeps it: the search is the one
// without it, every final candidate is among the plans told, and the verification's selection
// of the distinct plans told (by time, then first told) is the final candidates, which is what
// `job::Job::search(verify_with)` replays before the search ends.
TEST_F(NetworkAwareness, TheKeptPlansToldAheadHoldTheCandidates) {
  const topo::Topology over = rail(2);
  for (const int k : {1, 2, 4, 6}) {
    OracleCommCost network(over);
    SearchOptions replay = options_;
    replay.replay_candidates = k;
    const SearchResult plain = search(profile_, network, replay);
    std::vector<Plan> told;
    const SearchResult watched =
        search(profile_, network, replay, {.kept = [&told](const Plan& p) { told.push_back(p); }});
    ASSERT_TRUE(plain.best && watched.best);
    EXPECT_EQ(watched.best->choice, plain.best->choice);
    ASSERT_EQ(watched.candidates.size(), plain.candidates.size()) << "K = " << k;
    EXPECT_GE(told.size(), plain.candidates.size());
    // Distinct as the verification counts candidates (`same_candidate`, as EarlyReplays does).
    std::vector<Plan> distinct;
    for (const Plan& p : told) {
      const bool again = std::any_of(distinct.begin(), distinct.end(),
                                     [&](const Plan& q) { return same_candidate(q, p); });
      if (!again) distinct.push_back(p);
    }
    std::stable_sort(distinct.begin(), distinct.end(), [](const Plan& a, const Plan& b) {
      return a.iteration_time < b.iteration_time;
    });
    const std::vector<bool> take = replay_selection(distinct, static_cast<std::size_t>(k));
    std::vector<Plan> selected;
    for (std::size_t i = 0; i < distinct.size(); ++i) {
      if (take[i]) selected.push_back(distinct[i]);
    }
    ASSERT_EQ(selected.size(), plain.candidates.size()) << "K = " << k;
    for (std::size_t i = 0; i < selected.size(); ++i) {
      EXPECT_EQ(watched.candidates[i].choice, plain.candidates[i].choice) << "K = " << k;
      EXPECT_EQ(watched.candidates[i].iteration_time, plain.candidates[i].iteration_time);
      EXPECT_EQ(selected[i], plain.candidates[i]) << "K = " << k << ", #" << i;
    }
  }
}

// replay_candidates K (nest place --verify K): the search keeps exactly the plans the
// verification replays (the best of each order, then the best of the rest up to K), the set
// that the K best plans of each order yield, and prices no more plans than keep_per_order K.
TEST_F(NetworkAwareness, ReplayCandidatesAreWhatTheKBestOfEachOrderYield) {
  const topo::Topology over = rail(2);
  OracleCommCost network(over);
  // The verification's selection (replay_selection, as job::Job::verify applies it) from a
  // list by (time, order found).
  auto select = [](const std::vector<Plan>& all, std::size_t k) {
    const std::vector<bool> take = replay_selection(all, k);
    std::vector<Plan> out;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (take[i]) out.push_back(all[i]);
    }
    return out;
  };
  const std::vector<std::size_t> expected_sizes = {2, 2, 3, 4, 6};
  const std::vector<int> ks = {1, 2, 3, 4, 6};
  std::int64_t priced_k4 = 0;
  std::int64_t priced_k4_per_order = 0;
  for (std::size_t n = 0; n < ks.size(); ++n) {
    const int k = ks[n];
    SearchOptions per_order = options_;
    per_order.keep_per_order = k;
    const SearchResult wide = search(profile_, network, per_order);
    SearchOptions replay = options_;
    replay.replay_candidates = k;
    const SearchResult narrow = search(profile_, network, replay);
    ASSERT_TRUE(wide.best && narrow.best);
    EXPECT_EQ(narrow.best->choice, wide.best->choice);
    const std::vector<Plan> want = select(wide.candidates, static_cast<std::size_t>(k));
    ASSERT_EQ(want.size(), expected_sizes[n]) << "K = " << k;
    ASSERT_EQ(narrow.candidates.size(), want.size()) << "K = " << k;
    for (std::size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(narrow.candidates[i].choice, want[i].choice) << "K = " << k << ", #" << i;
      EXPECT_EQ(narrow.candidates[i].iteration_time, want[i].iteration_time);
    }
    EXPECT_EQ(select(narrow.candidates, static_cast<std::size_t>(k)).size(), want.size());
    EXPECT_LE(narrow.stats.candidates, wide.stats.candidates) << "K = " << k;
    if (k == 4) {
      priced_k4 = narrow.stats.candidates;
      priced_k4_per_order = wide.stats.candidates;
    }
  }
  // Two orders, K = 4: the second order's 2nd to 4th plans need not be priced.
  EXPECT_LT(priced_k4, priced_k4_per_order);
  SearchOptions both = options_;
  both.keep_per_order = 2;
  both.replay_candidates = 2;
  try {
    (void)search(profile_, network, both);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "replay_candidates: keep_per_order and replay_candidates are exclusive (got \"2\"; "
              "expected 0 with keep_per_order > 0)");
  }
  SearchOptions negative = options_;
  negative.replay_candidates = -1;
  try {
    (void)search(profile_, network, negative);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "replay_candidates: negative number of candidates to replay (got \"-1\"; expected "
              "an integer >= 0)");
  }
}

}  // namespace
}  // namespace nest::placer
