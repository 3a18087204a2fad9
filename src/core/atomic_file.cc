#include "nest/core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <string>

#include "core/posix.h"
#include "nest/core/error.h"
#include "nest/core/temporaries.h"

namespace nest {
namespace {

constexpr std::size_t kBuffer = std::size_t{1} << 20;
constexpr int kAttempts = 16;

[[noreturn]] void fail(const std::filesystem::path& target, const std::string& what, int err) {
  throw Error::input(what + ": " + detail::errno_text(err), {.file = target.string()});
}

}  // namespace

struct OutputFile::State {
  std::filesystem::path target;
  std::filesystem::path temporary;
  std::optional<TemporaryRegistration> registration;
  detail::Fd fd;
  std::string buffer;
  std::size_t size = 0;
  bool finished = false;
  bool committed = false;
  bool broken = false;  // a write failed: the temporary is incomplete and is never put in place

  [[noreturn]] void refuse(const std::string& what, int err) {
    broken = true;
    fail(target, what, err);
  }
  void check_usable(const char* what) const {
    if (broken) {
      throw Error::internal(std::string(what) + " after a failed write of " + target.string());
    }
    if (finished) {
      throw Error::internal(std::string(what) + " after the finish of " + target.string());
    }
  }

  void put(const char* p, std::size_t left) {
    while (left > 0) {
      const ssize_t n = ::write(fd.get(), p, left);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) refuse("cannot write the output file", errno);
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  void drain() {
    put(buffer.data(), buffer.size());
    buffer.clear();
  }

  ~State() {
    if (committed) return;
    fd.close();
    if (!temporary.empty()) ::unlink(temporary.c_str());
  }
};

OutputFile::OutputFile(std::filesystem::path target) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.target = std::move(target);
  const std::string name = s.target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    throw Error::input("not a file name", {.file = s.target.string(), .expected = "a file path"});
  }
  std::error_code ec;
  if (std::filesystem::is_directory(s.target, ec)) {
    throw Error::input("the output is a folder",
                       {.file = s.target.string(), .expected = "a file path"});
  }
  const std::filesystem::path folder = s.target.parent_path();
  detail::remove_stale_temporaries(folder, name);
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    std::filesystem::path temporary = s.target;
    temporary += std::string(kTemporaryMarker) + detail::random_hex();
    // Registered before it exists: an interrupt at any instant after open() finds it.
    s.registration.emplace(temporary, TemporaryKind::kFile);
    detail::Fd fd(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666));
    if (!fd.valid()) {
      const int err = errno;
      s.registration.reset();
      if (err == EEXIST) continue;  // a planted or colliding name: draw another
      fail(s.target, "cannot create the output file", err);
    }
    // A stale-temporary sweep of another process may have taken the name between open() and
    // here: then its lock is taken or the name is gone, and this one is dropped.
    if (!detail::try_lock(fd.get()) || !detail::same_file(temporary, fd.get())) {
      s.registration.reset();
      continue;
    }
    s.temporary = std::move(temporary);
    s.fd = std::move(fd);
    s.buffer.reserve(kBuffer);
    return;
  }
  throw Error::input("cannot create a temporary beside the output file",
                     {.file = s.target.string(), .expected = "a folder no other process floods"});
}

OutputFile::OutputFile(OutputFile&&) noexcept = default;
OutputFile& OutputFile::operator=(OutputFile&&) noexcept = default;
OutputFile::~OutputFile() = default;

const std::filesystem::path& OutputFile::target() const noexcept { return state_->target; }
const std::filesystem::path& OutputFile::temporary() const noexcept { return state_->temporary; }
std::size_t OutputFile::size() const noexcept { return state_->size; }

void OutputFile::write(std::string_view bytes) {
  State& s = *state_;
  s.check_usable("write");
  s.size += bytes.size();
  if (s.buffer.size() + bytes.size() <= kBuffer) {
    s.buffer.append(bytes);
    return;
  }
  s.drain();
  if (bytes.size() < kBuffer) {
    s.buffer.append(bytes);
    return;
  }
  s.put(bytes.data(), bytes.size());  // a large block goes out at once, uncopied
}

void OutputFile::finish() {
  State& s = *state_;
  if (s.finished) return;
  s.check_usable("finish");
  s.drain();
  // The data reaches the disk before the name does: a crash after the rename never exposes a
  // file whose blocks were not written. A full disk can also first show here or at close.
  if (::fsync(s.fd.get()) != 0) s.refuse("cannot write the output file", errno);
  if (const int err = s.fd.close(); err != 0) s.refuse("cannot write the output file", err);
  s.finished = true;
}

void OutputFile::commit() {
  State& s = *state_;
  if (s.committed) throw Error::internal("second commit of " + s.target.string());
  finish();
  {
    const detail::SignalBlock block;  // the rename and the registry agree at every instant
    if (::rename(s.temporary.c_str(), s.target.c_str()) != 0) {
      fail(s.target, "cannot put the output file in place", errno);
    }
    s.committed = true;
    s.registration.reset();
  }
  detail::sync_folder(s.target.parent_path());
}

void write_atomically(const std::filesystem::path& path,
                      const std::function<void(OutputFile&)>& write) {
  OutputFile file(path);
  write(file);
  file.commit();
}

void write_text_atomically(const std::filesystem::path& path, std::string_view text) {
  OutputFile file(path);
  file.write(text);
  file.commit();
}

}  // namespace nest
