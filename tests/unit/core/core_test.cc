#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include "nest/core/error.h"
#include "nest/core/progress.h"
#include "nest/core/rng.h"

namespace nest {
namespace {

TEST(Error, RendersOneLineWithAllContext) {
  const Error e = Error::input("missing unit", {.file = "t.yaml",
                                                .line = 12,
                                                .key = "links[3].bandwidth",
                                                .value = "400",
                                                .expected = "a bandwidth"});
  EXPECT_STREQ(e.what(),
               "t.yaml:12: links[3].bandwidth: missing unit (got \"400\"; expected a bandwidth)");
  EXPECT_EQ(e.exit_status(), 2);
  EXPECT_EQ(Error::internal("broken").exit_status(), 1);
}

TEST(Error, AddsFileAndKeyPrefixes) {
  const Error e = Error::input("bad", {.key = "[2]"}).at_key("links").in_file("x.yaml", 4);
  EXPECT_STREQ(e.what(), "x.yaml:4: links[2]: bad");
  EXPECT_STREQ(Error::input("bad", {.key = "rate"}).at_key("links").what(), "links.rate: bad");
}

TEST(Rng, SameSeedSameSequence) {
  Rng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    const auto x = a.next();
    EXPECT_EQ(x, b.next());
    differs |= x != c.next();
  }
  EXPECT_TRUE(differs);
}

TEST(Rng, HashMixIsSplitMix64) {
  // hash_mix(0, 0) is the first output of Vigna's SplitMix64 seeded with 0 (splitmix64.c).
  EXPECT_EQ(hash_mix(0, 0), 0xe220a8397b1dcdafULL);
  EXPECT_NE(hash_mix(0, 1), hash_mix(1, 0));
}

TEST(Rng, FirstValuesAreFixedAcrossPlatforms) {
  // The sequence is part of the output contract (same seed, same bytes out): these values were
  // printed once by this implementation and must never change.
  Rng r(1);
  EXPECT_EQ(r.next(), 12966619160104079557ULL);
  EXPECT_EQ(r.next(), 9600361134598540522ULL);
  EXPECT_EQ(hash_mix(1, 2), 17911839290282890590ULL);
}

TEST(Rng, BelowStaysInRangeAndCoversIt) {
  Rng r(7);
  std::set<std::uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const auto x = r.below(10);
    ASSERT_LT(x, 10u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 10u);
  for (int i = 0; i < 1000; ++i) {
    const double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
  }
}

TEST(Progress, SilentWhenNotATerminal) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("work", 10, f);
    EXPECT_FALSE(p.enabled());
    p.advance(10);
    EXPECT_EQ(p.done(), 10u);
  }
  EXPECT_EQ(std::ftell(f), 0);
  std::fclose(f);
}

TEST(Progress, DrawsWhenForced) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  {
    Progress p("work", 4, f, Progress::Mode::kAlways);
    p.advance(4);
  }
  std::rewind(f);
  char buf[256] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  const std::string s(buf, n);
  EXPECT_NE(s.find("work [##############################] 4/4"), std::string::npos) << s;
  std::fclose(f);
}

}  // namespace
}  // namespace nest
