// What an error line may show (issue 17, defect 6): escape sequences reached the terminal, a
// whole 10 MB value was echoed.
#include <gtest/gtest.h>

#include <string>

#include "nest/core/error.h"

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
  EXPECT_EQ(std::string(e.what()),
            "f.yaml: k: bad (got 1001 bytes beginning \"" + std::string(64, 'v') + "...\")");
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

}  // namespace
}  // namespace nest
