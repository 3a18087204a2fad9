#pragma once
/// \file
/// What an input may make NEST read or build, and the one function that reads input files.
///
/// Every input file (topology, model, accelerator, layer profile, plan, study) is read through
/// `read_input_file`: it must be a regular file (not a device such as /dev/zero, a FIFO or a
/// folder), its path at most `kMaxPathLength` bytes and its size at most
/// `Limits::max_input_bytes` (64 MiB unless overridden, `--max-input-size` on the command line).
/// Topology generators refuse, before building, a topology whose estimated memory is over
/// `Limits::max_memory_bytes` (`--max-memory`; default `machine_memory_limit()`).

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "nest/core/catalog.h"

namespace nest::config {

/// Largest input file read unless overridden: 64 MiB. The largest bundled file is under
/// 64 KiB; an explicit topology of 500,000 cables is about 40 MiB.
inline constexpr std::int64_t kDefaultMaxInputBytes = std::int64_t{64} << 20;
/// Longest accepted path, in bytes (Linux's PATH_MAX, terminating NUL included): the catalog's.
inline constexpr std::size_t kMaxPathLength = kMaxPathBytes;
/// Deepest nesting of maps and lists in a YAML input (NEST's formats need 5).
inline constexpr int kMaxYamlDepth = 32;

/// Half of the memory this process may use: the smaller of physical memory and the cgroup
/// (v2) limit `/sys/fs/cgroup/memory.max`, halved; 8 GiB when neither can be read.
[[nodiscard]] std::int64_t machine_memory_limit() noexcept;

/// Resource limits of one run. Copyable plain data.
struct Limits {
  std::int64_t max_input_bytes = kDefaultMaxInputBytes;    ///< size of one input file, bytes
  std::int64_t max_memory_bytes = machine_memory_limit();  ///< estimated memory of a topology
};

/// The bytes of the input file `path`. Throws `Error` (input, file = path) when the path is
/// empty or longer than kMaxPathLength, when it cannot be opened (the system's reason), when it
/// is not a regular file, or when it holds more than `max_bytes` bytes; `expected` describes
/// the file in the message ("a readable YAML file"). Opens without blocking (a FIFO is refused,
/// not waited on) and never reads more than max_bytes + 1 bytes.
[[nodiscard]] std::string read_input_file(const std::string& path,
                                          std::int64_t max_bytes = kDefaultMaxInputBytes,
                                          std::string_view expected = "a readable YAML file");

}  // namespace nest::config
