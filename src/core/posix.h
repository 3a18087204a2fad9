#pragma once
// Private POSIX helpers of the output-file machinery (atomic_file.cc, staged_folder.cc,
// folder_lock.cc): descriptors that close themselves, errno texts, unpredictable names, flock
// tests and the removal of temporaries whose writer is gone. Linux only, as the project is.

#include <csignal>
#include <filesystem>
#include <string>
#include <string_view>

namespace nest::detail {

/// An owned file descriptor; closed (errors ignored) when dropped. `close()` reports them.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(Fd&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Fd& operator=(Fd&& other) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] bool valid() const noexcept { return fd_ >= 0; }
  /// Closes the descriptor; returns 0 or the errno of close(2).
  int close() noexcept;
  /// Gives up ownership: returns the descriptor, which the caller closes.
  [[nodiscard]] int release() noexcept {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

/// strerror of `err` ("No space left on device").
[[nodiscard]] std::string errno_text(int err);

/// 16 lower-case hex digits from the kernel's random source (getrandom(2)).
[[nodiscard]] std::string random_hex();

/// Whether `name` is `<stem><kTemporaryMarker><16 hex digits>`.
[[nodiscard]] bool is_temporary_of(std::string_view name, std::string_view stem);

/// Takes the exclusive flock of `fd` without waiting; false when another open file holds it.
[[nodiscard]] bool try_lock(int fd) noexcept;

/// Whether `path` (not followed if a symlink) is the file open as `fd`.
[[nodiscard]] bool same_file(const std::filesystem::path& path, int fd) noexcept;

/// Removes every entry `<stem><kTemporaryMarker><16 hex>` of `folder` whose writer is gone: a
/// live writer holds the flock of its temporary (file or folder) for as long as it exists, and
/// the kernel drops that lock when the process ends, however it ends. Best effort: entries that
/// cannot be examined or removed are left.
void remove_stale_temporaries(const std::filesystem::path& folder, std::string_view stem) noexcept;

/// fsync(2) of a folder, so that a rename in it is durable. Best effort (some file systems
/// refuse to sync a folder; the rename itself has happened).
void sync_folder(const std::filesystem::path& folder) noexcept;

/// Blocks the interrupting signals (SIGINT, SIGTERM, SIGHUP) in this thread while alive, so that
/// a few system calls that must happen together do; a signal that arrives meanwhile is delivered
/// when the block ends. Should another thread take the signal, its handler waits for the block
/// to end before it removes any temporary (nest/core/temporaries.h), so a rename and its
/// registry update are never split, whichever thread the kernel picks.
void commit_begins() noexcept;  ///< counted in the interrupt registry (temporaries.cc)
void commit_ends() noexcept;
/// Whether an interrupt handler has started (it stops new commits); for tests.
[[nodiscard]] bool interrupt_stopping() noexcept;
class SignalBlock {
 public:
  SignalBlock() noexcept;
  ~SignalBlock();
  SignalBlock(const SignalBlock&) = delete;
  SignalBlock& operator=(const SignalBlock&) = delete;

 private:
  sigset_t previous_{};
};

}  // namespace nest::detail
