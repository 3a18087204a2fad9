#include "nest/sweep/table.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nest/core/error.h"

namespace nest::sweep {
namespace {

std::string read(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<Column> columns() {
  return {{"point", ColumnType::kInt, ""},
          {"name", ColumnType::kText, ""},
          {"time", ColumnType::kReal, "s"},
          {"stages", ColumnType::kInt, ""}};
}

TEST(CsvFields, QuoteOnlyWhatNeedsQuoting) {
  EXPECT_EQ(csv_field("plain text"), "plain text");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
  const std::vector<std::string> fields = {"1", "a,b", "say \"x\"", "", "z"};
  EXPECT_EQ(split_csv_line("1,\"a,b\",\"say \"\"x\"\"\",,z"), fields);
  EXPECT_EQ(split_csv_line("").size(), 1U);
}

TEST(CsvFields, MalformedQuotingIsAnInputError) {
  EXPECT_THROW((void)split_csv_line("\"open"), Error);
  EXPECT_THROW((void)split_csv_line("\"closed\"x,1"), Error);
}

TEST(FormatReal, IsTheShortestTextThatReadsBackExactly) {
  EXPECT_EQ(format_real(0.1), "0.1");
  EXPECT_EQ(format_real(4.0), "4");
  EXPECT_EQ(format_real(1.0 / 3.0), "0.3333333333333333");
  EXPECT_EQ(format_real(2.5e-7), "2.5e-07");
  for (double v : {1.0 / 3.0, 6.02214076e23, 245.184584, 1e-300, -7.125}) {
    EXPECT_EQ(std::stod(format_real(v)), v);
  }
}

TEST(ResultsTable, RowsComeOutInPointOrderWhateverTheInsertionOrder) {
  ResultsTable t(columns());
  t.insert({2, {std::int64_t{2}, std::string("c"), 0.5, std::int64_t{4}}});
  t.insert({0, {std::int64_t{0}, std::string("a, \"quoted\""), 1.0 / 3.0, std::monostate{}}});
  t.insert({1, {std::int64_t{1}, std::string(), std::monostate{}, std::int64_t{-3}}});
  EXPECT_EQ(t.csv(),
            "point,name,time,stages\n"
            "0,\"a, \"\"quoted\"\"\",0.3333333333333333,\n"
            "1,,,-3\n"
            "2,c,0.5,4\n");
}

TEST(ResultsTable, ALineReadBackIsTheSameRow) {
  ResultsTable t(columns());
  const Row row{7, {std::int64_t{7}, std::string("x,y"), 2.0 / 7.0, std::int64_t{12}}};
  const Row back = t.parse_csv_line(t.csv_line(row));
  EXPECT_EQ(back, row);
  const Row missing{3, {std::int64_t{3}, std::string(), std::monostate{}, std::monostate{}}};
  EXPECT_EQ(t.parse_csv_line("3,,,"), missing);
}

TEST(ResultsTable, RejectsCellsThatDoNotFitTheColumns) {
  ResultsTable t(columns());
  EXPECT_THROW(t.insert({0, {std::int64_t{0}, std::string("a"), 1.0}}), Error);
  EXPECT_THROW(t.insert({0, {std::int64_t{0}, 1.0, 1.0, std::int64_t{1}}}), Error);
  EXPECT_THROW(t.insert({0, {std::int64_t{0}, std::string("two\nlines"), 1.0, std::int64_t{1}}}),
               Error);
  EXPECT_THROW(t.insert({0, {std::int64_t{0}, std::string("a"), NAN, std::int64_t{1}}}), Error);
  EXPECT_THROW(t.insert({1, {std::int64_t{0}, std::string("a"), 1.0, std::int64_t{1}}}), Error);
  EXPECT_THROW(ResultsTable({{"time", ColumnType::kReal, "s"}}), Error);
}

TEST(ResultsTable, MalformedFieldsNameFileLineAndColumn) {
  ResultsTable t(columns());
  try {
    (void)t.parse_csv_line("1,a,fast,2", "r.csv", 5);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "r.csv:5: time: malformed field (got \"fast\"; expected a number)");
  }
  try {
    (void)t.parse_csv_line("1,a,2", "r.csv", 6);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "r.csv:6: 3 fields for 4 columns (expected a row of this study's table)");
  }
}

class TableFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("nest_table_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(TableFiles, CsvRoundTripsThroughTheFile) {
  ResultsTable t(columns());
  t.insert({4, {std::int64_t{4}, std::string("d"), 1e-9, std::int64_t{1}}});
  t.insert({1, {std::int64_t{1}, std::string("\"b\""), 12.5, std::monostate{}}});
  t.write_csv(dir_ / "r.csv");
  ResultsTable back(columns());
  back.read_csv(dir_ / "r.csv");
  EXPECT_EQ(back.rows(), t.rows());
  EXPECT_EQ(read(dir_ / "r.csv"), t.csv());
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_),
                          std::filesystem::directory_iterator()),
            1);
}

TEST_F(TableFiles, ReadingAnotherTablesCsvFailsOnTheHeader) {
  std::ofstream(dir_ / "r.csv") << "point,name,time\n0,a,1\n";
  ResultsTable t(columns());
  try {
    t.read_csv(dir_ / "r.csv");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              (dir_ / "r.csv").string() +
                  ":1: the results' columns differ from this study's (got \"point,name,time\"; "
                  "expected the header point,name,time,stages)");
  }
}

TEST_F(TableFiles, ReadingAPointTwiceFails) {
  std::ofstream(dir_ / "r.csv") << "point,name,time,stages\n0,a,1,2\n0,a,1,2\n";
  ResultsTable t(columns());
  EXPECT_THROW(t.read_csv(dir_ / "r.csv"), Error);
}

TEST_F(TableFiles, Hdf5IsTheSameBytesForTheSameRows) {
  ResultsTable a(columns());
  ResultsTable b(columns());
  const Row r0{0, {std::int64_t{0}, std::string("zero"), 0.25, std::int64_t{8}}};
  const Row r1{1, {std::int64_t{1}, std::string(), std::monostate{}, std::monostate{}}};
  a.insert(r0);
  a.insert(r1);
  b.insert(r1);  // another insertion order
  b.insert(r0);
  const std::vector<io::TableText> attrs = {{"study_name", "s"},
                                            {"study_text", "kind: study", true}};
  a.write_hdf5(dir_ / "a.h5", attrs);
  b.write_hdf5(dir_ / "b.h5", attrs);
  const std::string bytes = read(dir_ / "a.h5");
  EXPECT_GT(bytes.size(), 1000U);
  EXPECT_EQ(bytes, read(dir_ / "b.h5"));
  // Written again over itself: still the same bytes (no time stamps).
  a.write_hdf5(dir_ / "a.h5", attrs);
  EXPECT_EQ(read(dir_ / "a.h5"), bytes);
}

// Axes whose values are numbers are stored as numbers in results.h5 (the CSV keeps the text).
TEST(AxisColumns, NumbersAndQuantitiesAreStoredAsNumbers) {
  auto stored = [](const std::vector<std::string>& values) {
    const Column c = axis_column("x", values);
    EXPECT_EQ(c.type, ColumnType::kText);  // the CSV's column (and --resume's) is the text
    return std::pair(c.hdf5, c.unit);
  };
  using T = ColumnType;
  EXPECT_EQ(stored({"16", "32", ""}), std::pair(T::kInt, std::string()));
  EXPECT_EQ(stored({"1", "1.5", "4"}), std::pair(T::kReal, std::string()));
  EXPECT_EQ(stored({"12.5 GB/s", "400 Gb/s"}), std::pair(T::kReal, std::string("B/s")));
  EXPECT_EQ(stored({"1 us", "2 ms"}), std::pair(T::kReal, std::string("s")));
  EXPECT_EQ(stored({"80 GiB", "1 KB"}), std::pair(T::kInt, std::string("B")));
  EXPECT_EQ(stored({"rail", "torus"}), std::pair(T::kText, std::string()));
  EXPECT_EQ(stored({"4", "50 GB/s"}), std::pair(T::kText, std::string()));  // mixed
  EXPECT_EQ(stored({"1 us", "50 GB/s"}), std::pair(T::kText, std::string()));
  EXPECT_EQ(stored({"[4, 4]"}), std::pair(T::kText, std::string()));
  EXPECT_EQ(stored({"true", "false"}), std::pair(T::kText, std::string()));
  EXPECT_EQ(stored({"", ""}), std::pair(T::kText, std::string()));
  EXPECT_EQ(stored({"1e400"}), std::pair(T::kText, std::string()));  // not finite
}

}  // namespace
}  // namespace nest::sweep
