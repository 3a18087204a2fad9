#pragma once
/// \file
/// One writer per output folder (a sweep's folder): an exclusive `flock` on
/// `<folder>/.nest-lock`, held for as long as the `FolderLock` lives. The kernel drops a flock
/// when its process ends, however it ends (SIGKILL and crashes included), so a lock can never
/// outlive its holder: a `.nest-lock` file left by a killed process is stale exactly when its
/// flock is free, and the next `FolderLock` takes it over. The file holds the holder's pid (for
/// the message of the process that is refused) and is removed when the lock is released.
/// Network file systems: Linux maps flock onto NFS byte-range locks (since 2.6.12), so the lock
/// holds across NFS clients too.

#include <filesystem>
#include <string>

namespace nest {

/// The name of the lock file in a locked folder.
inline constexpr const char* kLockFileName = ".nest-lock";

/// An exclusive lock on a folder. Movable, not copyable.
class FolderLock {
 public:
  /// Locks `folder` (which must exist). Throws `Error` (input) naming `key` and the folder when
  /// another process holds the lock ("another nest process (pid N) is writing into this
  /// folder"), or when the lock file cannot be created.
  FolderLock(const std::filesystem::path& folder, const std::string& key);
  FolderLock(FolderLock&& other) noexcept;
  FolderLock& operator=(FolderLock&&) = delete;
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  /// Removes the lock file (while still holding it, so that no other process locks a name that
  /// is about to vanish) and releases the lock.
  ~FolderLock();

 private:
  std::filesystem::path file_;
  int fd_ = -1;
};

}  // namespace nest
