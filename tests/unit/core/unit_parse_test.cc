#include "nest/core/unit_parse.h"

#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"

namespace nest {
namespace {

TEST(UnitParse, BandwidthBytesUseDecimalPrefixes) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 GB/s").bytes_per_s(), 400e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("12.5GB/s").bytes_per_s(), 12.5e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 TB/s").bytes_per_s(), 1e12);
}

TEST(UnitParse, BandwidthLowerCaseBIsBits) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gb/s").bytes_per_s(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("400 Gbps").bytes_per_s(), 50e9);
  EXPECT_DOUBLE_EQ(parse_bandwidth("100 Mb/s").bytes_per_s(), 12.5e6);
}

TEST(UnitParse, BandwidthBinaryPrefixes) {
  EXPECT_DOUBLE_EQ(parse_bandwidth("1 GiB/s").bytes_per_s(), 1073741824.0);
}

TEST(UnitParse, TimesBecomeIntegerPicoseconds) {
  EXPECT_EQ(parse_time("1.5 us").ps(), 1'500'000);
  EXPECT_EQ(parse_time("100 us").ps(), 100'000'000);
  EXPECT_EQ(parse_time("2 ms").ps(), 2'000'000'000);
  EXPECT_EQ(parse_time("7 ps").ps(), 7);
  EXPECT_EQ(parse_time("0.25 s").ps(), 250'000'000'000);
}

TEST(UnitParse, SizesWithBinaryAndDecimalPrefixes) {
  EXPECT_EQ(parse_bytes("80 GiB").count(), 80LL << 30);
  EXPECT_EQ(parse_bytes("80 GB").count(), 80'000'000'000LL);
  EXPECT_EQ(parse_bytes("1 MiB").count(), 1 << 20);
  EXPECT_EQ(parse_bytes("16 b").count(), 2);
}

TEST(UnitParse, FlopRates) {
  EXPECT_DOUBLE_EQ(parse_flop_rate("989 TFLOP/s").flops_per_s(), 989e12);
  EXPECT_DOUBLE_EQ(parse_flop_rate("2.25 PFLOP/s").flops_per_s(), 2.25e15);
}

TEST(UnitParse, MissingUnitIsAnError) {
  try {
    (void)parse_bandwidth("400");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_EQ(e.message(), "missing unit");
    EXPECT_EQ(e.context().value, "400");
  }
}

TEST(UnitParse, RejectsBadStrings) {
  EXPECT_THROW((void)parse_bandwidth("fast"), Error);
  EXPECT_THROW((void)parse_bandwidth("400 GB"), Error);   // a size, not a rate
  EXPECT_THROW((void)parse_bandwidth("-5 GB/s"), Error);  // negative
  EXPECT_THROW((void)parse_time("3 cycles"), Error);      // never cycles
  EXPECT_THROW((void)parse_time("1.5"), Error);
  EXPECT_THROW((void)parse_bytes("3 b"), Error);  // not a whole number of bytes
  EXPECT_THROW((void)parse_bytes("80 gib"), Error);
  EXPECT_THROW((void)parse_flop_rate("989 TFLOPS"), Error);
}

// A finite number whose unit makes it overflow is an input error, not an infinite rate (an
// infinite link rate would break the simulator's bottleneck bookkeeping).
TEST(UnitParse, OverflowingQuantitiesAreErrors) {
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInput);
      return e.message();
    }
    return std::string("no exception");
  };
  EXPECT_EQ(message([] { (void)parse_bandwidth("1e300 TB/s"); }), "quantity out of range");
  EXPECT_EQ(message([] { (void)parse_flop_rate("1e300 EFLOP/s"); }), "quantity out of range");
  EXPECT_EQ(message([] { (void)parse_time("1e300 s"); }), "quantity out of range");
  EXPECT_EQ(message([] { (void)parse_time("1e8 s"); }), "quantity out of range");  // > 106 days
  EXPECT_EQ(message([] { (void)parse_bytes("9223372036854775807B"); }), "quantity out of range");
  EXPECT_EQ(message([] { (void)parse_bytes("1e300 TiB"); }), "quantity out of range");
  EXPECT_EQ(parse_bytes("8 PiB").count(), std::int64_t{1} << 53);     // large but in range
  EXPECT_DOUBLE_EQ(parse_bandwidth("1e6 TB/s").bytes_per_s(), 1e18);  // large but finite
}

TEST(UnitParse, UnknownUnitMessageNamesTheUnit) {
  try {
    (void)parse_time("3 cycles");
    FAIL() << "no exception";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "unknown unit \"cycles\" (got \"3 cycles\"; expected a duration like \"1.5 us\" "
              "(ps, ns, us, ms, s))");
  }
}

TEST(Units, SerializationTimeRoundsUpToPicoseconds) {
  // 1 GiB over 400 GB/s = 2.68435456 ms exactly.
  EXPECT_EQ(serialization_time(Bytes::gibibytes(1), Bandwidth::gigabytes_per_second(400)).ps(),
            2'684'354'560);
  // 1 byte over 3 B/s = 0.333.. s, rounded up.
  EXPECT_EQ(serialization_time(Bytes(1), Bandwidth::bytes_per_second(3)).ps(), 333'333'333'334);
}

TEST(Units, TimeArithmetic) {
  const Time a = Time::microseconds(1.5);
  EXPECT_EQ((a + a).ps(), 3'000'000);
  EXPECT_EQ((a * 4).ps(), 6'000'000);
  EXPECT_LT(a, a + Time::picoseconds(1));
  EXPECT_DOUBLE_EQ(Time::seconds(2.5).to_seconds(), 2.5);
}

TEST(UnitFormat, ReadableForms) {
  EXPECT_EQ(format_time(Time::microseconds(1.5)), "1.5 us");
  EXPECT_EQ(format_bytes(Bytes::gibibytes(80)), "80 GiB");
  EXPECT_EQ(format_bandwidth(Bandwidth::gigabytes_per_second(400)), "400 GB/s");
}

}  // namespace
}  // namespace nest
