// The --group and --concurrent syntax, including every error message.

#include "nest/coll/group.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "nest/coll/collective.h"
#include "nest/core/error.h"
#include "nest/topo/collective_model.h"

namespace nest::coll {
namespace {

std::string error_of(const auto& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

using G = std::vector<topo::DeviceId>;

TEST(ParseGroup, ReadsRangesAndListsInOrder) {
  EXPECT_EQ(parse_group("0-3", 8), (G{0, 1, 2, 3}));
  EXPECT_EQ(parse_group("0-1,6-7", 8), (G{0, 1, 6, 7}));
  EXPECT_EQ(parse_group("5,3,4", 8), (G{5, 3, 4}));
  EXPECT_EQ(parse_group("7", 8), (G{7}));
}

TEST(ParseGroup, RejectsBadGroupsWithOneLineMessages) {
  EXPECT_EQ(error_of([] { (void)parse_group("0-8", 8); }),
            "--group: device out of range (got \"8\"; expected devices 0-7)");
  EXPECT_EQ(error_of([] { (void)parse_group("9", 8); }),
            "--group: device out of range (got \"9\"; expected devices 0-7)");
  EXPECT_EQ(error_of([] { (void)parse_group("0-3,2", 8); }),
            "--group: device listed twice (got \"2\"; expected distinct devices)");
  EXPECT_EQ(error_of([] { (void)parse_group("3-1", 8); }),
            "--group: device range runs backwards (got \"3-1\"; expected devices and ranges "
            "separated by commas, e.g. 0-7,16-23)");
  EXPECT_EQ(error_of([] { (void)parse_group("0-x", 8); }),
            "--group: malformed device range (got \"0-x\"; expected devices and ranges "
            "separated by commas, e.g. 0-7,16-23)");
  EXPECT_EQ(error_of([] { (void)parse_group("", 8); }),
            "--group: malformed group (expected devices and ranges separated by commas, e.g. "
            "0-7,16-23)");
  EXPECT_EQ(error_of([] { (void)parse_group("1,,2", 8); }),
            "--group: malformed group (got \"1,,2\"; expected devices and ranges separated by "
            "commas, e.g. 0-7,16-23)");
}

TEST(ConcurrentGroups, StrideCopiesUntilDevicesRunOut) {
  const auto groups = concurrent_groups(G{0, 1}, "stride:2", 7);
  EXPECT_EQ(groups, (std::vector<G>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_EQ(concurrent_groups(G{0, 4}, "stride:1:3", 8), (std::vector<G>{{0, 4}, {1, 5}, {2, 6}}));
  EXPECT_EQ(concurrent_groups(G{0, 4}, "none", 8), (std::vector<G>{{0, 4}}));
  // K counts the group itself: stride:S:1 is the group alone, wherever S would land.
  EXPECT_EQ(concurrent_groups(G{0, 4}, "stride:8:1", 8), (std::vector<G>{{0, 4}}));
}

TEST(ConcurrentGroups, RejectsBadSpecs) {
  EXPECT_EQ(error_of([] {
              (void)concurrent_groups(G{0, 1}, "stride:1", 8);
            }),
            "--concurrent: copies of the group overlap at device 1 (got \"stride:1\"; expected "
            "none, stride:S or stride:S:K, e.g. stride:64)");
  EXPECT_EQ(error_of([] {
              (void)concurrent_groups(G{4, 7}, "stride:2", 8);
            }),
            "--concurrent: no copy fits: the group shifted by 2 runs past the last device (9 >= "
            "8) (got \"stride:2\"; expected none, stride:S or stride:S:K, e.g. stride:64)");
  // A stride near 2^64 must not wrap around to a device inside the range.
  EXPECT_EQ(error_of([] { (void)concurrent_groups(G{1}, "stride:18446744073709551615", 8); }),
            "--concurrent: no copy fits: the group shifted by 18446744073709551615 runs past the "
            "last device (more than 2^64 >= 8) (got \"stride:18446744073709551615\"; expected "
            "none, stride:S or stride:S:K, e.g. stride:64)");
  EXPECT_EQ(error_of([] { (void)concurrent_groups(G{1}, "stride:9223372036854775808:3", 8); }),
            "--concurrent: copy 1 runs past the last device (9223372036854775809 >= 8) (got "
            "\"stride:9223372036854775808:3\"; expected none, stride:S or stride:S:K, e.g. "
            "stride:64)");
  EXPECT_EQ(error_of([] {
              (void)concurrent_groups(G{0, 1}, "stride:0", 8);
            }),
            "--concurrent: stride must be positive (got \"stride:0\"; expected none, stride:S or "
            "stride:S:K, e.g. stride:64)");
  EXPECT_EQ(error_of([] {
              (void)concurrent_groups(G{0, 1}, "every:2", 8);
            }),
            "--concurrent: malformed concurrency (got \"every:2\"; expected none, stride:S or "
            "stride:S:K, e.g. stride:64)");
  EXPECT_EQ(error_of([] {
              (void)concurrent_groups(G{0, 1}, "stride:4:3", 8);
            }),
            "--concurrent: copy 2 runs past the last device (9 >= 8) (got \"stride:4:3\"; "
            "expected none, stride:S or stride:S:K, e.g. stride:64)");
}

TEST(Validate, NamesTheBadFieldAndWhatWasExpected) {
  EXPECT_EQ(error_of([] {
              validate({Operation::kAllToAll, Algorithm::kRing, Bytes(8)}, 4);
            }),
            "--algorithm: algorithm not valid for all_to_all (got \"ring\"; expected one of "
            "pairwise, direct)");
  EXPECT_EQ(error_of([] {
              validate({Operation::kAllReduce, Algorithm::kRing, Bytes(0)}, 4);
            }),
            "--size: message size must be positive (got \"0 B\"; expected a size > 0, e.g. "
            "1GiB)");
  EXPECT_EQ(error_of([] {
              validate({Operation::kReduceScatter, Algorithm::kHalvingDoubling, Bytes(8)}, 6);
            }),
            "--group: halving_doubling reduce_scatter needs a power-of-two group (got \"6 "
            "devices\"; expected 1, 2, 4, 8, ... devices (allreduce also takes other sizes))");
  EXPECT_EQ(error_of([] {
              validate({Operation::kSend, Algorithm::kDirect, Bytes(8)}, 3);
            }),
            "--group: send needs a group of exactly two devices {source, destination} (got \"3 "
            "devices\"; expected 2 devices)");
  EXPECT_EQ(error_of([] {
              validate({Operation::kAllToAll, Algorithm::kDirect, Bytes(8), 2}, 4);
            }),
            "--chunks: bad chunk count for direct (got \"2\"; expected 1 (only ring, tree, "
            "hierarchical and torus pipeline))");
  EXPECT_EQ(error_of([] {
              CollectiveSpec s{Operation::kAllReduce, Algorithm::kHierarchical, Bytes(8)};
              s.levels = {2, 3};
              validate(s, 8);
            }),
            "--levels: level sizes must multiply to the group size (got \"2,3\"; expected a "
            "product of 8)");
}

TEST(ParseSizeSweep, FollowsNcclTestsBeginEndFactor) {
  using B = std::vector<Bytes>;
  // nccl-tests -b 8 -e 128 -f 2: 8, 16, 32, 64, 128.
  EXPECT_EQ(parse_size_sweep("8:128"), (B{Bytes(8), Bytes(16), Bytes(32), Bytes(64), Bytes(128)}));
  // Binary suffixes as nccl-tests' parsesize reads them; the last size may fall short of MAX.
  EXPECT_EQ(parse_size_sweep("1K:1M:4"), (B{Bytes(1024), Bytes(4096), Bytes(16384), Bytes(65536),
                                            Bytes(262144), Bytes(1048576)}));
  EXPECT_EQ(parse_size_sweep("3:20:3"), (B{Bytes(3), Bytes(9)}));
  EXPECT_EQ(parse_size_sweep("1.5M:1.5M"), (B{Bytes(1572864)}));
  EXPECT_EQ(parse_size_sweep("1MiB:2MB"), (B{Bytes(1048576)}));
  EXPECT_EQ(parse_size_sweep("8:4G").size(), 30U);  // 2^3 .. 2^32
  EXPECT_EQ(parse_size_sweep("8:4G").back(), Bytes::gibibytes(4));
  EXPECT_EQ(parse_size_sweep("1:4T").size(), 43U);
}

TEST(ParseSizeSweep, RejectsBadRangesWithOneLineMessages) {
  const std::string syntax =
      "expected MIN:MAX[:FACTOR] as in nccl-tests -b/-e/-f, e.g. 8:4G:2 (K, M, G = 1024, "
      "1024^2, 1024^3))";
  EXPECT_EQ(error_of([] { (void)parse_size_sweep("8"); }),
            "--sizes: malformed size range (got \"8\"; " + syntax);
  EXPECT_EQ(error_of([] { (void)parse_size_sweep("8:4X"); }),
            "--sizes: malformed size (got \"4X\"; " + syntax);
  EXPECT_EQ(
      error_of([] { (void)parse_size_sweep("0:4G"); }),
      "--sizes: sizes must be whole numbers of bytes from 1 B to 2^62 B (got \"0\"; " + syntax);
  EXPECT_EQ(
      error_of([] { (void)parse_size_sweep("0.5:4"); }),
      "--sizes: sizes must be whole numbers of bytes from 1 B to 2^62 B (got \"0.5\"; " + syntax);
  EXPECT_EQ(error_of([] { (void)parse_size_sweep("1G:1M"); }),
            "--sizes: the largest size is below the smallest (got \"1G:1M\"; " + syntax);
  EXPECT_EQ(error_of([] { (void)parse_size_sweep("8:64:1"); }),
            "--sizes: the factor must be at least 2 (got \"8:64:1\"; " + syntax);
  EXPECT_EQ(error_of([] { (void)parse_size_sweep("8:64:x"); }),
            "--sizes: malformed factor (got \"8:64:x\"; " + syntax);
  EXPECT_EQ(
      error_of([] { (void)parse_size_sweep("8:1e300"); }),
      "--sizes: sizes must be whole numbers of bytes from 1 B to 2^62 B (got \"1e300\"; " + syntax);
}

TEST(Names, ParseAndPrintRoundTrip) {
  for (Operation op :
       {Operation::kAllReduce, Operation::kReduceScatter, Operation::kAllGather,
        Operation::kAllToAll, Operation::kBroadcast, Operation::kSend, Operation::kReduce,
        Operation::kGather, Operation::kScatter, Operation::kSendRecv}) {
    EXPECT_EQ(parse_operation(operation_name(op)), op);
    // A collective model may give each of them its own base latency.
    const auto names = topo::collective_operation_names();
    EXPECT_NE(std::find(names.begin(), names.end(), operation_name(op)), names.end());
  }
  EXPECT_EQ(parse_operation("all-gather"), Operation::kAllGather);
  EXPECT_EQ(parse_operation("alltoall"), Operation::kAllToAll);
  EXPECT_EQ(parse_algorithm("halving-doubling"), Algorithm::kHalvingDoubling);
  EXPECT_EQ(parse_operation("send-recv"), Operation::kSendRecv);
  EXPECT_EQ(error_of([] { (void)parse_operation("gatherv"); }),
            "--op: unknown operation (got \"gatherv\"; expected allreduce, reduce_scatter, "
            "all_gather, all_to_all, broadcast, send, reduce, gather, scatter, sendrecv)");
  EXPECT_EQ(error_of([] { (void)parse_algorithm("butterfly"); }),
            "--algorithm: unknown algorithm (got \"butterfly\"; expected ring, tree, "
            "halving_doubling, direct, pairwise, hierarchical, torus, nvls)");
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kBroadcast, 8), 1.0);
  // nccl-tests src/{reduce,gather,scatter,sendrecv}.cu: 1, (n-1)/n, (n-1)/n, 1.
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kReduce, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kScatter, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(Operation::kSendRecv, 8), 1.0);
}

}  // namespace
}  // namespace nest::coll
