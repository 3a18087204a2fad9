#include "nest/config/limits.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <system_error>

#include "nest/core/error.h"
#include "nest/core/unit_parse.h"

namespace nest::config {
namespace {

constexpr std::int64_t kFallbackMemory = std::int64_t{16} << 30;

// Closes a file descriptor when it goes out of scope.
class Descriptor {
 public:
  explicit Descriptor(int fd) : fd_(fd) {}
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  ~Descriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

Error file_error(const std::string& path, const std::string& message, std::string_view expected) {
  return Error::input(message, {.file = path, .expected = std::string(expected)});
}

std::int64_t cgroup_limit() {
  std::ifstream in("/sys/fs/cgroup/memory.max");
  std::int64_t bytes = 0;
  if (in >> bytes && bytes > 0) return bytes;
  return 0;  // absent, or "max"
}

}  // namespace

std::int64_t machine_memory_limit() noexcept {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  std::int64_t total = pages > 0 && page > 0 ? std::int64_t{pages} * page : kFallbackMemory;
  try {
    const std::int64_t cgroup = cgroup_limit();
    if (cgroup > 0 && cgroup < total) total = cgroup;
  } catch (...) {
  }
  return total / 2;
}

std::string read_input_file(const std::string& path, std::int64_t max_bytes,
                            std::string_view expected) {
  if (path.empty()) throw Error::input("empty file name", {.expected = std::string(expected)});
  if (path.size() >= kMaxPathLength) {
    throw Error::input(
        "path too long",
        {.value = path, .expected = fmt::format("a path of at most {} bytes", kMaxPathLength - 1)});
  }
  if (path.find('\0') != std::string::npos) {
    throw Error::input("file name holds a NUL byte",
                       {.value = path, .expected = "a path without NUL bytes"});
  }
  // O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused below anyway.
  const Descriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) {
    throw file_error(path,
                     fmt::format("cannot open file: {}",
                                 std::error_code(errno, std::generic_category()).message()),
                     expected);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw file_error(path,
                     fmt::format("cannot read file: {}",
                                 std::error_code(errno, std::generic_category()).message()),
                     expected);
  }
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a folder"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                                              : "a special file";
    throw file_error(path, fmt::format("not a regular file but {}", what), expected);
  }
  const auto too_large = [&](std::int64_t size) {
    return Error::input(
        "file too large",
        {.file = path,
         .value = fmt::format("{} bytes", size),
         .expected = fmt::format("at most {} bytes ({}; --max-input-size raises the limit)",
                                 max_bytes, format_bytes(Bytes(max_bytes)))});
  };
  if (st.st_size > max_bytes) throw too_large(st.st_size);
  // The size may change while reading: read at most one byte past the limit.
  std::string text;
  text.resize(static_cast<std::size_t>(st.st_size) + 1);
  std::size_t used = 0;
  while (true) {
    if (used == text.size()) {
      if (static_cast<std::int64_t>(text.size()) > max_bytes) break;
      text.resize(std::min<std::size_t>(2 * text.size(), static_cast<std::size_t>(max_bytes) + 1));
    }
    const ssize_t n = ::read(fd.get(), text.data() + used, text.size() - used);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw file_error(path,
                       fmt::format("cannot read file: {}",
                                   std::error_code(errno, std::generic_category()).message()),
                       expected);
    }
    if (n == 0) break;
    used += static_cast<std::size_t>(n);
  }
  if (static_cast<std::int64_t>(used) > max_bytes) throw too_large(static_cast<std::int64_t>(used));
  text.resize(used);
  return text;
}

}  // namespace nest::config
