#include "nest/core/staged_folder.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <optional>

#include "core/posix.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/temporaries.h"

namespace nest {
namespace {

namespace fs = std::filesystem;

constexpr int kAttempts = 16;

bool is_folder_not_link(const fs::path& p) {
  struct stat st = {};
  return ::lstat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

struct StagedFolder::State {
  fs::path target;   // as given (trailing separator dropped)
  fs::path real;     // the folder renamed over: `target`, or what a symlink `target` names
  fs::path parent;   // real's parent
  fs::path staging;  // real's parent / <name>.nest-tmp-<hex>
  std::vector<std::string> names;
  Options options;
  std::optional<TemporaryRegistration> registration;
  detail::Fd lock;  // flock of the staging folder: tells it from a stale one
  bool committed = false;

  [[noreturn]] void fail(const std::string& message, std::string expected = {}) const {
    throw Error::input(
        message, {.key = options.key, .value = target.string(), .expected = std::move(expected)});
  }
  [[noreturn]] void fail_errno(const std::string& what, int err) const {
    fail(what + ": " + detail::errno_text(err));
  }

  bool in_set(std::string_view name) const {
    return std::find(names.begin(), names.end(), name) != names.end();
  }
  bool is_set_temporary(std::string_view name) const {
    return std::any_of(names.begin(), names.end(),
                       [&](const std::string& n) { return detail::is_temporary_of(name, n); });
  }

  // The entries of the target that are neither files of the set nor their temporaries.
  std::vector<std::string> foreign_entries() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(real, ec)) {
      const std::string name = entry.path().filename().string();
      if (!in_set(name) && !is_set_temporary(name)) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  void refuse_sub_folders() const {
    for (const std::string& name : foreign_entries()) {
      if (is_folder_not_link(real / name)) {
        fail("the output folder holds the folder \"" + name + "\", which replacing it would lose",
             "a folder that holds only files, or another folder");
      }
    }
  }

  ~State() {
    if (committed || staging.empty()) return;
    lock.close();
    std::error_code ignored;
    fs::remove_all(staging, ignored);
  }
};

StagedFolder::StagedFolder(fs::path target, std::vector<std::string> names, Options options)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  if (!target.has_filename()) target = target.parent_path();  // "run/" is "run"
  s.target = target;
  s.names = std::move(names);
  s.options = std::move(options);
  const std::string name = target.filename().string();
  if (name.empty() || name == "." || name == "..") {
    s.fail("the output folder needs a name of its own (it is replaced as a whole)",
           "a path such as run/ or results/run-1");
  }
  std::error_code ec;
  s.real = target;
  if (fs::is_symlink(target, ec)) {
    s.real = fs::canonical(target, ec);
    if (ec) s.fail("the output folder is a symlink to nothing");
  }
  s.parent = s.real.parent_path();
  const fs::file_status status = fs::status(s.real, ec);
  if (fs::exists(status)) {
    if (!fs::is_directory(status)) s.fail("the output folder is a file", "a folder or a new name");
    if (!fs::is_empty(s.real, ec)) {
      if (!s.options.replace) {
        s.fail("the output folder is not empty",
               "an empty or new folder, or --force to replace the run's files in it");
      }
      s.refuse_sub_folders();
    }
  } else if (!s.parent.empty()) {
    fs::create_directories(s.parent, ec);
    if (ec) s.fail("cannot create the output folder: " + ec.message());
  }
  const fs::path parent = s.parent.empty() ? fs::path(".") : s.parent;
  detail::remove_stale_temporaries(parent, s.real.filename().string());
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    fs::path staging = s.parent / (s.real.filename().string() + std::string(kTemporaryMarker) +
                                   detail::random_hex());
    s.registration.emplace(staging, TemporaryKind::kFolder);
    if (::mkdir(staging.c_str(), 0777) != 0) {
      const int err = errno;
      s.registration.reset();
      if (err == EEXIST) continue;
      s.fail_errno("cannot create the output folder", err);
    }
    detail::Fd fd(::open(staging.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid() || !detail::try_lock(fd.get()) || !detail::same_file(staging, fd.get())) {
      s.registration.reset();
      continue;  // a stale-folder sweep of another process took it
    }
    s.staging = std::move(staging);
    s.lock = std::move(fd);
    return;
  }
  s.fail("cannot create a staging folder beside the output folder");
}

StagedFolder::~StagedFolder() = default;

const fs::path& StagedFolder::target() const noexcept { return state_->target; }
const fs::path& StagedFolder::staging() const noexcept { return state_->staging; }

fs::path StagedFolder::path(std::string_view name) const {
  if (!state_->in_set(name)) {
    throw Error::internal("\"" + std::string(name) + "\" is not a file of the output set");
  }
  return state_->staging / name;
}

fs::path StagedFolder::final_path(const fs::path& staging_path) const {
  const fs::path relative = staging_path.lexically_relative(state_->staging);
  if (relative.empty() || *relative.begin() == "..") return staging_path;
  return relative == "." ? state_->target : state_->target / relative;
}

Error StagedFolder::final_error(const Error& error) const {
  const std::string from = state_->staging.string();
  const std::string to = state_->target.string();
  auto fix = [&](std::string text) {
    for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
      text.replace(at, from.size(), to);
    }
    return text;
  };
  ErrorContext c = error.context();
  c.file = fix(c.file);
  c.value = fix(c.value);
  c.expected = fix(c.expected);
  return Error(error.kind(), fix(error.message()), std::move(c));
}

void StagedFolder::commit() {
  State& s = *state_;
  if (s.committed) throw Error::internal("second commit of " + s.target.string());
  for (const std::string& name : s.names) {
    struct stat st = {};
    if (::lstat((s.staging / name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
      throw Error::internal("the output set of " + s.target.string() + " lacks " + name);
    }
  }
  if (::fsync(s.lock.get()) != 0) s.fail_errno("cannot write the output folder", errno);

  const detail::SignalBlock block;  // the renames and the registry agree at every instant
  std::error_code ec;
  const bool occupied = fs::exists(s.real, ec) && !fs::is_empty(s.real, ec);
  if (!occupied) {
    // A missing or empty target: one rename (over an empty folder, rename(2) replaces it).
    if (::rename(s.staging.c_str(), s.real.c_str()) != 0) {
      s.fail_errno("cannot put the output folder in place", errno);
    }
    s.committed = true;
    s.registration.reset();
  } else {
    if (!s.options.replace) s.fail("the output folder is not empty", "an empty or new folder");
    s.refuse_sub_folders();
    for (const std::string& name : s.foreign_entries()) {
      if (::linkat(AT_FDCWD, (s.real / name).c_str(), AT_FDCWD, (s.staging / name).c_str(), 0) !=
          0) {
        s.fail_errno("cannot keep \"" + name + "\" of the output folder", errno);
      }
    }
    if (::renameat2(AT_FDCWD, s.staging.c_str(), AT_FDCWD, s.real.c_str(), RENAME_EXCHANGE) == 0) {
      // The staging name now holds the old folder; still registered until it is gone.
      s.committed = true;
      fs::remove_all(s.staging, ec);
      s.registration.reset();
    } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
      const fs::path aside = s.parent / (s.real.filename().string() +
                                         std::string(kTemporaryMarker) + detail::random_hex());
      const TemporaryRegistration old(aside, TemporaryKind::kFolder);
      if (::rename(s.real.c_str(), aside.c_str()) != 0) {
        s.fail_errno("cannot move the old output folder aside", errno);
      }
      if (::rename(s.staging.c_str(), s.real.c_str()) != 0) {
        const int err = errno;
        ::rename(aside.c_str(), s.real.c_str());
        s.fail_errno("cannot put the output folder in place", err);
      }
      s.committed = true;
      s.registration.reset();
      fs::remove_all(aside, ec);
    } else {
      s.fail_errno("cannot put the output folder in place", errno);
    }
  }
  s.lock.close();
  detail::sync_folder(s.parent);
}

}  // namespace nest
