#include "nest/io/run_writers.h"

#include <H5Cpp.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "nest/core/error.h"

namespace nest::io {
namespace {

using replay::RunRecord;

RunRecord sample_record() {
  RunRecord r;
  r.meta = {"0.1.0", "nest simulate --plan p.yaml", {{"p.yaml", "abc123"}}, "stages: 2\n"};
  r.summary.iteration_time = Time::milliseconds(12);
  r.summary.estimate = Time::milliseconds(10);
  r.summary.sequences_per_s = 100;
  r.summary.peak_memory = Bytes::gibibytes(3);
  r.timeline = {
      {0, replay::Stream::kCompute, replay::TaskKind::kForward, 0, 0, 0, 3, Time::microseconds(0),
       Time::microseconds(5)},
      {1, replay::Stream::kCompute, replay::TaskKind::kBackward, 1, 0, 3, 6, Time::microseconds(5),
       Time::microseconds(15.5)},
      {1, replay::Stream::kNetwork, replay::TaskKind::kSendGradient, 1, 0, 3, 6,
       Time::microseconds(15.5), Time::microseconds(16)},
  };
  r.memory = {{0, Time::zero(), Bytes(100), replay::MemoryCategory::kWeights},
              {0, Time::microseconds(5), Bytes(40), replay::MemoryCategory::kActivations}};
  r.peaks = {{0, Bytes(140)}, {1, Bytes(90)}};
  r.links = {{0, 2, 1e6, Time::microseconds(3), 0.25}};
  r.collectives = {{"allreduce",
                    "ring",
                    {0, 1, 2, 3},
                    Bytes(4096),
                    Time::zero(),
                    Time::microseconds(2),
                    Time::microseconds(1.5)},
                   {"send",
                    "direct",
                    {0, 4},
                    Bytes(64),
                    Time::zero(),
                    Time::microseconds(1),
                    Time::microseconds(1)}};
  return r;
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class RunWriters : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        std::filesystem::temp_directory_path() /
        ("nest_io_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(RunWriters, Hdf5HasTheSchemaRowsAndUnits) {
  const auto path = dir_ / "run.h5";
  write_hdf5(sample_record(), path);
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  auto rows = [&](const char* name) {
    hsize_t n = 0;
    f.openDataSet(name).getSpace().getSimpleExtentDims(&n);
    return n;
  };
  EXPECT_EQ(rows("/timeline"), 3u);
  EXPECT_EQ(rows("/memory/trace"), 2u);
  EXPECT_EQ(rows("/memory/peak"), 2u);
  EXPECT_EQ(rows("/links"), 1u);
  EXPECT_EQ(rows("/collectives/table"), 2u);
  EXPECT_EQ(rows("/collectives/members"), 6u);

  H5::DataSet timeline = f.openDataSet("/timeline");
  const H5::CompType type = timeline.getCompType();
  EXPECT_EQ(type.getNmembers(), 9);
  EXPECT_EQ(type.getMemberName(0), "device");
  EXPECT_EQ(type.getMemberName(8), "end");
  std::string unit;
  H5::Attribute a = timeline.openAttribute("start.unit");
  a.read(a.getStrType(), unit);
  EXPECT_EQ(unit, "ps");

  // The end of the second row, read back as raw int64 picoseconds.
  H5::CompType end_only(sizeof(std::int64_t));
  end_only.insertMember("end", 0, H5::PredType::NATIVE_INT64);
  std::int64_t ends[3];
  timeline.read(ends, end_only);
  EXPECT_EQ(ends[1], 15'500'000);

  double iteration = 0;
  f.openGroup("/summary")
      .openAttribute("iteration_time_s")
      .read(H5::PredType::NATIVE_DOUBLE, &iteration);
  EXPECT_DOUBLE_EQ(iteration, 0.012);
  double error = 0;
  f.openGroup("/summary").openAttribute("estimate_error").read(H5::PredType::NATIVE_DOUBLE, &error);
  EXPECT_DOUBLE_EQ(error, 0.2);
}

TEST_F(RunWriters, SameRecordSameBytes) {
  write_hdf5(sample_record(), dir_ / "a.h5");
  write_hdf5(sample_record(), dir_ / "b.h5");
  EXPECT_TRUE(slurp(dir_ / "a.h5") == slurp(dir_ / "b.h5"));
  write_trace_json(sample_record(), dir_ / "a.json");
  write_trace_json(sample_record(), dir_ / "b.json");
  EXPECT_TRUE(slurp(dir_ / "a.json") == slurp(dir_ / "b.json"));
}

TEST_F(RunWriters, TraceJsonHasExactMicrosecondEvents) {
  write_trace_json(sample_record(), dir_ / "t.json");
  const std::string s = slurp(dir_ / "t.json");
  EXPECT_NE(
      s.find("{\"ph\":\"X\",\"pid\":1,\"tid\":0,\"name\":\"backward mb0\",\"cat\":\"backward\","
             "\"ts\":5.000000,\"dur\":10.500000,\"args\":{\"stage\":1,\"layers\":\"3-6\"}}"),
      std::string::npos)
      << s;
  EXPECT_NE(s.find("\"name\":\"thread_name\",\"pid\":1,\"tid\":1,\"args\":{\"name\":\"network\"}"),
            std::string::npos);
}

TEST_F(RunWriters, CsvSummaryIsOneLine) {
  replay::Summary s = sample_record().summary;
  EXPECT_EQ(summary_csv_row(s), "0.012,0.01,0.2,100,0,0,0,3221225472,0");
  const std::string header = summary_csv_header();
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), 8);
}

TEST_F(RunWriters, UnwritableTargetIsAnInputErrorAndLeavesNothing) {
  const auto path = dir_ / "missing" / "run.h5";
  try {
    write_hdf5(sample_record(), path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace nest::io
