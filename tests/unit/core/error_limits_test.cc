// What an error line may show (issue 17, defect 6) and the checked conversions to Time
// (defect 3: an efficiency of 1e-300 gave negative times through an undefined cast).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

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

}  // namespace
}  // namespace nest
