#pragma once
/// \file
/// Output files appear whole or not at all. Every writer writes to a temporary in the target's
/// folder and renames it over the target when complete; the previous file under the target name
/// stays intact until then, whatever fails (a full disk, a file-size limit, an exception, an
/// interrupt).
///
/// The temporary of `<folder>/<name>` is `<folder>/<name>.nest-tmp-<16 hex digits>`:
/// - created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`) under a name drawn from the kernel's
///   random source, so it is never opened through a planted symlink or a guessed name;
/// - held under an exclusive `flock` for as long as it exists, which is how a stale one is told
///   from a live one: the kernel drops the lock when its process ends, however it ends;
/// - written, `fsync`ed, closed (every error checked) and only then renamed; the folder is
///   `fsync`ed after the rename;
/// - removed on every error path, and by the interrupt handler (nest/core/temporaries.h) on
///   SIGINT, SIGTERM and SIGHUP;
/// - when SIGKILL (or a crash) leaves one behind, the next writer of the same target removes it
///   (it finds its lock free) before creating its own.
///
/// Errors of the file system (no space, a file-size limit, no permission, a read-only file
/// system) are input errors naming the target file and the cause ("No space left on device").

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace nest {

/// What marks NEST's temporaries: `<name>` + this + 16 hex digits.
inline constexpr std::string_view kTemporaryMarker = ".nest-tmp-";

/// An output file being written. Construction creates the temporary (after removing stale ones
/// of the same target); `write` appends; `commit` puts the file in place. Dropped without
/// `commit`, it removes the temporary and leaves the target as it was. Not thread-safe; movable.
class OutputFile {
 public:
  /// Starts writing `target`. Throws `Error` (input) naming `target` when its folder does not
  /// exist or is not writable, or when `target` is a folder.
  explicit OutputFile(std::filesystem::path target);
  OutputFile(OutputFile&&) noexcept;
  OutputFile& operator=(OutputFile&&) noexcept;
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;
  ~OutputFile();

  /// The file this becomes.
  [[nodiscard]] const std::filesystem::path& target() const noexcept;
  /// The temporary written until `commit`.
  [[nodiscard]] const std::filesystem::path& temporary() const noexcept;
  /// Bytes written so far.
  [[nodiscard]] std::size_t size() const noexcept;

  /// Appends `bytes` (buffered, 1 MiB). Throws `Error` (input) naming the target and the cause
  /// when the file system refuses them.
  void write(std::string_view bytes);
  /// Writes what is buffered, fsyncs and closes the temporary: after it, the file is complete
  /// on disk and only its rename is left, so that a set of files can all be finished before
  /// any is put in place. Throws `Error` (input) naming the target when the file system
  /// refuses (a full disk shows here at the latest). Idempotent; no `write` after it.
  void finish();
  /// `finish()`, then renames the temporary over the target and fsyncs the folder. Throws
  /// `Error` (input) naming the target on any failure, after which the temporary is gone and
  /// the target unchanged. Call once.
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

/// Calls `write(file)` on a new `OutputFile` of `path`, then commits it. If `write` throws, the
/// temporary is removed and the exception propagates; `path` is never half-written.
void write_atomically(const std::filesystem::path& path,
                      const std::function<void(OutputFile&)>& write);

/// Writes `text` to `path` atomically.
void write_text_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace nest
