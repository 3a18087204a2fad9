// Chakra ET export and import: a small replay by hand (two stages, two replicas, two gradient
// buckets) becomes the graphs counted below, survives writing and reading back unchanged, and
// broken folders are refused naming the file, the node and the key.

#include "nest/chakra/chakra.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "nest/core/error.h"
#include "nest/net/simulator.h"
#include "nest/replay/replay.h"
#include "nest/topo/router.h"

namespace nest::chakra {
namespace {

namespace fs = std::filesystem;
using replay::RunRecord;

constexpr auto kRate = Bandwidth::gigabytes_per_second(100);  // 10 ps per byte

// d0 - d1 - d2 - d3, 100 GB/s, 1 us per hop.
topo::Topology chain() {
  topo::Topology t("chain", topo::Family::kExplicit);
  for (int i = 0; i < 4; ++i) t.add_device("d" + std::to_string(i));
  for (topo::NodeId i = 0; i + 1 < 4; ++i) t.add_link(i, i + 1, kRate, Time::microseconds(1));
  return t;
}

// A two-rank allreduce as two direct exchanges of half the bytes.
replay::AllreduceLauncher two_rank(net::Simulator& sim, topo::Router& router) {
  return [&sim, &router](std::span<const topo::DeviceId> group, Bytes size,
                         std::function<void()> done) {
    const Bytes half(size.count() / 2);
    auto left = std::make_shared<int>(2);
    auto next = [left, done](net::FlowId, Time) {
      if (--*left == 0) done();
    };
    sim.start_flow(router.route(group[0], group[1]), half, next);
    sim.start_flow(router.route(group[1], group[0]), half, next);
    return std::string("direct");
  };
}

// Replica r, stage g on device 2r + g; two microbatches per replica; 1 MB transfers; 2 MB of
// gradients in two buckets; an optimizer step of 5 us.
RunRecord sample_run() {
  static const topo::Topology t = chain();
  replay::ReplayInput in;
  for (int g = 0; g < 2; ++g) {
    replay::StageSpec s;
    s.first_layer = 2 * g;
    s.last_layer = 2 * g + 2;
    s.forward = Time::microseconds(10);
    s.backward = Time::microseconds(20);
    s.activation_out = Bytes(1'000'000);
    s.gradient_sync = Bytes(2'000'000);
    s.optimizer = Time::microseconds(5);
    in.stages.push_back(s);
  }
  in.stages[1].gradient_out = Bytes(1'000'000);
  in.devices = {{{0}, {1}}, {{2}, {3}}};
  in.microbatches = {2, 2};
  in.gradient_buckets = 2;
  net::Simulator sim(t);
  topo::Router router(t);
  return replay::replay(in, sim, two_rank(sim, router), {});
}

const Node& named(const Rank& r, const std::string& name) {
  for (const Node& n : r.nodes) {
    if (n.name == name) return n;
  }
  ADD_FAILURE() << "no node " << name << " on rank " << r.rank;
  static const Node none;
  return none;
}

std::size_t of_type(const Rank& r, NodeType t) {
  std::size_t k = 0;
  for (const Node& n : r.nodes) k += n.type == t ? 1 : 0;
  return k;
}

TEST(Chakra, AReplayBecomesOneGraphPerRankWithTheReplaysDependencies) {
  const RunRecord run = sample_run();
  const Trace trace = from_run(run);
  ASSERT_EQ(trace.ranks.size(), 4u);
  for (const Rank& r : trace.ranks) {
    // 2 forwards, 2 backwards (the last cut in 2), the optimizer; 2 sends, 2 receives, 2
    // buckets.
    EXPECT_EQ(r.nodes.size(), 12u) << "rank " << r.rank;
    EXPECT_EQ(of_type(r, NodeType::kCompute), 6u);
    EXPECT_EQ(of_type(r, NodeType::kSend), 2u);
    EXPECT_EQ(of_type(r, NodeType::kReceive), 2u);
    EXPECT_EQ(of_type(r, NodeType::kCollective), 2u);
    for (std::size_t i = 0; i < r.nodes.size(); ++i) {
      EXPECT_EQ(r.nodes[i].id, i);
      for (const auto d : r.nodes[i].data_deps) EXPECT_LT(d, i) << r.nodes[i].name;
    }
    // The compute durations add up to the device's compute rows.
    Time rows, nodes;
    for (const auto& row : run.timeline) {
      if (row.device == r.rank && row.stream == replay::Stream::kCompute)
        rows += row.end - row.start;
    }
    for (const Node& n : r.nodes) {
      if (n.type == NodeType::kCompute) nodes += n.duration;
    }
    EXPECT_EQ(nodes, rows) << "rank " << r.rank;
  }
  const Rank& r0 = trace.ranks[0];
  // Stage 0 waits for stage 1's gradient before each backward, after its previous compute.
  const Node& b0 = named(r0, "backward mb0 stage 0");
  const Node& recv = named(r0, "recv gradient mb0 from 1");
  EXPECT_EQ(b0.data_deps,
            (std::vector<std::uint64_t>{named(r0, "forward mb1 stage 0").id, recv.id}));
  EXPECT_EQ(recv.comm_src, 1);
  EXPECT_EQ(recv.comm_size, Bytes(1'000'000));
  const Node& send = named(trace.ranks[1], "send gradient mb0 to 0");
  EXPECT_EQ(send.comm_dst, 0);
  EXPECT_EQ(send.comm_tag, recv.comm_tag);
  EXPECT_EQ(send.data_deps,
            (std::vector<std::uint64_t>{named(trace.ranks[1], "backward mb0 stage 1").id}));
  // The next send to the same device leaves after it (the replay's queue).
  EXPECT_EQ(named(trace.ranks[1], "send gradient mb1 to 0").data_deps,
            (std::vector<std::uint64_t>{named(trace.ranks[1], "backward mb1 stage 1 part 2/2").id,
                                        send.id}));
  // The last backward in two halves of 10 us; bucket i after half i and bucket i - 1; the
  // optimizer after the last bucket.
  const Node& half1 = named(r0, "backward mb1 stage 0 part 1/2");
  const Node& half2 = named(r0, "backward mb1 stage 0 part 2/2");
  EXPECT_EQ(half1.duration, Time::microseconds(10));
  EXPECT_EQ(half2.start, half1.start + Time::microseconds(10));
  EXPECT_EQ(half2.data_deps, std::vector<std::uint64_t>{half1.id});
  std::vector<const Node*> buckets;
  for (const Node& n : r0.nodes) {
    if (n.type == NodeType::kCollective) buckets.push_back(&n);
  }
  ASSERT_EQ(buckets.size(), 2u);
  const Node& bucket1 = *buckets[0];
  const Node& bucket2 = *buckets[1];
  EXPECT_EQ(bucket1.name, "allreduce bucket 1/2 group " + bucket1.pg_name);
  EXPECT_EQ(bucket2.pg_name, bucket1.pg_name);
  EXPECT_EQ(bucket1.data_deps, std::vector<std::uint64_t>{half1.id});
  EXPECT_EQ(bucket2.data_deps, (std::vector<std::uint64_t>{half2.id, bucket1.id}));
  EXPECT_EQ(bucket1.comm_size, Bytes(1'000'000));
  EXPECT_EQ(bucket1.comm_type, Collective::kAllReduce);
  const Node& optimizer = named(r0, "optimizer stage 0");
  EXPECT_EQ(optimizer.data_deps, (std::vector<std::uint64_t>{half2.id, bucket2.id}));
  EXPECT_EQ(optimizer.duration, Time::microseconds(5));
  // The groups: stage 0's shards {0, 2}, stage 1's {1, 3}.
  ASSERT_EQ(trace.groups.size(), 2u);
  EXPECT_EQ(trace.groups.at(bucket1.pg_name), (std::vector<std::uint32_t>{0, 2}));
}

class ChakraFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("nest_chakra_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // read_folder's error for `trace` written out.
  std::string error_of(const Trace& trace) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    write_files(trace, dir_);
    return error_reading();
  }
  std::string error_reading() {
    try {
      (void)read_folder(dir_);
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      return e.what();
    }
    return "no error";
  }
  std::string file(int rank) const {
    return (dir_ / ("nest." + std::to_string(rank) + ".et")).string();
  }

  fs::path dir_;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_F(ChakraFiles, WrittenAndReadBackTheTraceIsTheSame) {
  const Trace trace = from_run(sample_run());
  EXPECT_EQ(file_names(trace), (std::vector<std::string>{"nest.0.et", "nest.1.et", "nest.2.et",
                                                         "nest.3.et", "comm_group.json"}));
  write_files(trace, dir_);
  const Trace back = read_folder(dir_);
  ASSERT_EQ(back.ranks.size(), trace.ranks.size());
  EXPECT_EQ(back.groups, trace.groups);
  for (std::size_t r = 0; r < trace.ranks.size(); ++r) {
    const Rank& a = trace.ranks[r];
    const Rank& b = back.ranks[r];
    EXPECT_EQ(b.version, "1.0.0");
    ASSERT_EQ(b.nodes.size(), a.nodes.size());
    for (std::size_t i = 0; i < a.nodes.size(); ++i) {
      const Node& x = a.nodes[i];
      const Node& y = b.nodes[i];
      EXPECT_EQ(y.id, x.id);
      EXPECT_EQ(y.name, x.name);
      EXPECT_EQ(y.type, x.type);
      EXPECT_EQ(y.data_deps, x.data_deps);
      EXPECT_EQ(y.start, x.start);
      EXPECT_EQ(y.duration, x.duration);
      EXPECT_EQ(y.comm_size, x.comm_size);
      EXPECT_EQ(y.comm_src, x.comm_src);
      EXPECT_EQ(y.comm_dst, x.comm_dst);
      EXPECT_EQ(y.comm_tag, x.comm_tag);
      EXPECT_EQ(y.pg_name, x.pg_name);
      EXPECT_EQ(y.stage, x.stage);
      EXPECT_EQ(y.microbatch, x.microbatch);
      EXPECT_EQ(y.part, x.part);
      EXPECT_TRUE(y.other.empty());
    }
  }
  const std::string bytes = slurp(dir_ / "nest.0.et");
  fs::create_directories(dir_ / "again");
  write_files(trace, dir_ / "again");
  EXPECT_EQ(slurp(dir_ / "again" / "nest.0.et"), bytes);
  EXPECT_EQ(slurp(dir_ / "comm_group.json"),
            "{\n \"1\": [\n  1,\n  3\n ],\n \"2\": [\n  0,\n  2\n ]\n}\n");
}

TEST_F(ChakraFiles, TheSummaryCountsNodesTimesAndBytes) {
  const RunRecord run = sample_run();
  const Summary s = summarize(from_run(run));
  EXPECT_EQ(s.ranks, 4u);
  EXPECT_EQ(s.empty_ranks, 0u);
  EXPECT_EQ(s.nodes.at(NodeType::kCompute), 24u);
  EXPECT_EQ(s.nodes.at(NodeType::kCollective), 8u);
  EXPECT_EQ(s.groups, 2u);
  // 2 forwards of 10 us, 2 backwards of 20 us and 5 us of optimizer on every rank.
  EXPECT_EQ(s.max_compute, Time::microseconds(65));
  EXPECT_EQ(s.min_compute, Time::microseconds(65));
  EXPECT_EQ(s.end, run.summary.iteration_time);
  EXPECT_EQ(s.collective_bytes.at(Collective::kAllReduce), Bytes(8 * 1'000'000));
  EXPECT_EQ(s.send_bytes, Bytes(8 * 1'000'000));
  ASSERT_EQ(s.stages.size(), 2u);
  EXPECT_EQ(s.stages[1].first_layer, 2);
  EXPECT_EQ(s.stages[1].last_layer, 4);
  EXPECT_EQ(s.stages[1].forward, Time::microseconds(10));
  EXPECT_EQ(s.stages[1].backward, Time::microseconds(20));
  EXPECT_EQ(s.stages[1].ranks, 2u);
}

TEST_F(ChakraFiles, BrokenFoldersAreRefusedNamingFileNodeAndKey) {
  const Trace good = from_run(sample_run());
  Trace t = good;
  t.ranks[0].nodes[3].data_deps.push_back(99);
  EXPECT_EQ(error_of(t), file(0) +
                             ": node 3: data_deps: unknown node (got \"99\"; expected the id "
                             "of a node of this file)");
  t = good;
  t.ranks[0].nodes[0].data_deps.push_back(11);
  EXPECT_EQ(error_of(t), file(0) +
                             ": node 0: data_deps: the dependencies form a cycle (expected "
                             "an acyclic graph)");
  t = good;
  t.ranks[0].nodes[5].id = 4;
  EXPECT_EQ(error_of(t).substr(0, file(0).size() + 40),
            file(0) + ": node 4: id: duplicate node id (got \"4\"");
  t = good;
  for (Node& n : t.ranks[1].nodes) {
    if (n.type == NodeType::kReceive) {
      n.comm_tag += 100;
      break;
    }
  }
  EXPECT_NE(error_of(t).find(": comm_tag: a receive that no send matches"), std::string::npos);
  t = good;
  for (Node& n : t.ranks[2].nodes) {
    if (n.type == NodeType::kCollective) n.pg_name = "7";
  }
  EXPECT_NE(error_of(t).find(": pg_name: unknown process group (got \"7\"; expected a group of "
                             "comm_group.json)"),
            std::string::npos)
      << error_reading();

  // A cut file, a missing rank, a folder with no trace.
  write_files(good, dir_);
  std::string bytes = slurp(file(3));
  bytes.pop_back();
  std::ofstream(file(3), std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_EQ(error_reading(), file(3) +
                                 ": message 12: 153 bytes that do not parse as a Chakra Node (a "
                                 "file cut short?) (expected varint32-delimited Chakra ET "
                                 "messages)");
  fs::remove(file(2));
  EXPECT_EQ(error_reading(), dir_.string() +
                                 ": rank 2 has no file (expected nest.2.et (ranks 0..3 "
                                 "without gaps))");
  fs::remove_all(dir_);
  fs::create_directories(dir_);
  EXPECT_EQ(error_reading(), dir_.string() +
                                 ": no Chakra ET files (expected files named "
                                 "<prefix>.<rank>.et)");
}

}  // namespace
}  // namespace nest::chakra
