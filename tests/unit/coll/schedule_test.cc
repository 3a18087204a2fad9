// Lowering: transfer counts, bytes per rank, the dependency gates and the tree shapes.

#include "nest/coll/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <vector>

#include "nest/core/error.h"

namespace nest::coll {
namespace {

std::vector<std::int64_t> bytes_sent(const Schedule& s) {
  std::vector<std::int64_t> sent(static_cast<std::size_t>(s.ranks()), 0);
  for (const Transfer& t : s.transfers()) sent[t.src] += t.bytes.count();
  return sent;
}

std::vector<std::int64_t> bytes_received(const Schedule& s) {
  std::vector<std::int64_t> got(static_cast<std::size_t>(s.ranks()), 0);
  for (const Transfer& t : s.transfers()) got[t.dst] += t.bytes.count();
  return got;
}

TEST(SplitBytes, SpreadsTheRemainderOverTheFirstParts) {
  EXPECT_EQ(split_bytes(Bytes(10), 4, 0), Bytes(3));
  EXPECT_EQ(split_bytes(Bytes(10), 4, 1), Bytes(3));
  EXPECT_EQ(split_bytes(Bytes(10), 4, 2), Bytes(2));
  EXPECT_EQ(split_bytes(Bytes(10), 4, 3), Bytes(2));
  EXPECT_EQ(split_bytes(Bytes(3), 5, 4), Bytes(0));
}

// nccl-tests: in a ring allreduce every rank sends and receives 2(n-1) of the n chunks.
TEST(Lower, RingAllReduceMovesTwoNMinusOneChunksPerRank) {
  for (int n : {2, 3, 5, 8}) {
    const Bytes size(1200 * n);
    const Schedule s = lower({Operation::kAllReduce, Algorithm::kRing, size}, n);
    EXPECT_EQ(s.transfers().size(), static_cast<std::size_t>(2 * (n - 1) * n));
    EXPECT_EQ(s.steps(), static_cast<std::uint32_t>(2 * (n - 1)));
    for (std::int64_t b : bytes_sent(s)) EXPECT_EQ(b, 2 * (n - 1) * 1200) << n;
    for (std::int64_t b : bytes_received(s)) EXPECT_EQ(b, 2 * (n - 1) * 1200) << n;
  }
}

// Every bandwidth-optimal algorithm moves the same bytes per rank: 2(n-1)/n S for allreduce,
// (n-1)/n S for reduce-scatter and all-gather.
TEST(Lower, BandwidthOptimalAlgorithmsMoveTheTextbookBytes) {
  const int n = 8;
  const Bytes size(n * 1000);
  for (Algorithm a : {Algorithm::kRing, Algorithm::kHalvingDoubling, Algorithm::kDirect,
                      Algorithm::kHierarchical}) {
    CollectiveSpec spec{Operation::kAllReduce, a, size};
    if (a == Algorithm::kHierarchical) spec.levels = {2, 4};
    for (std::int64_t b : bytes_sent(lower(spec, n))) EXPECT_EQ(b, 14000) << algorithm_name(a);
    spec.op = Operation::kReduceScatter;
    for (std::int64_t b : bytes_sent(lower(spec, n))) EXPECT_EQ(b, 7000) << algorithm_name(a);
    spec.op = Operation::kAllGather;
    for (std::int64_t b : bytes_received(lower(spec, n))) EXPECT_EQ(b, 7000) << algorithm_name(a);
  }
}

TEST(Lower, UnevenSizesSplitIntoWholeBytesThatSumExactly) {
  const int n = 7;
  const Bytes size(1000003);
  // Ring reduce-scatter: each of the n chunks travels n-1 hops, so all transfers together
  // carry (n-1) times the buffer, whatever the remainders.
  const Schedule rs = lower({Operation::kReduceScatter, Algorithm::kRing, size}, n);
  EXPECT_EQ(rs.total_bytes(), Bytes(6 * 1000003));
  const Schedule a2a = lower({Operation::kAllToAll, Algorithm::kPairwise, size}, n);
  const auto sent = bytes_sent(a2a);
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(sent[static_cast<std::size_t>(i)], 1000003 - split_bytes(size, n, i).count());
  }
  const Schedule chunked = lower({Operation::kAllReduce, Algorithm::kRing, size, /*chunks=*/3}, n);
  EXPECT_EQ(chunked.total_bytes(), Bytes(2 * 6 * 1000003));
  EXPECT_EQ(chunked.transfers().size(), static_cast<std::size_t>(2 * 6 * 7 * 3));
}

// Ring step k of rank i waits for rank i's step k-1 send and for rank i-1's step k-1 send.
TEST(Lower, RingGatesWaitForOwnSendAndPredecessorOnly) {
  const int n = 5;
  const Schedule s = lower({Operation::kAllGather, Algorithm::kRing, Bytes(500)}, n);
  ASSERT_EQ(s.gates().size(), static_cast<std::size_t>(n * (n - 1)));
  for (const Gate& g : s.gates()) {
    EXPECT_EQ(g.count, 1U);
    EXPECT_EQ(g.waits, g.step == 0 ? 0U : 2U);
  }
  for (std::size_t i = 0; i < s.transfers().size(); ++i) {
    const Transfer& t = s.transfers()[i];
    const auto next = s.successors(i);
    if (t.step + 1 == s.steps()) {
      EXPECT_EQ(next[0], kNoGateId);
      EXPECT_EQ(next[1], kNoGateId);
      continue;
    }
    EXPECT_EQ(s.gates()[next[0]].rank, t.src);
    EXPECT_EQ(s.gates()[next[0]].step, t.step + 1);
    EXPECT_EQ(s.gates()[next[1]].rank, t.dst);
    EXPECT_EQ(s.gates()[next[1]].step, t.step + 1);
  }
}

// NCCL's 14-rank tree (src/graph/trees.cc): 0 -> 8; 8 -> 4, 12; 4 -> 2, 6; 12 -> 10, 13; ...
TEST(DoubleBinaryTree, FirstTreeIsNcclsInOrderTree) {
  const auto trees = double_binary_tree(14);
  const std::vector<int> parent = {-1, 2, 4, 2, 8, 6, 4, 6, 0, 10, 12, 10, 8, 12};
  EXPECT_EQ(trees[0], parent);
  // 13 ranks: the second tree is the first shifted by one rank (root 1, 9 under 1).
  const auto odd = double_binary_tree(13);
  EXPECT_EQ(odd[1][1], -1);
  EXPECT_EQ(odd[1][9], 1);
}

TEST(DoubleBinaryTree, TreesAreSpanningAndComplementary) {
  for (int n = 2; n <= 40; ++n) {
    const auto trees = double_binary_tree(n);
    std::vector<int> interior(static_cast<std::size_t>(n), 0);
    for (const auto& parent : trees) {
      int roots = 0;
      std::vector<int> children(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < n; ++r) {
        if (parent[static_cast<std::size_t>(r)] < 0) {
          ++roots;
          continue;
        }
        ++children[static_cast<std::size_t>(parent[static_cast<std::size_t>(r)])];
        int v = r;  // every rank reaches the root in fewer than n hops
        int hops = 0;
        while (parent[static_cast<std::size_t>(v)] >= 0 && hops < n) {
          v = parent[static_cast<std::size_t>(v)];
          ++hops;
        }
        EXPECT_LT(hops, n);
      }
      EXPECT_EQ(roots, 1) << n;
      for (int r = 0; r < n; ++r) {
        EXPECT_LE(children[static_cast<std::size_t>(r)], 2) << n;
        if (children[static_cast<std::size_t>(r)] > 0) ++interior[static_cast<std::size_t>(r)];
      }
    }
    // With an even count no rank is interior in both trees (the point of the double tree).
    if (n % 2 == 0) {
      for (int r = 0; r < n; ++r) EXPECT_LE(interior[static_cast<std::size_t>(r)], 1) << n;
    }
  }
}

TEST(Lower, HalvingDoublingFoldsExtraRanksIntoPartners) {
  const Bytes size(4000);
  const Schedule s = lower({Operation::kAllReduce, Algorithm::kHalvingDoubling, size}, 6);
  // p = 4: 2·4·log2(4) = 16 exchange transfers, plus 2 in and 2 out for the 2 extra ranks.
  EXPECT_EQ(s.transfers().size(), 20U);
  EXPECT_EQ(s.steps(), 6U);
  int folds = 0;
  for (const Transfer& t : s.transfers()) {
    if (t.bytes == size) {
      ++folds;
      EXPECT_TRUE((t.step == 0 && t.src % 2 == 0 && t.dst == t.src + 1 && t.src < 4) ||
                  (t.step == 5 && t.src % 2 == 1 && t.dst + 1 == t.src && t.src < 4));
    }
  }
  EXPECT_EQ(folds, 4);
}

TEST(Lower, PipelinedBroadcastChainsPieces) {
  const Schedule s = lower({Operation::kBroadcast, Algorithm::kRing, Bytes(900), 3}, 4);
  // Rank r forwards piece j at step r + j: steps 0..(n-2)+(c-1).
  EXPECT_EQ(s.transfers().size(), 9U);
  EXPECT_EQ(s.steps(), 5U);
  for (const Transfer& t : s.transfers()) {
    EXPECT_EQ(t.dst, t.src + 1);
    EXPECT_EQ(t.bytes, Bytes(300));
    EXPECT_GE(t.step, t.src);
    EXPECT_LE(t.step, t.src + 2);
  }
}

TEST(Lower, TooLargeScheduleIsAnInputError) {
  try {
    (void)lower({Operation::kAllReduce, Algorithm::kRing, Bytes::gibibytes(1)}, 50000);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--group: collective too large to lower: 4999900000 transfers (got \"50000 "
              "devices\"; expected fewer than 2^32 transfers (a smaller group or fewer chunks))");
  }
}

TEST(Lower, SingleRankHasNothingToDo) {
  const Schedule s = lower({Operation::kAllReduce, Algorithm::kRing, Bytes(100)}, 1);
  EXPECT_TRUE(s.transfers().empty());
  EXPECT_EQ(s.steps(), 0U);
}

TEST(Schedule, RejectsTransfersOutsideTheGroup) {
  EXPECT_THROW(Schedule(2, {Transfer{0, 2, 0, 0, Bytes(1)}}), Error);
  EXPECT_THROW(Schedule(2, {Transfer{1, 1, 0, 0, Bytes(1)}}), Error);
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

struct Key {
  std::uint32_t step, src, dst;
  std::int64_t bytes;
  friend auto operator<=>(const Key&, const Key&) = default;
};

std::vector<Key> keys(const Program& p) {
  std::vector<Key> out;
  p.for_each_transfer([&](const Transfer& t) {
    out.push_back({t.step, t.src, t.dst, t.bytes.count()});
  });
  std::sort(out.begin(), out.end());
  return out;
}

// The implicit ring program computes the same transfers and dependencies that lower() stores.
TEST(RingProgram, MatchesTheStoredScheduleTransferForTransfer) {
  struct Case {
    Operation op;
    Algorithm algorithm;
    int ranks;
    std::vector<int> levels;
    int chunks;
  };
  const std::vector<Case> cases = {
      {Operation::kAllReduce, Algorithm::kRing, 7, {}, 1},
      {Operation::kAllReduce, Algorithm::kRing, 5, {}, 3},
      {Operation::kReduceScatter, Algorithm::kRing, 6, {}, 2},
      {Operation::kAllGather, Algorithm::kRing, 4, {}, 1},
      {Operation::kAllReduce, Algorithm::kHierarchical, 6, {2, 3}, 1},
      {Operation::kAllReduce, Algorithm::kTorus, 16, {4, 2, 2}, 2},
      {Operation::kAllGather, Algorithm::kHierarchical, 12, {3, 1, 4}, 1},
  };
  for (const Case& c : cases) {
    CollectiveSpec spec{c.op, c.algorithm, Bytes(1000003), c.chunks, c.levels};
    const Schedule stored = lower(spec, c.ranks);
    const auto implicit = ring_program(spec, c.ranks);
    EXPECT_EQ(implicit->transfer_count(), stored.transfer_count());
    EXPECT_EQ(implicit->transfer_count(), transfer_count(spec, c.ranks));
    EXPECT_EQ(implicit->steps(), stored.steps());
    EXPECT_EQ(keys(*implicit), keys(stored)) << c.ranks;
    // Gate waits: every gate of step s > 0 waits for two arrivals, as in the stored schedule.
    std::vector<GateId> initial;
    implicit->initial_gates(initial);
    EXPECT_EQ(initial.size(), static_cast<std::size_t>(c.ranks));
    for (const Gate& g : stored.gates()) EXPECT_EQ(g.waits, g.step == 0 ? 0U : 2U);
  }
  EXPECT_THROW((void)ring_program({Operation::kAllToAll, Algorithm::kPairwise, Bytes(8)}, 4),
               Error);
}

TEST(LowerProgram, GoesImplicitAboveTheThreshold) {
  const CollectiveSpec ring{Operation::kAllReduce, Algorithm::kRing, Bytes(4096)};
  EXPECT_NE(dynamic_cast<const Schedule*>(lower_program(ring, 8).get()), nullptr);
  EXPECT_EQ(dynamic_cast<const Schedule*>(lower_program(ring, 8, 100).get()), nullptr);
  // The default threshold: 2 * 256 * 255 = 130,560 transfers are above 100,000.
  EXPECT_EQ(dynamic_cast<const Schedule*>(lower_program(ring, 256).get()), nullptr);
  EXPECT_NE(dynamic_cast<const Schedule*>(lower_program(ring, 128).get()), nullptr);
  // Pairwise all-to-alls too: 256 * 255 = 65,280 transfers stay stored, 384 * 383 do not.
  const CollectiveSpec a2a{Operation::kAllToAll, Algorithm::kPairwise, Bytes(4096)};
  EXPECT_EQ(dynamic_cast<const Schedule*>(lower_program(a2a, 8, 1).get()), nullptr);
  EXPECT_NE(dynamic_cast<const Schedule*>(lower_program(a2a, 256).get()), nullptr);
  EXPECT_EQ(dynamic_cast<const Schedule*>(lower_program(a2a, 384).get()), nullptr);
  // The direct all-to-all has no implicit form.
  const CollectiveSpec direct{Operation::kAllToAll, Algorithm::kDirect, Bytes(4096)};
  EXPECT_NE(dynamic_cast<const Schedule*>(lower_program(direct, 8, 1).get()), nullptr);
}

// The implicit pairwise program is the stored schedule read through its ids: every transfer
// (id for id), every gate's sends and waits, every transfer's successors and the initial gates,
// for group sizes 2..13 and a size that does not split evenly (1,000,003 bytes: the first
// size % n destinations get one byte more).
TEST(PairwiseProgram, MatchesTheStoredScheduleIdForId) {
  for (int n = 2; n <= 13; ++n) {
    SCOPED_TRACE(n);
    const CollectiveSpec spec{Operation::kAllToAll, Algorithm::kPairwise, Bytes(1000003)};
    const Schedule stored = lower(spec, n);
    const auto implicit = pairwise_program(spec, n);
    ASSERT_EQ(implicit->transfer_count(), stored.transfer_count());
    EXPECT_EQ(implicit->ranks(), n);
    EXPECT_EQ(implicit->steps(), stored.steps());
    EXPECT_EQ(implicit->dense_gates(), 0U);
    EXPECT_TRUE(implicit->waits_for_own_sends());
    EXPECT_TRUE(implicit->uniform_ring().empty());
    for (TransferId id = 0; id < stored.transfer_count(); ++id) {
      const Transfer a = stored.transfer(id);
      const Transfer b = implicit->transfer(id);
      EXPECT_EQ(b.src, a.src) << id;
      EXPECT_EQ(b.dst, a.dst) << id;
      EXPECT_EQ(b.step, a.step) << id;
      EXPECT_EQ(b.channel, a.channel) << id;
      EXPECT_EQ(b.bytes, a.bytes) << id;
      EXPECT_EQ(implicit->successors(id), stored.successors(id)) << id;
    }
    ASSERT_EQ(stored.gates().size(), stored.transfer_count());  // one send per gate
    for (GateId g = 0; g < stored.gates().size(); ++g) {
      EXPECT_EQ(implicit->waits(g), stored.waits(g)) << g;
      std::vector<TransferId> a;
      std::vector<TransferId> b;
      stored.sends(g, a);
      implicit->sends(g, b);
      EXPECT_EQ(b, a) << g;
    }
    std::vector<GateId> a;
    std::vector<GateId> b;
    stored.initial_gates(a);
    implicit->initial_gates(b);
    EXPECT_EQ(b, a);
  }
  try {
    (void)pairwise_program({Operation::kAllToAll, Algorithm::kDirect, Bytes(8)}, 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "internal error: pairwise_program: not a pairwise all-to-all of one channel over "
              "two ranks or more "
              "(direct, 4 ranks)");
  }
  EXPECT_THROW((void)pairwise_program({Operation::kAllToAll, Algorithm::kPairwise, Bytes(8)}, 1),
               Error);
  // Above 2^32 - 1 transfers, the error of `lower`.
  try {
    (void)pairwise_program({Operation::kAllToAll, Algorithm::kPairwise, Bytes(8)}, 70000);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--group: collective too large to lower: 4899930000 transfers (got \"70000 "
              "devices\"; expected fewer than 2^32 transfers (a smaller group or fewer chunks))");
  }
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// Program's contract: transfer ids run in nondecreasing step order, for stored schedules of
// every algorithm and for the implicit ring program (the contention-free evaluation relies on
// it); transfer(id) agrees with for_each_transfer's order, and so do the bulk transfers(first,
// out), in blocks of 7 (which cross every (step, channel) run: each has 6 transfers or fewer)
// and in one call over all the transfers.
TEST(Program, TransferIdsAreInStepOrder) {
  const auto check = [](const Program& p, const std::string& what) {
    std::vector<Transfer> visited;
    p.for_each_transfer([&](const Transfer& t) { visited.push_back(t); });
    ASSERT_EQ(visited.size(), p.transfer_count()) << what;
    std::vector<Transfer> bulk(visited.size());
    for (std::size_t first = 0; first < bulk.size(); first += 7) {
      p.transfers(first,
                  std::span(bulk).subspan(first, std::min<std::size_t>(7, bulk.size() - first)));
    }
    std::vector<Transfer> whole(visited.size());
    p.transfers(0, whole);
    const auto fields = [](const Transfer& t) {
      return std::tuple(t.src, t.dst, t.step, t.channel, t.bytes.count());
    };
    for (std::size_t id = 0; id < bulk.size(); ++id) {
      EXPECT_EQ(fields(bulk[id]), fields(visited[id])) << what << " id " << id << " (blocks)";
      EXPECT_EQ(fields(whole[id]), fields(visited[id])) << what << " id " << id << " (one call)";
    }
    for (TransferId id = 0; id < p.transfer_count(); ++id) {
      const Transfer t = p.transfer(id);
      if (id > 0) {
        EXPECT_LE(p.transfer(id - 1).step, t.step) << what << " id " << id;
      }
      EXPECT_EQ(t.step, visited[id].step) << what << " id " << id;
      EXPECT_EQ(t.src, visited[id].src) << what << " id " << id;
      EXPECT_EQ(t.dst, visited[id].dst) << what << " id " << id;
    }
  };
  int checked = 0;
  for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
                       Operation::kAllToAll, Operation::kBroadcast, Operation::kSend}) {
    for (Algorithm a : algorithms_for(op)) {
      CollectiveSpec spec{op, a, Bytes(1003), 2};  // 1003 bytes: uneven chunks and pieces
      if (a == Algorithm::kHierarchical || a == Algorithm::kTorus) spec.levels = {2, 3};
      try {
        validate(spec, 6);
      } catch (const Error&) {
        continue;
      }
      const std::string what =
          std::string(operation_name(op)) + " " + std::string(algorithm_name(a));
      check(*lower_program(spec, 6, 0), what + " (implicit when ring family or pairwise)");
      check(*lower_program(spec, 6), what);
      ++checked;
    }
  }
  EXPECT_GE(checked, 12);
  // The rings of several channels (NCCL's), with node-aware orders or rotations, uneven shares
  // and pieces: the bulk path computes each piece without a division per rank.
  for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
    for (const int per_node : {0, 2}) {
      CollectiveSpec spec{op, Algorithm::kRing, Bytes(100003), 3};
      spec.channels = 3;
      spec.ranks_per_node = per_node;
      check(*ring_program(spec, 6),
            std::string(operation_name(op)) + " channel rings " + std::to_string(per_node));
    }
  }
}

// The channel rings' pieces and successors as their id arithmetic defines them, computed here
// the long way (three nested split_bytes and a modulo per id): the program computes pieces from
// per-channel splits and positions without a modulo, for each transfer the event simulation
// starts. Uneven shares, chunks and pieces (100,003 bytes, 3 channels, 3 chunks), odd and even
// rings, NCCL's forwarding rings and rings that wait for their own sends.
TEST(Program, ChannelRingPiecesAndSuccessorsFollowTheirIds) {
  for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
    for (const int n : {5, 6}) {
      for (const bool forward : {false, true}) {
        CollectiveSpec spec{op, Algorithm::kRing, Bytes(100003), 3};
        spec.channels = 3;
        spec.forward_on_arrival = forward;
        const auto program = ring_program(spec, n);
        const std::string what = std::string(operation_name(op)) + " n " + std::to_string(n) +
                                 (forward ? " forwarding" : " own sends");
        // Position p of channel c sends to position p + 1: step 0 lists those pairs in id order.
        const auto pairs = program->distinct_pairs();
        ASSERT_TRUE(pairs.has_value());
        ASSERT_EQ(pairs->size(), 3U * static_cast<std::size_t>(n));
        const std::uint64_t per_step = 3U * static_cast<std::uint64_t>(n);
        const std::uint64_t ring_steps = 3U * static_cast<std::uint64_t>(n - 1);
        const std::uint64_t scatter_steps = op == Operation::kAllGather ? 0 : ring_steps;
        const std::uint64_t steps =
            scatter_steps + (op == Operation::kReduceScatter ? 0 : ring_steps);
        ASSERT_EQ(program->transfer_count(), steps * per_step) << what;
        std::int64_t total = 0;
        for (TransferId id = 0; id < program->transfer_count(); ++id) {
          const std::uint64_t step = id / per_step;
          const auto c = static_cast<std::int64_t>(id % per_step / static_cast<std::uint64_t>(n));
          const auto p = static_cast<std::int64_t>(id % static_cast<std::uint64_t>(n));
          const bool scatter = step < scatter_steps;
          const auto into = static_cast<std::int64_t>(scatter ? step : step - scatter_steps);
          const std::int64_t chunk = ((scatter ? p - into / 3 - 1 : p - into / 3) % n + n) % n;
          const Bytes piece =
              split_bytes(split_bytes(split_bytes(spec.size, 3, c), n, chunk), 3, into % 3);
          const Transfer t = program->transfer(id);
          EXPECT_EQ(t.bytes, piece) << what << " id " << id;
          EXPECT_EQ(t.step, step) << what << " id " << id;
          EXPECT_EQ(t.channel, c) << what << " id " << id;
          const RankPair& pair = (*pairs)[static_cast<std::size_t>(c * n + p)];
          EXPECT_EQ(t.src, pair.src) << what << " id " << id;
          EXPECT_EQ(t.dst, pair.dst) << what << " id " << id;
          total += t.bytes.count();
          std::array<GateId, 2> next{kNoGateId, kNoGateId};
          if (step + 1 < steps) {
            const std::uint64_t base = (step + 1) * per_step + static_cast<std::uint64_t>(c * n);
            next = {forward ? kNoGateId : base + static_cast<std::uint64_t>(p),
                    base + static_cast<std::uint64_t>((p + 1) % n)};
          }
          EXPECT_EQ(program->successors(id), next) << what << " id " << id;
        }
        // Each step of a phase sends every chunk's piece of that step once (the positions send
        // distinct chunks): (n - 1) times the size per phase.
        const std::int64_t phases = op == Operation::kAllReduce ? 2 : 1;
        EXPECT_EQ(total, phases * (n - 1) * spec.size.count()) << what;
      }
    }
  }
}

// Program::distinct_pairs, where a program lists its pairs (the ring family), is exactly the
// first-use order of the pairs its transfers visit: flat, hierarchical and torus rings of every
// ring operation, chunked or not, and channel rings with node-aware orders or rotations. The
// oracle keys a layout's structure on that list, so a different order would change which
// layouts share a simulation.
TEST(Program, RingsListTheirDistinctPairsInOrderOfFirstUse) {
  const auto visited_pairs = [](const Program& p) {
    std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint16_t>> out;
    p.for_each_transfer([&](const Transfer& t) {
      const auto key = std::tuple(t.src, t.dst, t.channel);
      if (std::find(out.begin(), out.end(), key) == out.end()) out.push_back(key);
    });
    return out;
  };
  const auto listed_pairs = [](const Program& p) {
    std::vector<std::tuple<std::uint32_t, std::uint32_t, std::uint16_t>> out;
    const auto listed = p.distinct_pairs();
    if (!listed) return out;
    for (const RankPair& q : *listed) out.emplace_back(q.src, q.dst, q.channel);
    return out;
  };
  int checked = 0;
  for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather}) {
    for (const auto& [algorithm, ranks, levels] :
         std::vector<std::tuple<Algorithm, int, std::vector<int>>>{
             {Algorithm::kRing, 7, {}},
             {Algorithm::kHierarchical, 6, {2, 3}},
             {Algorithm::kHierarchical, 12, {3, 1, 4}},
             {Algorithm::kTorus, 16, {4, 2, 2}},
             {Algorithm::kTorus, 4, {2, 2}}}) {
      for (const int chunks : {1, 3}) {
        const CollectiveSpec spec{op, algorithm, Bytes(1000003), chunks, levels};
        const auto program = ring_program(spec, ranks);
        ASSERT_TRUE(program->distinct_pairs().has_value());
        const auto expected = visited_pairs(*program);
        EXPECT_EQ(listed_pairs(*program), expected)
            << operation_name(op) << " " << algorithm_name(algorithm) << " " << ranks;
        EXPECT_FALSE(expected.empty());
        ++checked;
      }
    }
    for (const int per_node : {0, 2}) {
      CollectiveSpec spec{op, Algorithm::kRing, Bytes(100003), 2};
      spec.channels = 3;
      spec.ranks_per_node = per_node;
      const auto program = ring_program(spec, 6);
      const auto expected = visited_pairs(*program);
      EXPECT_EQ(expected.size(), 18U);  // 3 channels x 6 positions
      EXPECT_EQ(listed_pairs(*program), expected) << operation_name(op) << " channels " << per_node;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 36);
  // Stored schedules and other programs do not list them: the oracle visits their transfers.
  EXPECT_FALSE(lower_program({Operation::kAllReduce, Algorithm::kRing, Bytes(4096)}, 8)
                   ->distinct_pairs()
                   .has_value());
  EXPECT_FALSE(pairwise_program({Operation::kAllToAll, Algorithm::kPairwise, Bytes(4096)}, 8)
                   ->distinct_pairs()
                   .has_value());
}

}  // namespace
}  // namespace nest::coll

namespace nest::coll {
namespace {

// Everything of a schedule that a run reads: ranks, steps, total bytes, every transfer, gate
// and successor, field by field.
void expect_same_schedule(const Schedule& got, const Schedule& want, const std::string& what) {
  ASSERT_EQ(got.ranks(), want.ranks()) << what;
  ASSERT_EQ(got.steps(), want.steps()) << what;
  ASSERT_EQ(got.total_bytes(), want.total_bytes()) << what;
  ASSERT_EQ(got.transfer_count(), want.transfer_count()) << what;
  ASSERT_EQ(got.gates().size(), want.gates().size()) << what;
  for (TransferId id = 0; id < want.transfer_count(); ++id) {
    const Transfer a = got.transfer(id);
    const Transfer b = want.transfer(id);
    ASSERT_EQ(std::tuple(a.src, a.dst, a.step, a.channel, a.bytes.count()),
              std::tuple(b.src, b.dst, b.step, b.channel, b.bytes.count()))
        << what << " transfer " << id;
    ASSERT_EQ(got.successors(id), want.successors(id)) << what << " transfer " << id;
  }
  for (std::size_t g = 0; g < want.gates().size(); ++g) {
    const Gate& a = got.gates()[g];
    const Gate& b = want.gates()[g];
    ASSERT_EQ(std::tuple(a.first, a.count, a.waits, a.rank, a.step, a.channel),
              std::tuple(b.first, b.count, b.waits, b.rank, b.step, b.channel))
        << what << " gate " << g;
  }
}

// A collective lowered like the same collective at another size (the oracle's probes and
// walks lower one shape at many sizes) is the schedule lowered afresh, transfer for transfer,
// gate for gate, and shares the other's dependencies: every algorithm and operation, odd and
// even groups, one and three pieces, sizes with remainders and sizes smaller than the pieces
// (zero-byte transfers), several channels along rails.
TEST(Schedule, LoweredLikeAnotherSizeIsTheSameSchedule) {
  int shared = 0;
  for (Operation op : {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
                       Operation::kAllToAll, Operation::kBroadcast, Operation::kReduce,
                       Operation::kGather, Operation::kScatter, Operation::kSend}) {
    for (Algorithm a : algorithms_for(op)) {
      for (const int n : {2, 5, 6}) {
        for (const int chunks : {1, 3}) {
          CollectiveSpec spec{op, a, Bytes(1003), chunks};
          if (a == Algorithm::kHierarchical || a == Algorithm::kTorus) {
            if (n != 6) continue;
            spec.levels = {2, 3};
          }
          try {
            validate(spec, n);
          } catch (const Error&) {
            continue;
          }
          for (const auto& [from, to] : {std::pair<std::int64_t, std::int64_t>{1003, 64 << 20},
                                         {64 << 20, 1003},
                                         {2, 100'003}}) {
            CollectiveSpec at_from = spec;
            at_from.size = Bytes(from);
            CollectiveSpec at_to = spec;
            at_to.size = Bytes(to);
            const std::string what = std::string(operation_name(op)) + " " +
                                     std::string(algorithm_name(a)) + " n " + std::to_string(n) +
                                     " chunks " + std::to_string(chunks) + " " +
                                     std::to_string(from) + " -> " + std::to_string(to);
            const Schedule like = lower(at_from, n);
            const Schedule got = lower(at_to, n, &like);
            expect_same_schedule(got, lower(at_to, n), what);
            EXPECT_TRUE(got.shares_dependencies_with(like)) << what;
            ++shared;
          }
        }
      }
    }
  }
  EXPECT_GE(shared, 150);
  // Rings of several channels along rails (stored from the implicit program's transfers).
  CollectiveSpec rails{Operation::kAllGather, Algorithm::kRing, Bytes(100'003), 2};
  rails.channels = 2;
  rails.ranks_per_node = 2;
  const Schedule like = lower(rails, 8);
  rails.size = Bytes(1 << 30);
  const Schedule got = lower(rails, 8, &like);
  expect_same_schedule(got, lower(rails, 8), "channel rings");
  EXPECT_TRUE(got.shares_dependencies_with(like));
  // The shared path through `lower_program`, as the oracle calls it.
  const auto program = lower_program(rails, 8, kImplicitAbove, &like);
  const auto* stored = dynamic_cast<const Schedule*>(program.get());
  ASSERT_NE(stored, nullptr);
  EXPECT_TRUE(stored->shares_dependencies_with(like));
  expect_same_schedule(*stored, got, "channel rings through lower_program");
}

// A `like` that does not match (another rank count, algorithm or order of transfers) is not
// shared: the schedule is built afresh, the same as without it; a bad transfer still throws.
TEST(Schedule, UnlikeSchedulesAreBuiltAfresh) {
  const CollectiveSpec tree{Operation::kAllReduce, Algorithm::kTree, Bytes(1 << 20), 4};
  const CollectiveSpec ring{Operation::kAllReduce, Algorithm::kRing, Bytes(1 << 20)};
  const Schedule tree6 = lower(tree, 6);
  const Schedule tree5 = lower(tree, 5, &tree6);
  EXPECT_FALSE(tree5.shares_dependencies_with(tree6));
  expect_same_schedule(tree5, lower(tree, 5), "tree of 5 like one of 6");
  const Schedule ring6 = lower(ring, 6, &tree6);
  EXPECT_FALSE(ring6.shares_dependencies_with(tree6));
  expect_same_schedule(ring6, lower(ring, 6), "ring like a tree");

  // The same transfers given in another order: another placement, so not shared.
  const std::vector<Transfer> given{{0, 1, 1, 0, Bytes(5)},
                                    {1, 2, 0, 0, Bytes(6)},
                                    {2, 0, 0, 0, Bytes(7)},
                                    {0, 2, 1, 0, Bytes(8)}};
  std::vector<Transfer> swapped = given;
  std::swap(swapped[1], swapped[2]);
  const Schedule first(3, given);
  const Schedule second(3, swapped, first);
  EXPECT_FALSE(second.shares_dependencies_with(first));
  expect_same_schedule(second, Schedule(3, swapped), "reordered transfers");
  // New bytes at the same places: shared, with the new bytes and total.
  std::vector<Transfer> resized = given;
  for (Transfer& t : resized) t.bytes = Bytes(t.bytes.count() * 10);
  const Schedule third(3, resized, first);
  EXPECT_TRUE(third.shares_dependencies_with(first));
  EXPECT_EQ(third.total_bytes(), Bytes(260));
  expect_same_schedule(third, Schedule(3, resized), "resized transfers");
  // Transfers whose places differ only in their step, or only in their channel: not shared.
  for (const bool by_step : {true, false}) {
    const std::vector<Transfer> two{
        {0, 1, 0, 0, Bytes(5)},
        {0, 1, by_step ? 1U : 0U, static_cast<std::uint16_t>(by_step ? 0 : 1), Bytes(6)}};
    const std::vector<Transfer> turned{two[1], two[0]};
    const Schedule like(2, two);
    const Schedule other(2, turned, like);
    EXPECT_FALSE(other.shares_dependencies_with(like)) << (by_step ? "step" : "channel");
    expect_same_schedule(other, Schedule(2, turned),
                         by_step ? "steps swapped" : "channels swapped");
  }
  // Moved: the schedule moves whole, and the one moved from has no transfers, gates or steps.
  Schedule moved_from = lower(tree, 6);
  const Schedule moved = std::move(moved_from);
  expect_same_schedule(moved, tree6, "moved");
  // NOLINTBEGIN(bugprone-use-after-move): what a moved-from schedule holds is specified
  EXPECT_EQ(moved_from.transfer_count(), 0U);
  EXPECT_TRUE(moved_from.gates().empty());
  EXPECT_EQ(moved_from.steps(), 0U);
  EXPECT_EQ(moved_from.total_bytes(), Bytes(0));
  Schedule assigned = lower(ring, 6);
  assigned = std::move(moved_from);
  EXPECT_EQ(assigned.transfer_count(), 0U);
  EXPECT_TRUE(assigned.gates().empty());
  // NOLINTEND(bugprone-use-after-move)
  // Negative bytes are refused on either path.
  resized[3].bytes = Bytes(-1);
  EXPECT_THROW(Schedule(3, resized, first), Error);
}

}  // namespace
}  // namespace nest::coll
