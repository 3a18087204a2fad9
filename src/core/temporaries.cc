#include "nest/core/temporaries.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstring>
#include <ctime>
#include <string>

#include "core/posix.h"

namespace nest {
namespace {

constexpr int kSlots = 64;
constexpr std::size_t kMaxPath = 4096;

enum State : std::uint32_t { kFree = 0, kClaimed = 1, kArmed = 2 };

struct Slot {
  std::atomic<std::uint32_t> state{kFree};
  // Bumped on every claim: the handler keeps a path only if no claim happened while it copied.
  std::atomic<std::uint32_t> generation{0};
  TemporaryKind kind = TemporaryKind::kFile;
  char path[kMaxPath] = {};
};
static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "the interrupt handler may only use lock-free atomics");

// The one process-wide mutable state of libnest: see the file comment of
// nest/core/temporaries.h for why it exists and what may touch it.
std::array<Slot, kSlots> g_slots;  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
// Threads inside a `detail::SignalBlock` (a rename and its registry update), and whether a
// handler has started: the handler raises `g_stopping`, then waits for the commits in progress
// to end; a commit that begins after it parks instead (its thread blocks the signals, so the
// handler's raise ends the process under it). Part of the same registry; sequentially
// consistent on both sides, since each side stores one flag and then reads the other.
std::atomic<int> g_commits{0};   // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
std::atomic<int> g_stopping{0};  // NOLINT(cppcoreguidelines-avoid-non-const-global-variables)
static_assert(std::atomic<int>::is_always_lock_free,
              "the interrupt handler may only use lock-free atomics");

constexpr std::array<int, 3> kInterrupts = {SIGINT, SIGTERM, SIGHUP};

// Removes the entries of a folder, one level, then the folder. Async-signal-safe.
void remove_folder(const char* path) noexcept {
  const int fd = ::open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    alignas(8) char buffer[4096];
    while (true) {
      const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
      if (n <= 0) break;
      for (long offset = 0; offset < n;) {
        // struct linux_dirent64: ino (8), off (8), reclen (2), type (1), name.
        unsigned short reclen = 0;
        std::memcpy(&reclen, buffer + offset + 16, sizeof reclen);
        const unsigned char type = static_cast<unsigned char>(buffer[offset + 18]);
        const char* name = buffer + offset + 19;
        const bool dot = name[0] == '.' && (name[1] == 0 || (name[1] == '.' && name[2] == 0));
        if (!dot) ::unlinkat(fd, name, type == DT_DIR ? AT_REMOVEDIR : 0);
        offset += reclen;
      }
    }
    ::close(fd);
  }
  ::rmdir(path);
}

void remove_registered() noexcept {
  char path[kMaxPath];
  for (Slot& slot : g_slots) {
    const std::uint32_t generation = slot.generation.load(std::memory_order_acquire);
    if (slot.state.load(std::memory_order_acquire) != kArmed) continue;
    std::memcpy(path, slot.path, kMaxPath);
    const TemporaryKind kind = slot.kind;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.state.load(std::memory_order_relaxed) != kArmed ||
        slot.generation.load(std::memory_order_relaxed) != generation) {
      continue;  // released or reused while we copied: not a consistent path
    }
    path[kMaxPath - 1] = 0;
    if (kind == TemporaryKind::kFolder) {
      remove_folder(path);
    } else {
      ::unlink(path);
    }
  }
}

// Stops new commits and waits (async-signal-safely, with nanosleep) until none is in progress:
// a thread inside one cannot take this signal, so the wait only ever covers another thread's
// few system calls. No time limit: giving up would let the removal split a rename from its
// bookkeeping (a staging folder's entries unlinked after it was swapped into place).
void wait_for_commits() noexcept {
  g_stopping.store(1);
  timespec pause{0, 100'000};  // 0.1 ms
  while (g_commits.load() > 0) ::nanosleep(&pause, nullptr);
}

extern "C" void on_interrupt(int signal_number) {
  wait_for_commits();
  remove_registered();
  // End the process by the same signal, with its default action: the status the shell sees
  // (128 + n) says what happened. The signal is blocked inside its handler, so the raised one
  // is delivered when the handler returns.
  struct sigaction default_action = {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ::sigaction(signal_number, &default_action, nullptr);
  ::raise(signal_number);
}

}  // namespace

namespace detail {
void commit_begins() noexcept {
  g_commits.fetch_add(1);
  if (g_stopping.load() != 0) {
    // A handler is removing the temporaries: this commit must not start. The signals are
    // blocked in this thread, so it waits here until the handler ends the process.
    g_commits.fetch_sub(1);
    while (true) ::pause();
  }
}
void commit_ends() noexcept { g_commits.fetch_sub(1); }
bool interrupt_stopping() noexcept { return g_stopping.load() != 0; }
}  // namespace detail

TemporaryRegistration::TemporaryRegistration(const std::filesystem::path& path,
                                             TemporaryKind kind) noexcept {
  std::string absolute;
  try {
    absolute = std::filesystem::absolute(path).string();
  } catch (...) {
    return;
  }
  if (absolute.size() >= kMaxPath) return;
  for (int i = 0; i < kSlots; ++i) {
    Slot& slot = g_slots[static_cast<std::size_t>(i)];
    std::uint32_t expected = kFree;
    if (!slot.state.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) {
      continue;
    }
    slot.generation.fetch_add(1, std::memory_order_acq_rel);
    std::memcpy(slot.path, absolute.c_str(), absolute.size() + 1);
    slot.kind = kind;
    slot.state.store(kArmed, std::memory_order_release);
    slot_ = i;
    return;
  }
}

TemporaryRegistration::~TemporaryRegistration() {
  if (slot_ >= 0) g_slots[static_cast<std::size_t>(slot_)].state.store(kFree);
}

void install_interrupt_cleanup() {
  struct sigaction action = {};
  action.sa_handler = on_interrupt;
  sigemptyset(&action.sa_mask);
  for (int s : kInterrupts) sigaddset(&action.sa_mask, s);  // one cleanup at a time
  for (int s : kInterrupts) {
    struct sigaction previous = {};
    ::sigaction(s, nullptr, &previous);
    if (previous.sa_handler == SIG_IGN) continue;  // nohup, or a background job: keep ignoring
    ::sigaction(s, &action, nullptr);
  }
  std::signal(SIGXFSZ, SIG_IGN);
}

int active_temporaries() noexcept {
  int n = 0;
  for (const Slot& slot : g_slots) n += slot.state.load() == kArmed ? 1 : 0;
  return n;
}

}  // namespace nest
