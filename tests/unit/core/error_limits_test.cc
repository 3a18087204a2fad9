// What an error line may show (issue 17, defect 6) and the checked conversions to Time
// (defect 3: an efficiency of 1e-300 gave negative times through an undefined cast).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "nest/core/error.h"
#include "nest/core/units.h"

namespace nest {
namespace {

TEST(Printable, EscapesControlsC1AndInvalidUtf8) {
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\nb\\tc\\rd");
  EXPECT_EQ(printable("\x1b[2J"), "\\x1b[2J");
  EXPECT_EQ(printable(std::string("\0z", 2)), "\\x00z");
  EXPECT_EQ(printable("\x7f"), "\\x7f");
  EXPECT_EQ(printable("\xc2\x9b"
                      "31m"),
            "\\u009b31m");  // C1 CSI
  EXPECT_EQ(printable("\xff\xc3"), "\\xff\\xc3");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // kept
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a surrogate is not UTF-8
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");           // nor an overlong '/'
}

TEST(Printable, CutsAtACharacterCount) {
  EXPECT_EQ(printable("abcdef", 3), "abc...");
  EXPECT_EQ(printable("\xc3\xa9\xc3\xa9\xc3\xa9", 2), "\xc3\xa9\xc3\xa9...");
  EXPECT_EQ(printable("abc", 3), "abc");
}

TEST(Utf8, ValidatesAndFindsTheFirstBadByte) {
  EXPECT_TRUE(is_utf8("plain \xf0\x9f\x98\x80"));
  EXPECT_FALSE(is_utf8("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_EQ(utf8_prefix("ab\xffzz"), 2U);
  EXPECT_EQ(utf8_prefix("ab\xe2\x82"), 2U);  // truncated sequence
}

TEST(Error, ShowsAShortEscapedExcerptOfALongValue) {
  const Error e =
      Error::input("bad", {.file = "f.yaml", .key = "k", .value = std::string(1000, 'v') + "\n"});
  EXPECT_EQ(std::string(e.what()), "f.yaml: k: bad (got 1001 bytes beginning \"" +
                                       std::string(kValueExcerpt, 'v') + "...\")");
  // Control characters anywhere in the line are escaped: the file, the key, the message.
  const Error c = Error::input("m\x1b[0m", {.file = "a\nb", .key = "k\x07"});
  EXPECT_STREQ(c.what(), "a\\nb: k\\x07: m\\x1b[0m");
}

TEST(Error, KeepsTheEndOfALongFileNameAndCapsTheLine) {
  const std::string dir(1000, 'd');
  const Error e = Error::input("bad", {.file = dir + "/x.yaml"});
  const std::string what = e.what();
  EXPECT_EQ(what, "..." + std::string(249, 'd') + "/x.yaml: bad");
  const Error huge = Error::input(std::string(100000, 'm'), {.expected = std::string(100000, 'e')});
  EXPECT_LE(std::string(huge.what()).size(), kMaxLine);
}

TEST(CheckedTime, ConversionsOutOfRangeAreInputErrors) {
  EXPECT_EQ(Time::seconds(1.5).ps(), 1'500'000'000'000);
  EXPECT_THROW((void)Time::seconds(1e7), Error);  // 1e19 ps > 9.2e18
  EXPECT_THROW((void)Time::seconds(std::nan("")), Error);
  EXPECT_THROW((void)Time::microseconds(-1e13), Error);
  // 1 GB at 1 B/s is 1e9 s, past the 2^62 ps (4.6e6 s) that one transfer may take.
  try {
    (void)serialization_time(Bytes(1'000'000'000), Bandwidth::bytes_per_second(1));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInput);
    EXPECT_STREQ(e.what(),
                 "duration out of range (got \"1e+09 s\"; expected a transfer or computation "
                 "within 2^62 ps (4.6e6 s, 53 days): smaller sizes or faster rates)");
  }
  EXPECT_THROW((void)compute_time(Flops(1e12), FlopRate::per_second(1e-300)), Error);
  EXPECT_EQ(compute_time(Flops(4.6e6), FlopRate::per_second(1)).ps(), 4'600'000'000'000'000'000);
  EXPECT_EQ(checked_ps(12.5), 12.5);
}

// rounded_ps is max(0, llround(checked_ps(x))) on every value, halves, the double just below a
// half, the range's ends and the doubles past 2^52 (integers) included; out of range it throws.
TEST(Durations, RoundedPicosecondsAreLlroundClampedAtZero) {
  const double below_half = std::nextafter(0.5, 0.0);
  std::vector<double> values{-1.0,
                             -0.5,
                             -0.25,
                             0.0,
                             below_half,
                             0.5,
                             1.5,
                             2.5,
                             std::nextafter(2.5, 0.0),
                             1e6 + 0.5,
                             4503599627370495.5,
                             4503599627370497.0,
                             9007199254740993.0,
                             static_cast<double>(kMaxDurationPs)};
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (int i = 0; i < 10'000; ++i) {  // random magnitudes up to 2^62
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    values.push_back(
        std::ldexp(static_cast<double>(x >> 11) / 9007199254740992.0, static_cast<int>(x % 63)));
  }
  for (const double v : values) {
    EXPECT_EQ(rounded_ps(v), std::max<std::int64_t>(0, std::llround(checked_ps(v)))) << v;
  }
  EXPECT_THROW((void)rounded_ps(-1.5), Error);
  EXPECT_THROW((void)rounded_ps(std::nan("")), Error);
  EXPECT_THROW((void)rounded_ps(std::nextafter(static_cast<double>(kMaxDurationPs), 1e300)), Error);
}

}  // namespace
}  // namespace nest
