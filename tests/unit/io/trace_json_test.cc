// The Perfetto trace: its layout (one process per stage replica, network lanes, stage order),
// flows from transfers to the compute that waits for them, counters, gzip. Times below are
// chosen so that every figure is exact in nanoseconds.

#include <gtest/gtest.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "nest/io/run_writers.h"

namespace nest::io {
namespace {

using replay::MemoryCategory;
using replay::RunRecord;
using replay::Stream;
using replay::TaskKind;
using Json = nlohmann::json;

Time us(double x) { return Time::microseconds(x); }

// Two stages of two shards, one replica: stage 0 on devices 0-1, stage 1 on devices 2-3. One
// microbatch: forward 0-5 on stage 0, activation sent 5-6, forward 6-10 and backward 10-20 on
// stage 1, two transfers back that overlap (20-21 and 20.5-22), backward 21-31 on stage 0.
RunRecord pipeline() {
  RunRecord r;
  r.placement = {{0, 0, {0, 1}}, {1, 0, {2, 3}}};
  r.stages = {{0, 0, 2, Bytes(1000), Bytes(0)}, {1, 2, 4, Bytes(0), Bytes(1000)}};
  r.topology.name = "line";
  for (int i = 0; i < 4; ++i) {
    r.topology.nodes.push_back({"gpu" + std::to_string(i), topo::NodeKind::kDevice, 0});
  }
  r.topology.nodes.push_back({"sw", topo::NodeKind::kSwitch, 1});
  auto row = [](std::uint32_t d, Stream s, TaskKind k, int stage, int mb, double a, double b) {
    const int first = stage * 2;
    return replay::TimelineRow{d, s, k, stage, mb, first, first + 2, us(a), us(b)};
  };
  for (std::uint32_t d : {0u, 1u}) {
    r.timeline.push_back(row(d, Stream::kCompute, TaskKind::kForward, 0, 0, 0, 5));
    r.timeline.push_back(row(d, Stream::kNetwork, TaskKind::kSendActivation, 0, 0, 5, 6));
    r.timeline.push_back(row(d, Stream::kCompute, TaskKind::kBackward, 0, 0, 21, 31));
    r.timeline.push_back(row(d, Stream::kCompute, TaskKind::kOptimizer, 0, -1, 31, 32));
  }
  for (std::uint32_t d : {2u, 3u}) {
    r.timeline.push_back(row(d, Stream::kCompute, TaskKind::kForward, 1, 0, 6, 10));
    r.timeline.push_back(row(d, Stream::kCompute, TaskKind::kBackward, 1, 0, 10, 20));
    r.timeline.push_back(row(d, Stream::kNetwork, TaskKind::kSendGradient, 1, 0, 20, 21));
    r.timeline.push_back(row(d, Stream::kNetwork, TaskKind::kGradientSync, 1, -1, 20.5, 22));
  }
  for (std::uint32_t d = 0; d < 4; ++d) {
    r.memory.push_back({d, Time::zero(), Bytes(100), MemoryCategory::kWeights});
    r.memory.push_back({d, Time::zero(), Bytes(0), MemoryCategory::kActivations});
    const double start = d < 2 ? 0 : 6;
    const double end = d < 2 ? 31 : 20;
    r.memory.push_back({d, us(start), Bytes(40), MemoryCategory::kActivations});
    // A backward that adds no working set: the level does not change, no event.
    r.memory.push_back({d, us(end - 10), Bytes(40), MemoryCategory::kActivations});
    r.memory.push_back({d, us(end), Bytes(0), MemoryCategory::kActivations});
  }
  r.link_series = {{1, 0, 4, {{us(5), 0.5}, {us(5.5), 1.0}, {us(5.5), 0.25}, {us(6), 0.0}}}};
  return r;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class TraceJson : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nest_trace_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  Json write(const RunRecord& r, const TraceOptions& options = {}) {
    write_trace_json(r, dir_ / "t.json", options);
    text_ = slurp(dir_ / "t.json");
    return Json::parse(text_)["traceEvents"];
  }
  bool has(const std::string& event) const { return text_.find(event) != std::string::npos; }

  std::filesystem::path dir_;
  std::string text_;
};

std::vector<std::string> process_names(const Json& events) {
  std::vector<std::string> out;
  for (const auto& e : events) {
    if (e["ph"] == "M" && e["name"] == "process_name") out.push_back(e["args"]["name"]);
  }
  return out;
}

int count(const Json& events, const std::string& ph) {
  int n = 0;
  for (const auto& e : events) n += e["ph"] == ph ? 1 : 0;
  return n;
}

TEST_F(TraceJson, OneProcessPerStageReplicaInStageOrder) {
  const Json events = write(pipeline());
  EXPECT_EQ(process_names(events), (std::vector<std::string>{"stage 0 replica 0: devices 0-1",
                                                             "stage 1 replica 0: devices 2-3",
                                                             "network: the 1 busiest links"}));
  // The first shard's rows only: 4 of devices 0-1's 8 and 4 of devices 2-3's 8.
  EXPECT_EQ(count(events, "X"), 8);
  EXPECT_TRUE(
      has("{\"ph\":\"M\",\"pid\":2,\"name\":\"process_sort_index\",\"args\":{"
          "\"sort_index\":2}}"));
  // Exact microseconds; the optimizer has no microbatch.
  EXPECT_TRUE(
      has("{\"ph\":\"X\",\"pid\":2,\"tid\":0,\"ts\":10,\"dur\":10,\"name\":\"backward mb0\","
          "\"args\":{\"stage\":1,\"layers\":\"2-4\"}}"))
      << text_;
  EXPECT_TRUE(has("\"ts\":31,\"dur\":1,\"name\":\"optimizer\","));
}

TEST_F(TraceJson, AllDevicesGivesOneProcessPerDevice) {
  const Json events = write(pipeline(), {.all_devices = true});
  EXPECT_EQ(process_names(events),
            (std::vector<std::string>{
                "device 0: stage 0 replica 0 shard 0", "device 1: stage 0 replica 0 shard 1",
                "device 2: stage 1 replica 0 shard 0", "device 3: stage 1 replica 0 shard 1",
                "network: the 1 busiest links"}));
  EXPECT_EQ(count(events, "X"), 16);
}

TEST_F(TraceJson, OverlappingTransfersGetTheirOwnLanes) {
  write(pipeline());
  EXPECT_TRUE(
      has("{\"ph\":\"X\",\"pid\":2,\"tid\":1,\"ts\":20,\"dur\":1,\"name\":\"send_gradient mb0\""));
  EXPECT_TRUE(
      has("{\"ph\":\"X\",\"pid\":2,\"tid\":2,\"ts\":20.5,\"dur\":1.5,\"name\":\"gradient_sync\""))
      << text_;
  EXPECT_TRUE(
      has("{\"ph\":\"M\",\"pid\":2,\"tid\":2,\"name\":\"thread_name\",\"args\":{\"name\":"
          "\"network 2\"}}"));
  EXPECT_FALSE(has("{\"ph\":\"M\",\"pid\":1,\"tid\":2,"));  // stage 0 sends one at a time
}

TEST_F(TraceJson, EachTransferFlowsToTheComputeThatWaitsForIt) {
  write(pipeline());
  // Activations: stage 0's send to stage 1's forward; gradients: back to stage 0's backward.
  EXPECT_TRUE(
      has("\"ts\":5,\"dur\":1,\"name\":\"send_activation mb0\",\"bind_id\":1,"
          "\"flow_out\":true"));
  EXPECT_TRUE(has("\"ts\":6,\"dur\":4,\"name\":\"forward mb0\",\"bind_id\":1,\"flow_in\":true"));
  EXPECT_TRUE(
      has("\"ts\":20,\"dur\":1,\"name\":\"send_gradient mb0\",\"bind_id\":2,"
          "\"flow_out\":true"));
  EXPECT_TRUE(has("\"ts\":21,\"dur\":10,\"name\":\"backward mb0\",\"bind_id\":2,\"flow_in\":true"));
  EXPECT_FALSE(has("\"bind_id\":3"));
}

TEST_F(TraceJson, MemoryAndLinkCountersHaveIncreasingTimes) {
  const Json events = write(pipeline());
  // Stage 0's rise to 40 at 0 merges into the first event; stage 1 rises at 6.
  EXPECT_TRUE(
      has("{\"ph\":\"C\",\"pid\":1,\"ts\":0,\"name\":\"memory\",\"args\":{\"weights\":100,"
          "\"gradients\":0,\"optimizer\":0,\"activations\":40,\"total\":140}}"))
      << text_;
  EXPECT_TRUE(
      has("{\"ph\":\"C\",\"pid\":2,\"ts\":6,\"name\":\"memory\",\"args\":{"
          "\"activations\":40,\"total\":140}}"));
  // Stage 0: 40 at 0, unchanged at 21, 0 at 31; stage 1: 0, 40 at 6, unchanged at 10, 0 at 20.
  int memory = 0;
  for (const auto& e : events) memory += e["ph"] == "C" && e["name"] == "memory" ? 1 : 0;
  EXPECT_EQ(memory, 2 + 3);
  EXPECT_TRUE(
      has("{\"ph\":\"C\",\"pid\":1,\"ts\":31,\"name\":\"memory\",\"args\":{"
          "\"activations\":0,\"total\":100}}"));
  // The link: two changes at 5.5 us leave the last; named by the topology's nodes.
  EXPECT_TRUE(
      has("{\"ph\":\"C\",\"pid\":3,\"ts\":5.5,\"name\":\"gpu0 -> sw\",\"args\":{"
          "\"utilization\":0.25}}"));
  int link = 0;
  for (const auto& e : events) link += e["ph"] == "C" && e["name"] == "gpu0 -> sw" ? 1 : 0;
  EXPECT_EQ(link, 3);
}

TEST_F(TraceJson, GzipHoldsTheSameTextAndTheSameBytesTwice) {
  const RunRecord r = pipeline();
  write_trace_json(r, dir_ / "plain.json");
  write_trace_json(r, dir_ / "a.json.gz", {.gzip = true});
  write_trace_json(r, dir_ / "b.json.gz", {.gzip = true});
  const std::string plain = slurp(dir_ / "plain.json");
  const std::string packed = slurp(dir_ / "a.json.gz");
  EXPECT_EQ(packed, slurp(dir_ / "b.json.gz"));
  ASSERT_GE(packed.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(packed[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(packed[1]), 0x8b);
  EXPECT_EQ(packed[4] | packed[5] | packed[6] | packed[7], 0);  // no modification time
  z_stream z{};
  ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
  std::string out(plain.size() + 1, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  z.avail_in = static_cast<uInt>(packed.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(out.size() - z.avail_out);
  inflateEnd(&z);
  EXPECT_EQ(out, plain);
}

TEST_F(TraceJson, PicosecondsRoundToTheNearestNanosecondAndSlicesStillMeet) {
  RunRecord r = pipeline();
  // A boundary at 5.0005 us rounds half up to 5.001 us on both slices that meet there.
  r.timeline[0].end = Time::picoseconds(5'000'500);
  r.timeline[1].start = Time::picoseconds(5'000'500);
  r.timeline[1].end = Time::picoseconds(6'000'499);  // 6.000499 us rounds down
  write(r);
  EXPECT_TRUE(has("\"ts\":0,\"dur\":5.001,\"name\":\"forward mb0\"")) << text_;
  EXPECT_TRUE(has("\"ts\":5.001,\"dur\":0.999,\"name\":\"send_activation mb0\""));
}

}  // namespace
}  // namespace nest::io
