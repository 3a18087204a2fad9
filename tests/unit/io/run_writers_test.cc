#include "nest/io/run_writers.h"

#include <H5Cpp.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <tuple>
#include <utility>
#include <vector>

#include "io/hdf5.h"
#include "nest/core/error.h"
#include "nest/io/hdf5_table.h"

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
  r.topology.name = "pair";
  r.topology.nodes = {{"gpu0", topo::NodeKind::kDevice, 0},
                      {"gpu1", topo::NodeKind::kDevice, 0},
                      {"sw0", topo::NodeKind::kSwitch, 1}};
  const auto bw = Bandwidth::gigabytes_per_second(50);
  r.topology.links = {{0, 2, bw, Time::nanoseconds(500)},
                      {2, 0, bw, Time::nanoseconds(500)},
                      {1, 2, Bandwidth::gigabytes_per_second(25), Time::microseconds(1)},
                      {2, 1, bw, Time::microseconds(1)}};
  r.placement = {{0, 0, {0}}, {1, 0, {1}}};
  r.stages = {{0, 0, 3, Bytes(1024), Bytes(0)}, {1, 3, 6, Bytes(0), Bytes(1024)}};
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

// Five devices: 0 and 2 run the same rows, 3 differs from 1 in one end (1 ps) and 4 in one
// memory level, so the classes are {0, 2}, {1}, {3}, {4}.
RunRecord classes_record() {
  RunRecord r = sample_record();
  using replay::MemoryCategory;
  using replay::Stream;
  using replay::TaskKind;
  const auto fwd = [](std::uint32_t d, Time end) {
    return replay::TimelineRow{d,  Stream::kCompute, TaskKind::kForward, 0, 0, 0, 3, Time::zero(),
                               end};
  };
  const Time end = Time::microseconds(5);
  r.timeline = {fwd(0, end), fwd(1, Time::microseconds(7)), fwd(2, end),
                fwd(3, Time::microseconds(7) + Time::picoseconds(1)), fwd(4, end)};
  r.memory = {{0, Time::zero(), Bytes(100), MemoryCategory::kWeights},
              {1, Time::zero(), Bytes(100), MemoryCategory::kWeights},
              {2, Time::zero(), Bytes(100), MemoryCategory::kWeights},
              {3, Time::zero(), Bytes(100), MemoryCategory::kWeights},
              {4, Time::zero(), Bytes(101), MemoryCategory::kWeights}};
  r.peaks = {{0, Bytes(100)}, {1, Bytes(100)}, {2, Bytes(100)}, {3, Bytes(100)}, {4, Bytes(101)}};
  return r;
}

TEST_F(RunWriters, TimelineClassesGroupDevicesWhoseRowsAreEqual) {
  const auto classes = timeline_classes(classes_record());
  const std::vector<std::pair<std::uint32_t, std::uint32_t>> expected{
      {0, 0}, {1, 1}, {2, 0}, {3, 3}, {4, 4}};
  EXPECT_EQ(classes, expected);
}

TEST_F(RunWriters, Hdf5WritesOneTimelinePerClassUnlessAllDevices) {
  auto counts = [](const std::filesystem::path& path) {
    H5::H5File f(path.string(), H5F_ACC_RDONLY);
    auto rows = [&](const char* name) {
      hsize_t n = 0;
      f.openDataSet(name).getSpace().getSimpleExtentDims(&n);
      return n;
    };
    struct Class {
      std::uint32_t device;
      std::uint32_t representative;
    };
    H5::CompType t(sizeof(Class));
    t.insertMember("device", HOFFSET(Class, device), H5::PredType::NATIVE_UINT32);
    t.insertMember("representative", HOFFSET(Class, representative), H5::PredType::NATIVE_UINT32);
    std::vector<Class> c(rows("/timeline_classes"));
    f.openDataSet("/timeline_classes").read(c.data(), t);
    std::vector<std::uint32_t> reps;
    for (const Class& x : c) reps.push_back(x.representative);
    return std::tuple(rows("/timeline"), rows("/memory/trace"), rows("/memory/peak"), reps);
  };
  write_hdf5(classes_record(), dir_ / "classes.h5");
  write_hdf5(classes_record(), dir_ / "all.h5", {.all_devices = true});
  const auto [tl, mem, peak, reps] = counts(dir_ / "classes.h5");
  EXPECT_EQ(tl, 4u);  // device 2's row is device 0's
  EXPECT_EQ(mem, 4u);
  EXPECT_EQ(peak, 5u);  // peaks stay per device
  EXPECT_EQ(reps, (std::vector<std::uint32_t>{0, 1, 0, 3, 4}));
  const auto [tl_all, mem_all, peak_all, reps_all] = counts(dir_ / "all.h5");
  EXPECT_EQ(tl_all, 5u);
  EXPECT_EQ(mem_all, 5u);
  EXPECT_EQ(peak_all, 5u);
  EXPECT_EQ(reps_all, (std::vector<std::uint32_t>{0, 1, 2, 3, 4}));
  // The same record, the same bytes.
  write_hdf5(classes_record(), dir_ / "again.h5");
  EXPECT_EQ(slurp(dir_ / "classes.h5"), slurp(dir_ / "again.h5"));
}

TEST_F(RunWriters, Hdf5NamesTheTopologysNodesAndLinks) {
  const auto path = dir_ / "run.h5";
  write_hdf5(sample_record(), path);
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  std::string name;
  H5::Attribute a = f.openGroup("/topology").openAttribute("name");
  a.read(a.getStrType(), name);
  EXPECT_EQ(name, "pair");

  struct NodeRead {
    std::uint32_t id;
    char* name;
    std::uint8_t kind;
    std::int32_t tier;
  };
  H5::DataSet nodes = f.openDataSet("/topology/nodes");
  H5::StrType text(H5::PredType::C_S1, H5T_VARIABLE);
  text.setCset(H5T_CSET_UTF8);
  H5::CompType t(sizeof(NodeRead));
  t.insertMember("id", HOFFSET(NodeRead, id), H5::PredType::NATIVE_UINT32);
  t.insertMember("name", HOFFSET(NodeRead, name), text);
  t.insertMember("kind", HOFFSET(NodeRead, kind), H5::PredType::NATIVE_UINT8);
  t.insertMember("tier", HOFFSET(NodeRead, tier), H5::PredType::NATIVE_INT32);
  std::vector<NodeRead> rows(3);
  nodes.read(rows.data(), t);
  EXPECT_EQ(rows[2].id, 2u);
  EXPECT_STREQ(rows[2].name, "sw0");
  EXPECT_STREQ(rows[1].name, "gpu1");
  EXPECT_EQ(rows[2].kind, 1);  // switch
  EXPECT_EQ(rows[0].kind, 0);  // device
  EXPECT_EQ(rows[2].tier, 1);
  H5Dvlen_reclaim(t.getId(), nodes.getSpace().getId(), H5P_DEFAULT, rows.data());
  // The kind is an enum with the names as written.
  H5::EnumType kind = nodes.getCompType().getMemberEnumType(2);
  std::uint8_t raw = 1;
  EXPECT_EQ(kind.nameOf(&raw, 16), "switch");

  struct LinkRead {
    std::uint32_t src;
    std::uint32_t dst;
    double bandwidth;
    std::int64_t latency;
  };
  H5::DataSet links = f.openDataSet("/topology/links");
  H5::CompType lt(sizeof(LinkRead));
  lt.insertMember("src", HOFFSET(LinkRead, src), H5::PredType::NATIVE_UINT32);
  lt.insertMember("dst", HOFFSET(LinkRead, dst), H5::PredType::NATIVE_UINT32);
  lt.insertMember("bandwidth", HOFFSET(LinkRead, bandwidth), H5::PredType::NATIVE_DOUBLE);
  lt.insertMember("latency", HOFFSET(LinkRead, latency), H5::PredType::NATIVE_INT64);
  LinkRead l[4];
  links.read(l, lt);
  EXPECT_EQ(l[2].src, 1u);
  EXPECT_EQ(l[2].dst, 2u);
  EXPECT_DOUBLE_EQ(l[2].bandwidth, 25e9);
  EXPECT_EQ(l[2].latency, 1'000'000);
  EXPECT_EQ(l[0].latency, 500'000);
  std::string unit;
  H5::Attribute u = links.openAttribute("bandwidth.unit");
  u.read(u.getStrType(), unit);
  EXPECT_EQ(unit, "B/s");
}

TEST_F(RunWriters, SameRecordSameBytes) {
  write_hdf5(sample_record(), dir_ / "a.h5");
  write_hdf5(sample_record(), dir_ / "b.h5");
  EXPECT_TRUE(slurp(dir_ / "a.h5") == slurp(dir_ / "b.h5"));
  write_trace_json(sample_record(), dir_ / "a.json");
  write_trace_json(sample_record(), dir_ / "b.json");
  EXPECT_TRUE(slurp(dir_ / "a.json") == slurp(dir_ / "b.json"));
}

TEST_F(RunWriters, CsvSummaryIsOneLine) {
  replay::Summary s = sample_record().summary;
  EXPECT_EQ(summary_csv_row(s), "0.012,0.01,0.2,100,0,0,0,3221225472,0");
  const std::string header = summary_csv_header();
  EXPECT_EQ(std::count(header.begin(), header.end(), ','), 8);
}

TEST_F(RunWriters, UnwritableTargetIsAnInputErrorNamingTheCauseAndLeavesNothing) {
  const auto path = dir_ / "missing" / "run.h5";
  try {
    write_hdf5(sample_record(), path);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(std::string(e.what()),
              path.string() + ": cannot create the output file: No such file or directory");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

std::string string_attribute(const H5::H5Object& object, const char* name) {
  std::string value;
  H5::Attribute a = object.openAttribute(name);
  a.read(a.getStrType(), value);
  return value;
}

// A plan with no collectives (one replica, one shard: d = 1) has empty name lists and empty
// tables; the file must still be written and read back (it failed with "H5Awrite failed").
TEST_F(RunWriters, RunWithoutCollectivesOrLinksIsAValidFile) {
  RunRecord r = sample_record();
  r.collectives.clear();
  r.links.clear();
  r.meta.inputs.clear();
  const auto path = dir_ / "d1.h5";
  write_hdf5(r, path);
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  auto elements = [](const H5::DataSpace& space) { return space.getSimpleExtentNpoints(); };
  EXPECT_EQ(elements(f.openDataSet("/collectives/table").getSpace()), 0);
  EXPECT_EQ(elements(f.openDataSet("/collectives/members").getSpace()), 0);
  EXPECT_EQ(elements(f.openDataSet("/links").getSpace()), 0);
  H5::DataSet table = f.openDataSet("/collectives/table");
  EXPECT_EQ(elements(table.openAttribute("op_names").getSpace()), 0);
  EXPECT_EQ(elements(f.openGroup("/meta").openAttribute("input_paths").getSpace()), 0);
  EXPECT_EQ(elements(f.openDataSet("/timeline").getSpace()), 3);
}

// The plan's text is a dataset: 200 KiB (over HDF5's 64 KiB attribute limit; GPT-3 on 16,384
// GPUs writes such a plan) comes back byte for byte, as UTF-8.
TEST_F(RunWriters, LargePlanTextIsStoredAsADataset) {
  RunRecord r = sample_record();
  r.meta.plan_yaml.clear();
  for (int i = 0; r.meta.plan_yaml.size() < 200 * 1024; ++i) {
    r.meta.plan_yaml += "  - {stage: " + std::to_string(i) + ", layers: [0, 1], name: \"é\"}\n";
  }
  r.meta.command_line = std::string(70 * 1024, 'c');  // a long command line is fine too
  const auto path = dir_ / "big.h5";
  write_hdf5(r, path);
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  H5::DataSet plan = f.openDataSet("/meta/plan_yaml");
  const H5::StrType type = plan.getStrType();
  EXPECT_TRUE(type.isVariableStr());
  EXPECT_EQ(type.getCset(), H5T_CSET_UTF8);
  std::string text;
  plan.read(text, type);
  EXPECT_EQ(text, r.meta.plan_yaml);
  EXPECT_EQ(string_attribute(f.openGroup("/meta"), "command_line").size(), 70u * 1024);
  EXPECT_EQ(string_attribute(f.openGroup("/meta"), "tool_version"), "0.1.0");
}

// A full disk, met as a file-size limit (the kernel refuses the write the same way): an input
// error naming the file and the cause; the previous run file stays whole; no temporary left.
TEST_F(RunWriters, FullDiskKeepsThePreviousFileAndNamesTheCause) {
  const auto path = dir_ / "run.h5";
  write_hdf5(sample_record(), path);
  const std::string good = slurp(path);
  RunRecord big = sample_record();
  big.timeline.resize(100'000, big.timeline.front());  // 3.8 MB of rows
  rlimit old = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 256 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  std::string message;
  ErrorKind kind = ErrorKind::kInternal;
  try {
    write_hdf5(big, path);
  } catch (const Error& e) {
    message = e.what();
    kind = e.kind();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(kind, ErrorKind::kInput);
  EXPECT_EQ(message, path.string() + ": cannot write the output file: File too large");
  EXPECT_TRUE(slurp(path) == good);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

// HDF5's own refusals carry the cause from its error stack, not a guess about the path.
TEST_F(RunWriters, Hdf5FailureNamesItsCause) {
  h5::MemoryFile file;
  h5::make_group(file.get(), "/meta").close();
  try {
    h5::make_group(file.get(), "/meta").close();
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal);
    EXPECT_EQ(std::string(e.what()),
              "internal error: HDF5 H5Gcreate2 failed: H5Gcreate2: name already exists");
  }
}

// The table writer behind results.h5: numbers as numbers, text as UTF-8 strings, units, and
// a large text as a dataset.
TEST_F(RunWriters, TableHasTypedColumnsUnitsAndTexts) {
  const auto path = dir_ / "results.h5";
  const std::string study(100 * 1024, 's');
  write_table_hdf5(path, "results",
                   {{"point", "", std::vector<std::int64_t>{0, 1}},
                    {"bandwidth", "B/s", std::vector<double>{1.25e10, 5e10}},
                    {"name", "", std::vector<std::string>{"naïve", ""}}},
                   {{"study_name", "example"}, {"study_text", study, true}});
  H5::H5File f(path.string(), H5F_ACC_RDONLY);
  H5::DataSet ds = f.openDataSet("/results");
  const H5::CompType type = ds.getCompType();
  ASSERT_EQ(type.getNmembers(), 3);
  EXPECT_EQ(type.getMemberDataType(0).getClass(), H5T_INTEGER);
  EXPECT_EQ(type.getMemberDataType(1).getClass(), H5T_FLOAT);
  EXPECT_EQ(type.getMemberStrType(2).getCset(), H5T_CSET_UTF8);
  EXPECT_EQ(type.getSize(), 8u + 8u + sizeof(char*));  // packed
  H5::CompType bandwidth(sizeof(double));
  bandwidth.insertMember("bandwidth", 0, H5::PredType::NATIVE_DOUBLE);
  double values[2] = {};
  ds.read(values, bandwidth);
  EXPECT_EQ(values[1], 5e10);
  EXPECT_EQ(string_attribute(ds, "bandwidth.unit"), "B/s");
  EXPECT_EQ(string_attribute(f.openGroup("/"), "study_name"), "example");
  std::string text;
  H5::DataSet t = f.openDataSet("/study_text");
  t.read(text, t.getStrType());
  EXPECT_EQ(text, study);
}

TEST_F(RunWriters, TableColumnsOfDifferentLengthsAreAnInternalError) {
  try {
    write_table_hdf5(
        dir_ / "r.h5", "results",
        {{"a", "", std::vector<std::int64_t>{0, 1}}, {"b", "", std::vector<double>{1}}}, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "internal error: column b has 1 values for 2 rows");
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace nest::io
