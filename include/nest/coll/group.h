#pragma once
/// \file
/// The command-line syntax of device groups and of concurrent copies of a group.
///
/// Group: comma-separated items, each a device id or an inclusive range "a-b" (a <= b), in the
/// order the ranks take: "0-7,16-23" is ranks 0..15 on devices 0..7 then 16..23; "3,1,2" is a
/// three-rank group whose rank 0 is device 3. Spaces are not allowed.
///
/// Concurrent copies: "stride:S" adds copies of the group shifted by S, 2S, ... devices for as
/// long as every device of the copy exists; "stride:S:K" makes K groups in all (the original
/// and K-1 copies), each of which must exist. "none" means the group alone.

#include <cstddef>
#include <string_view>
#include <vector>

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

}  // namespace nest::coll
