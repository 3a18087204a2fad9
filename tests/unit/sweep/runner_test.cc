#include "nest/sweep/runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include "nest/core/error.h"
#include "nest/sweep/cluster.h"

namespace nest::sweep {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A stand-in for the placer: the outputs are a function of the point alone. Devices 3 fail with
// an input error, devices 5 are infeasible; the cost is the device count.
class SquareEvaluator final : public PointEvaluator {
 public:
  std::vector<Column> columns() const override {
    return {{"square", ColumnType::kInt, ""}, {"inverse", ColumnType::kReal, "1/device"}};
  }
  Outcome evaluate(const Point& point) const override {
    const std::int64_t d = *point.devices;
    {
      const std::lock_guard lock(mutex_);
      order_.push_back(point.index);
    }
    if (d == 3) throw Error::input("three is bad", {.key = "devices", .value = "3"});
    if (d == 5) return {"infeasible", "five does not fit", {std::monostate{}, std::monostate{}}};
    return {"ok", "", {d * d, 1.0 / static_cast<double>(d)}};
  }
  double cost(const Point& point) const override { return static_cast<double>(*point.devices); }

  std::vector<std::size_t> order() const {
    const std::lock_guard lock(mutex_);
    return order_;
  }

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::size_t> order_;
};

class RunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nest_runner_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "profile.yaml") << "kind: layer_profile\n";
    study_ = parse_study(R"(kind: study
name: squares
topologies:
  t: {kind: torus, dims: [4], link_bandwidth: 1 GB/s, link_latency: 1 us}
workloads:
  w: {profile: profile.yaml}
sweep:
  product:
    devices: [1, 2, 3, 4, 5, 6, 7]
)",
                         "squares.yaml", dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SweepOptions options(const std::string& out, int threads = 1) const {
    SweepOptions o;
    o.output = dir_ / out;
    o.threads = threads;
    o.progress = Progress::Mode::kNever;
    return o;
  }

  std::filesystem::path dir_;
  Study study_;
};

TEST_F(RunnerTest, WritesOneRowPerPointWithErrorsAndInfeasiblePointsAsRows) {
  SquareEvaluator evaluator;
  const SweepReport r = run_sweep(study_, evaluator, options("a"));
  EXPECT_EQ(r.points, 7U);
  EXPECT_EQ(r.evaluated, 7U);
  EXPECT_EQ(r.ok, 5U);
  EXPECT_EQ(r.infeasible, 1U);
  EXPECT_EQ(r.failed, 1U);
  EXPECT_TRUE(r.complete);
  const std::string header =
      "point,topology,workload,devices,rules,replay,spine_oversubscription,seed,status,error,"
      "square,inverse\n";
  EXPECT_EQ(read(dir_ / "a" / "results.csv"),
            header +
                "0,t,w,1,megatron,false,,0,ok,,1,1\n"
                "1,t,w,2,megatron,false,,0,ok,,4,0.5\n"
                "2,t,w,3,megatron,false,,0,error,\"devices: three is bad (got \"\"3\"\")\",,\n"
                "3,t,w,4,megatron,false,,0,ok,,16,0.25\n"
                "4,t,w,5,megatron,false,,0,infeasible,five does not fit,,\n"
                "5,t,w,6,megatron,false,,0,ok,,36,0.16666666666666666\n"
                "6,t,w,7,megatron,false,,0,ok,,49,0.14285714285714285\n");
}

TEST_F(RunnerTest, PointsAreDispatchedLargestCostFirst) {
  SquareEvaluator evaluator;
  (void)run_sweep(study_, evaluator, options("a"));
  const std::vector<std::size_t> expected = {6, 5, 4, 3, 2, 1, 0};
  EXPECT_EQ(evaluator.order(), expected);
}

TEST_F(RunnerTest, FilesAreTheSameBytesForAnyThreadCount) {
  SquareEvaluator one;
  SquareEvaluator three;
  (void)run_sweep(study_, one, options("one", 1));
  (void)run_sweep(study_, three, options("three", 3));
  EXPECT_EQ(read(dir_ / "one" / "results.csv"), read(dir_ / "three" / "results.csv"));
  EXPECT_EQ(read(dir_ / "one" / "results.h5"), read(dir_ / "three" / "results.h5"));
}

TEST_F(RunnerTest, AnInterruptedSweepResumesToTheSameFiles) {
  SquareEvaluator full;
  (void)run_sweep(study_, full, options("full"));

  SquareEvaluator first;
  SweepOptions o = options("parts", 2);
  o.stop_after = 3;
  const SweepReport part = run_sweep(study_, first, o);
  EXPECT_EQ(part.evaluated, 3U);
  EXPECT_FALSE(part.complete);
  // The three largest points ran, and the files hold exactly them.
  const std::string csv = read(dir_ / "parts" / "results.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 4);
  EXPECT_NE(csv.find("\n4,t,w,5,"), std::string::npos);
  EXPECT_NE(csv.find("\n6,t,w,7,"), std::string::npos);

  SquareEvaluator rest;
  o.stop_after = -1;
  o.resume = true;
  o.threads = 1;  // with one thread the evaluation order is the dispatch order
  const SweepReport resumed = run_sweep(study_, rest, o);
  EXPECT_EQ(resumed.resumed, 3U);
  EXPECT_EQ(resumed.evaluated, 4U);
  EXPECT_TRUE(resumed.complete);
  const std::vector<std::size_t> expected = {3, 2, 1, 0};
  EXPECT_EQ(rest.order(), expected);
  EXPECT_EQ(read(dir_ / "parts" / "results.csv"), read(dir_ / "full" / "results.csv"));
  EXPECT_EQ(read(dir_ / "parts" / "results.h5"), read(dir_ / "full" / "results.h5"));
}

TEST_F(RunnerTest, ExistingResultsNeedResumeOrForce) {
  SquareEvaluator evaluator;
  (void)run_sweep(study_, evaluator, options("a"));
  try {
    (void)run_sweep(study_, evaluator, options("a"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "--output: the output folder already holds results (got \"" + (dir_ / "a").string() +
                  "\"; expected --resume to continue them or --force to start over)");
  }
  SweepOptions o = options("a");
  o.overwrite = true;
  EXPECT_EQ(run_sweep(study_, evaluator, o).evaluated, 7U);
}

TEST_F(RunnerTest, ResumingAnotherStudysResultsFails) {
  SquareEvaluator evaluator;
  (void)run_sweep(study_, evaluator, options("a"));
  const Study other = parse_study(R"(kind: study
topologies:
  t: {kind: torus, dims: [4], link_bandwidth: 1 GB/s, link_latency: 1 us}
workloads:
  w: {profile: profile.yaml}
sweep:
  product:
    devices: [1, 2, 30, 4, 5, 6, 7]
)",
                                  "other.yaml", dir_);
  SweepOptions o = options("a");
  o.resume = true;
  try {
    (void)run_sweep(other, evaluator, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir_ / "a" / "results.csv").string() +
                  ": devices: the row of point 2 was made by another study (got \"3\"; expected "
                  "\"30\" (the study's value; --force starts over))");
  }
}

TEST(Cluster, WithoutALauncherIsOneProcess) {
  const Cluster cluster;
  EXPECT_EQ(cluster.rank(), 0);
  EXPECT_EQ(cluster.size(), 1);
  EXPECT_FALSE(cluster.mpi());
}

}  // namespace
}  // namespace nest::sweep
