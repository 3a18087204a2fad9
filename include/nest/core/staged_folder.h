#pragma once
/// \file
/// A set of output files that appears all at once (`nest run`'s plan.yaml, run.h5, trace.json
/// and summary.csv): the files are written into a staging folder beside the target,
/// `<parent>/<name>.nest-tmp-<16 hex digits>`, and the staging folder takes the target's place
/// in one rename when every file is complete. Until then the target is untouched; a failure, an
/// exception or an interrupt (nest/core/temporaries.h) removes the staging folder, and one left
/// by SIGKILL is removed by the next `StagedFolder` of the same target (its flock is free, as
/// for output files: nest/core/atomic_file.h).
///
/// Replacing (`replace`, the CLI's `--force`): when the target holds files, the new set takes
/// its place by an atomic exchange of the two folders (`renameat2(RENAME_EXCHANGE)`); the
/// files of the target that are not in the set (plots drawn from an earlier run, notes) are
/// carried into the new folder as hard links first, so nothing but the set's own files is
/// replaced. A target holding a sub-folder is refused, because a folder cannot be carried over
/// by a link. Where the file system cannot exchange, the old folder is renamed aside and the
/// new one into place, with the interrupting signals blocked in between (a SIGKILL in those two
/// system calls leaves no folder under the target name, the new set in a temporary).

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace nest {

class Error;

/// An output set being written into a staging folder. Not thread-safe; not copyable.
class StagedFolder {
 public:
  struct Options {
    bool replace = false;  ///< a target that holds files may be replaced (else refused)
    std::string key;       ///< the option that named the folder, for errors ("--output-dir")
  };

  /// Starts a set of `names` (plain file names) for the folder `target`: checks the target
  /// (missing, empty, or holding only files when `replace`), creates its parent folders,
  /// removes stale staging folders and creates the staging folder. Throws `Error` (input),
  /// naming `options.key` and the target, when the target is a file, holds files and
  /// `replace` is off, holds a sub-folder, or cannot be created.
  StagedFolder(std::filesystem::path target, std::vector<std::string> names, Options options);
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;
  /// Removes the staging folder unless committed.
  ~StagedFolder();

  /// The target folder as given.
  [[nodiscard]] const std::filesystem::path& target() const noexcept;
  /// The staging folder (where the files are until `commit`).
  [[nodiscard]] const std::filesystem::path& staging() const noexcept;
  /// Where to write `name` until `commit`. Throws `Error` (internal) for a name not in the set.
  [[nodiscard]] std::filesystem::path path(std::string_view name) const;
  /// `staging-path` with the staging folder replaced by the target (for messages and records
  /// that must name the final place); other paths are returned unchanged.
  [[nodiscard]] std::filesystem::path final_path(const std::filesystem::path& staging_path) const;

  /// `error` with every mention of the staging folder (its file, value and message) replaced by
  /// the target, so that a failure names the file the user asked for.
  [[nodiscard]] Error final_error(const Error& error) const;

  /// Puts the set in place: checks that every file of the set exists, fsyncs the staging
  /// folder, carries the target's other files over (when replacing), renames or exchanges,
  /// fsyncs the parent and removes the old folder. Throws `Error` (input) when the file system
  /// refuses, after which the target is as it was; `Error` (internal) when a file is missing.
  void commit();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace nest
