#pragma once
// Shared by the fuzzers of tests/fuzz/: runs one loader on the fuzzer's bytes. An input error
// is what most inputs must give; anything else is a finding and aborts, so that libFuzzer keeps
// the input: an internal error, any other exception (libFuzzer reports it as uncaught), or an
// error line that is not one printable UTF-8 line of at most nest::kMaxLine bytes.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "nest/config/limits.h"
#include "nest/core/error.h"

namespace nest::fuzz {

/// Limits small enough that no input makes a fuzzer run out of memory or time: 1 MiB files, 32
/// MiB of topology.
inline config::Limits fuzz_limits() {
  return config::Limits{.max_input_bytes = 1 << 20, .max_memory_bytes = 32 << 20};
}

[[noreturn]] inline void finding(const char* what, const std::string& message) {
  std::fprintf(stderr, "finding: %s: %s\n", what, message.c_str());
  std::abort();
}

inline void check_line(const std::string& line) {
  if (line.size() > kMaxLine) finding("error line too long", line.substr(0, 200));
  if (!is_utf8(line)) finding("error line not UTF-8", printable(line));
  for (const char c : line) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7F) finding("control character in error line", printable(line));
  }
}

/// Runs `load(text)` on the input; see the file comment.
template <class Load>
int run_one(const std::uint8_t* data, std::size_t size, Load&& load) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    load(text);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInput) finding("internal error", e.what());
    check_line(e.what());
  }
  return 0;
}

}  // namespace nest::fuzz
