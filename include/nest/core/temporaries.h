#pragma once
/// \file
/// Temporaries removed when the process is interrupted. While a `TemporaryRegistration` lives,
/// its path (an output file's temporary, or a staging folder of an output set) is in a registry
/// that the handler installed by `install_interrupt_cleanup()` empties on SIGINT, SIGTERM or
/// SIGHUP: it removes every registered path, then ends the process by the same signal, so that
/// the shell sees the usual status (130 for SIGINT, 143 for SIGTERM).
///
/// This registry is the one process-wide mutable state of libnest, and why: a signal is
/// delivered to the process, not to an object, and its handler can reach only what lives at a
/// fixed address. Designs without it were weighed: unnamed files (`O_TMPFILE`) vanish by
/// themselves but cannot stand for a staging folder, need a second code path where the file
/// system lacks them, and still need a name in the instant before the rename; a flag polled by
/// the work would have to reach every long loop of the placer and the simulator. So the state
/// is kept to this: a fixed array of slots (no allocation), written by registrations with
/// lock-free atomics and read by the handler with only async-signal-safe calls (`unlink`,
/// `open`, `getdents64`, `unlinkat`, `rmdir`, `sigaction`, `raise`). Nothing else reads it.
///
/// Limits: 64 registrations at once and absolute paths below 4,096 bytes; beyond them a
/// registration is silently inactive and the temporary, if an interrupt leaves it, is removed by
/// the next writer of the same target (nest/core/atomic_file.h). SIGKILL cannot be caught: what
/// it leaves is removed the same way.

#include <cstdint>
#include <filesystem>

namespace nest {

/// What the handler does with a registered path.
enum class TemporaryKind : std::uint8_t {
  kFile,    ///< unlink it
  kFolder,  ///< unlink the entries of the folder (one level), then remove it
};

/// A path that the interrupt handler removes while this object lives. Register a temporary
/// *before* creating it, so that no instant exists in which it is on disk and unknown.
/// Thread-safe; neither copyable nor movable.
class TemporaryRegistration {
 public:
  TemporaryRegistration(const std::filesystem::path& path, TemporaryKind kind) noexcept;
  ~TemporaryRegistration();
  TemporaryRegistration(const TemporaryRegistration&) = delete;
  TemporaryRegistration& operator=(const TemporaryRegistration&) = delete;

  /// Whether the handler will see this path (false when the registry is full or the path long).
  [[nodiscard]] bool active() const noexcept { return slot_ >= 0; }

 private:
  int slot_ = -1;
};

/// Installs the interrupt handler for SIGINT, SIGTERM and SIGHUP (a signal whose disposition is
/// "ignore", as under `nohup`, stays ignored), and ignores SIGXFSZ, so that a file-size limit
/// (`ulimit -f`) makes the write fail with an error naming the file instead of killing the
/// process. Called once by `main`; a library user who wants the cleanup calls it too.
void install_interrupt_cleanup();

/// The number of active registrations (for tests).
[[nodiscard]] int active_temporaries() noexcept;

}  // namespace nest
