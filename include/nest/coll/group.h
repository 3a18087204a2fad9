#pragma once
/// \file
/// The command-line syntax of device groups and of concurrent copies of a group.
///
/// Group: comma-separated items, each a device id or an inclusive range "a-b" (a <= b), in the
/// order the ranks take: "0-7,16-23" is ranks 0..15 on devices 0..7 then 16..23; "3,1,2" is a
/// three-rank group whose rank 0 is device 3. Spaces are not allowed.
///
/// Size sweep (nccl-tests' -b/-e/-f): "MIN:MAX[:FACTOR]" gives MIN, MIN·FACTOR, MIN·FACTOR², ...
/// up to MAX (FACTOR defaults to 2, an integer >= 2). A size is a number with an optional
/// binary suffix as nccl-tests reads them (K = 1024, M = 1024², G = 1024³, T = 1024⁴; "4G" is
/// 4 GiB, "1.5M" is 1,572,864 B), or any size with a byte unit ("1MiB", "100 MB").
///
/// Concurrent copies: "stride:S" adds copies of the group shifted by S, 2S, ... devices for as
/// long as every device of the copy exists; "stride:S:K" makes K groups in all (the original
/// and K-1 copies), each of which must exist. "none" means the group alone.

#include <cstddef>
#include <string_view>
#include <vector>

#include "nest/core/units.h"
#include "nest/topo/topology.h"

namespace nest::coll {

/// Parses a group (syntax above). Throws `Error` (input, key "--group") for malformed text, a
/// device >= num_devices, a duplicated device or an empty group. O(group size · log).
[[nodiscard]] std::vector<topo::DeviceId> parse_group(std::string_view text,
                                                      std::size_t num_devices);

/// The groups that run at once: `group` first, then its copies by `spec` (syntax above).
/// Throws `Error` (input, key "--concurrent") for malformed text, a zero stride, copies that
/// overlap each other, or (with K) a copy past the last device.
[[nodiscard]] std::vector<std::vector<topo::DeviceId>> concurrent_groups(
    const std::vector<topo::DeviceId>& group, std::string_view spec, std::size_t num_devices);

/// Parses a size sweep (syntax above). Throws `Error` (input, key "--sizes") for malformed text,
/// a size below 1 byte, MAX < MIN or a factor below 2. At most 63 sizes (a factor of 2 from 1 B
/// to 2^62 B). O(sizes).
[[nodiscard]] std::vector<Bytes> parse_size_sweep(std::string_view text);

}  // namespace nest::coll
