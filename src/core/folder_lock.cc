#include "nest/core/folder_lock.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <utility>

#include "core/posix.h"
#include "nest/core/error.h"

namespace nest {

FolderLock::FolderLock(const std::filesystem::path& folder, const std::string& key)
    : file_(folder / kLockFileName) {
  // A few rounds: a releasing holder may remove the name between our open and our lock.
  for (int attempt = 0; attempt < 16; ++attempt) {
    detail::Fd fd(::open(file_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (!fd.valid()) {
      throw Error::input(
          "cannot create the lock file " + file_.string() + ": " + detail::errno_text(errno),
          {.key = key, .value = folder.string()});
    }
    if (!detail::try_lock(fd.get())) {
      char text[32] = {};
      const ssize_t n = ::pread(fd.get(), text, sizeof text - 1, 0);
      std::string pid = n > 0 ? std::string(text, static_cast<std::size_t>(n)) : "";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      const std::string who = pid.empty() ? "another nest process" : "nest process " + pid;
      throw Error::input(
          who + " is writing into this folder",
          {.key = key,
           .value = folder.string(),
           .expected = "a folder no other sweep is using (the lock: " + file_.string() + ")"});
    }
    if (!detail::same_file(file_, fd.get())) continue;  // removed by its last holder meanwhile
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd.get(), 0) == 0) {
      [[maybe_unused]] const ssize_t written = ::pwrite(fd.get(), pid.data(), pid.size(), 0);
    }
    fd_ = fd.release();
    return;
  }
  throw Error::input("cannot take the lock of this folder", {.key = key, .value = folder.string()});
}

FolderLock::FolderLock(FolderLock&& other) noexcept
    : file_(std::move(other.file_)), fd_(std::exchange(other.fd_, -1)) {}

FolderLock::~FolderLock() {
  if (fd_ < 0) return;
  if (detail::same_file(file_, fd_)) ::unlink(file_.c_str());
  ::close(fd_);
}

}  // namespace nest
