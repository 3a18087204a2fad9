#include "core/posix.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "nest/core/atomic_file.h"

namespace nest::detail {

Fd& Fd::operator=(Fd&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() { close(); }

int Fd::close() noexcept {
  if (fd_ < 0) return 0;
  const int result = ::close(fd_);
  fd_ = -1;
  // Linux releases the descriptor even when close(2) fails (EINTR included): never retry.
  return result == 0 ? 0 : errno;
}

std::string errno_text(int err) {
  char buffer[256];
  // GNU strerror_r returns the message (possibly not in `buffer`).
  return ::strerror_r(err, buffer, sizeof buffer);
}

std::string random_hex() {
  unsigned char bytes[8] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  if (got < sizeof bytes) {
    // No random source (a kernel before 3.17): the address of a local and the pid still make
    // the name hard to guess; O_EXCL keeps it exclusive either way.
    const auto mix =
        reinterpret_cast<std::uintptr_t>(&got) ^ static_cast<std::uintptr_t>(::getpid());
    std::memcpy(bytes, &mix, sizeof bytes < sizeof mix ? sizeof bytes : sizeof mix);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

bool is_temporary_of(std::string_view name, std::string_view stem) {
  const std::size_t prefix = stem.size() + kTemporaryMarker.size();
  if (name.size() != prefix + 16 || !name.starts_with(stem) ||
      name.substr(stem.size(), kTemporaryMarker.size()) != kTemporaryMarker) {
    return false;
  }
  for (char c : name.substr(prefix)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

bool try_lock(int fd) noexcept {
  while (true) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
    if (errno != EINTR) return false;
  }
}

bool same_file(const std::filesystem::path& path, int fd) noexcept {
  struct stat by_name = {};
  struct stat by_fd = {};
  if (::lstat(path.c_str(), &by_name) != 0 || ::fstat(fd, &by_fd) != 0) return false;
  return by_name.st_dev == by_fd.st_dev && by_name.st_ino == by_fd.st_ino;
}

void remove_stale_temporaries(const std::filesystem::path& folder, std::string_view stem) noexcept {
  try {
    std::error_code ec;
    const std::filesystem::path where = folder.empty() ? std::filesystem::path(".") : folder;
    for (const auto& entry : std::filesystem::directory_iterator(where, ec)) {
      const std::filesystem::path path = entry.path();
      if (!is_temporary_of(path.filename().string(), stem)) continue;
      struct stat st = {};
      if (::lstat(path.c_str(), &st) != 0) continue;
      if (S_ISLNK(st.st_mode)) {
        ::unlink(path.c_str());  // never ours: a planted name is removed, not followed
        continue;
      }
      const bool folder_entry = S_ISDIR(st.st_mode);
      Fd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK |
                                     (folder_entry ? O_DIRECTORY : 0)));
      if (!fd.valid() || !try_lock(fd.get())) continue;  // a live writer holds it
      if (!same_file(path, fd.get())) continue;          // replaced meanwhile
      // Removed while holding the lock: a writer that created the name but has not locked it
      // yet finds the lock taken, or its name gone, and draws a new one.
      std::error_code ignored;
      if (folder_entry) {
        std::filesystem::remove_all(path, ignored);
      } else {
        std::filesystem::remove(path, ignored);
      }
    }
  } catch (...) {
    // Best effort: a leftover temporary is removed by a later run.
  }
}

void sync_folder(const std::filesystem::path& folder) noexcept {
  const std::filesystem::path where = folder.empty() ? std::filesystem::path(".") : folder;
  Fd fd(::open(where.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.valid()) ::fsync(fd.get());
}

SignalBlock::SignalBlock() noexcept {
  sigset_t block;
  sigemptyset(&block);
  for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&block, s);
  pthread_sigmask(SIG_BLOCK, &block, &previous_);
  commit_begins();
}

SignalBlock::~SignalBlock() {
  commit_ends();
  pthread_sigmask(SIG_SETMASK, &previous_, nullptr);
}

}  // namespace nest::detail
