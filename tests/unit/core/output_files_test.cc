// Output files that appear whole or not at all (nest/core/atomic_file.h), output sets
// (staged_folder.h), the interrupt registry (temporaries.h), folder locks (folder_lock.h) and
// the output-versus-input checks (output_paths.h).

#include <fcntl.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/posix.h"
#include "nest/core/atomic_file.h"
#include "nest/core/error.h"
#include "nest/core/folder_lock.h"
#include "nest/core/output_paths.h"
#include "nest/core/staged_folder.h"
#include "nest/core/temporaries.h"

namespace nest {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void put(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class OutputFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("nest_out_" +
            std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()) + "_" +
            std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(OutputFiles, TextIsWrittenWholeAndNoTemporaryRemains) {
  write_text_atomically(dir_ / "a.txt", "hello\n");
  EXPECT_EQ(slurp(dir_ / "a.txt"), "hello\n");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"a.txt"});
}

TEST_F(OutputFiles, TemporaryIsExclusiveLockedAndNamedByThePattern) {
  put(dir_ / "out.h5", "old");
  OutputFile file(dir_ / "out.h5");
  const std::string name = file.temporary().filename().string();
  EXPECT_TRUE(std::regex_match(name, std::regex(R"(out\.h5\.nest-tmp-[0-9a-f]{16})"))) << name;
  EXPECT_EQ(file.temporary().parent_path(), dir_);  // same folder: the rename is atomic
  // Its writer holds the flock: a second open file cannot take it.
  const int fd = ::open(file.temporary().c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::close(fd);
  file.write("new ");
  file.write(std::string(3 << 20, 'x'));     // over the buffer: goes out at once
  EXPECT_EQ(slurp(dir_ / "out.h5"), "old");  // untouched until the commit
  file.commit();
  EXPECT_EQ(file.size(), 4u + (3u << 20));
  EXPECT_EQ(slurp(dir_ / "out.h5").size(), 4u + (3u << 20));
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.h5"});
}

TEST_F(OutputFiles, FailureBeforeCommitKeepsThePreviousFileAndRemovesTheTemporary) {
  put(dir_ / "out.h5", "previous good file");
  EXPECT_EQ(error_of([&] {
              write_atomically(dir_ / "out.h5", [](OutputFile& f) {
                f.write("partial");
                throw Error::input("boom");
              });
            }),
            "boom");
  EXPECT_EQ(slurp(dir_ / "out.h5"), "previous good file");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.h5"});
}

// A file-size limit stands for a full disk here (a test cannot fill the disk): the kernel
// refuses the write in the same way (EFBIG instead of ENOSPC) and the same path handles both.
TEST_F(OutputFiles, FullDiskIsAnInputErrorNamingTheFileAndKeepsThePreviousFile) {
  put(dir_ / "big.json", "previous good file");
  rlimit old = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  ErrorKind kind = ErrorKind::kInternal;
  std::string message;
  try {
    write_text_atomically(dir_ / "big.json", std::string(3 << 20, 'x'));
  } catch (const Error& e) {
    kind = e.kind();
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, previous_handler);
  EXPECT_EQ(kind, ErrorKind::kInput);
  EXPECT_EQ(message,
            (dir_ / "big.json").string() + ": cannot write the output file: File too large");
  EXPECT_EQ(slurp(dir_ / "big.json"), "previous good file");
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"big.json"});
}

// A set of files: all finished (every byte on disk) before any is renamed, so a full disk in
// the second leaves the first's previous version too.
TEST_F(OutputFiles, FinishingEveryFileBeforeTheFirstCommitKeepsTheWholePreviousSet) {
  put(dir_ / "a.h5", "old a");
  put(dir_ / "b.json", "old b");
  rlimit old = {};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old), 0);
  auto* previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 64 * 1024;
  std::string message;
  {
    OutputFile a(dir_ / "a.h5");
    OutputFile b(dir_ / "b.json");
    a.write("new a");
    b.write(std::string(512 * 1024, 'b'));  // buffered: the disk sees it at finish()
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    try {
      a.finish();
      b.finish();
      a.commit();
      b.commit();
    } catch (const Error& e) {
      message = e.what();
    }
    ::setrlimit(RLIMIT_FSIZE, &old);
    std::signal(SIGXFSZ, previous_handler);
    EXPECT_THROW(b.commit(), Error);  // a failed finish is never put in place
  }
  EXPECT_EQ(message, (dir_ / "b.json").string() + ": cannot write the output file: File too large");
  EXPECT_EQ(slurp(dir_ / "a.h5"), "old a");
  EXPECT_EQ(slurp(dir_ / "b.json"), "old b");
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"a.h5", "b.json"}));
}

TEST_F(OutputFiles, MissingFolderIsAnInputErrorNamingTheFile) {
  EXPECT_EQ(error_of([&] { write_text_atomically(dir_ / "none" / "a.csv", "x"); }),
            (dir_ / "none" / "a.csv").string() +
                ": cannot create the output file: No such file or directory");
  EXPECT_EQ(error_of([&] { write_text_atomically(dir_, "x"); }),
            dir_.string() + ": the output is a folder (expected a file path)");
}

TEST_F(OutputFiles, PlantedSymlinksAreNeverFollowed) {
  put(dir_ / "victim", "precious");
  // The old predictable name, and a name in the new pattern (taken for a stale temporary).
  fs::create_symlink(dir_ / "victim", dir_ / ("out.json.tmp." + std::to_string(::getpid())));
  fs::create_symlink(dir_ / "victim", dir_ / "out.json.nest-tmp-0123456789abcdef");
  write_text_atomically(dir_ / "out.json", "{}");
  EXPECT_EQ(slurp(dir_ / "victim"), "precious");
  EXPECT_EQ(slurp(dir_ / "out.json"), "{}");
  EXPECT_FALSE(fs::exists(fs::symlink_status(dir_ / "out.json.nest-tmp-0123456789abcdef")));
}

TEST_F(OutputFiles, StaleTemporariesAreRemovedAndLiveOnesKept) {
  put(dir_ / "run.h5.nest-tmp-00000000000000aa", "left by SIGKILL");
  put(dir_ / "run.h5.nest-tmp-00000000000000bb", "being written");
  put(dir_ / "other.h5.nest-tmp-00000000000000cc", "another target's");
  put(dir_ / "run.h5.nest-tmp-notours", "not the pattern");
  const int live = ::open((dir_ / "run.h5.nest-tmp-00000000000000bb").c_str(), O_RDONLY);
  ASSERT_GE(live, 0);
  ASSERT_EQ(::flock(live, LOCK_EX | LOCK_NB), 0);
  write_text_atomically(dir_ / "run.h5", "x");
  ::close(live);
  EXPECT_EQ(listing(dir_), (std::vector<std::string>{"other.h5.nest-tmp-00000000000000cc", "run.h5",
                                                     "run.h5.nest-tmp-00000000000000bb",
                                                     "run.h5.nest-tmp-notours"}));
}

TEST_F(OutputFiles, RegistrationsComeAndGoWithTheirTemporaries) {
  const int before = active_temporaries();
  {
    OutputFile a(dir_ / "a");
    OutputFile b(dir_ / "b");
    EXPECT_EQ(active_temporaries(), before + 2);
    a.write("a");
    a.commit();
    EXPECT_EQ(active_temporaries(), before + 1);
  }
  EXPECT_EQ(active_temporaries(), before);
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"a"});
}

// SIGTERM and SIGINT for real, in a child: the handler removes the temporary and the staging
// folder, keeps the previous file, and the child ends by the signal.
TEST_F(OutputFiles, InterruptRemovesTemporariesAndEndsByTheSignal) {
  for (int sig : {SIGTERM, SIGINT}) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    put(dir_ / "out.csv", "previous");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      install_interrupt_cleanup();
      OutputFile f(dir_ / "out.csv");
      f.write("half");
      StagedFolder set(dir_ / "run", {"plan.yaml"}, {.key = "--output-dir"});
      write_text_atomically(set.path("plan.yaml"), "kind: plan\n");
      ::raise(sig);
      ::_exit(0);  // not reached
    }
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    EXPECT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), sig);
    EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.csv"});
    EXPECT_EQ(slurp(dir_ / "out.csv"), "previous");
  }
}

// The signal taken by another thread while one is between a rename and its registry update
// (issue 17: the block covered only the calling thread). In a child, writer A blocks the
// signals (a commit), says so through a pipe, then waits 200 ms before it renames its
// temporary into place and drops the registration; writer B blocks the signals (so that the
// main thread takes them), waits until a handler has started, then tries to commit its own
// temporary. The main thread, told A is inside, sends SIGTERM to the process. The handler must
// wait for A (its file is then in place, whole) and B's commit must not start (its temporary
// is removed, its file never appears). Before the fix the handler removed A's temporary at
// once and the rename failed.
TEST_F(OutputFiles, InterruptOnAnotherThreadWaitsForARenameInProgress) {
  put(dir_ / "out.csv", "previous");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    install_interrupt_cleanup();
    const fs::path a_temporary = dir_ / ".out.csv.tmp-a";
    const fs::path b_temporary = dir_ / ".b.csv.tmp-b";
    auto a_registration =
        std::make_unique<TemporaryRegistration>(a_temporary, TemporaryKind::kFile);
    const TemporaryRegistration b_registration(b_temporary, TemporaryKind::kFile);
    put(a_temporary, "whole");
    put(b_temporary, "late");
    std::thread a([&] {
      const detail::SignalBlock block;
      const char byte = 1;
      (void)!::write(ready[1], &byte, 1);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      if (::rename(a_temporary.c_str(), (dir_ / "out.csv").c_str()) != 0) ::_exit(3);
      a_registration.reset();
    });
    std::thread b([&] {
      sigset_t interrupts;
      sigemptyset(&interrupts);
      for (int s : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&interrupts, s);
      pthread_sigmask(SIG_BLOCK, &interrupts, nullptr);
      while (!detail::interrupt_stopping()) std::this_thread::yield();
      const detail::SignalBlock block;  // parks here until the process ends
      ::rename(b_temporary.c_str(), (dir_ / "b.csv").c_str());
      ::_exit(5);
    });
    char byte = 0;
    if (::read(ready[0], &byte, 1) != 1) ::_exit(4);
    ::kill(::getpid(), SIGTERM);
    a.join();
    b.join();
    ::_exit(0);  // not reached: the handler ends the process by the signal
  }
  ::close(ready[1]);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ::close(ready[0]);
  ASSERT_TRUE(WIFSIGNALED(status)) << "exit status " << WEXITSTATUS(status);
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"out.csv"});
  EXPECT_EQ(slurp(dir_ / "out.csv"), "whole");
}

TEST_F(OutputFiles, StagedFolderAppearsWholeOnCommit) {
  const fs::path target = dir_ / "sub" / "run";
  StagedFolder set(target, {"plan.yaml", "run.h5"}, {.key = "--output-dir"});
  write_text_atomically(set.path("plan.yaml"), "plan");
  EXPECT_FALSE(fs::exists(target));
  EXPECT_EQ(set.final_path(set.path("plan.yaml")), target / "plan.yaml");
  EXPECT_EQ(set.final_path(dir_ / "x"), dir_ / "x");
  EXPECT_THROW(set.commit(), Error);  // run.h5 is missing: an incomplete set is never placed
  EXPECT_FALSE(fs::exists(target));
  write_text_atomically(set.path("run.h5"), "h5");
  set.commit();
  EXPECT_EQ(listing(target), (std::vector<std::string>{"plan.yaml", "run.h5"}));
  EXPECT_EQ(listing(dir_ / "sub"), std::vector<std::string>{"run"});
}

TEST_F(OutputFiles, StagedFolderDroppedLeavesNothing) {
  {
    StagedFolder set(dir_ / "run", {"plan.yaml"}, {.key = "--output-dir"});
    write_text_atomically(set.path("plan.yaml"), "plan");
  }
  EXPECT_TRUE(fs::is_empty(dir_));
  // An existing, empty target stays as it was.
  fs::create_directories(dir_ / "empty");
  { StagedFolder set(dir_ / "empty/", {"plan.yaml"}, {.key = "--output-dir"}); }
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"empty"});
}

TEST_F(OutputFiles, StagedFolderRefusesAFolderThatHoldsFilesUnlessReplacing) {
  fs::create_directories(dir_ / "run");
  put(dir_ / "run" / "plan.yaml", "old plan");
  put(dir_ / "run" / "run.h5", "old run");
  put(dir_ / "run" / "timeline.png", "a plot");
  const std::string target = (dir_ / "run").string();
  EXPECT_EQ(error_of([&] { StagedFolder s(dir_ / "run", {"plan.yaml"}, {.key = "--output-dir"}); }),
            "--output-dir: the output folder is not empty (got \"" + target +
                "\"; expected an empty or new folder, or --force to replace the run's files in "
                "it)");
  StagedFolder set(dir_ / "run", {"plan.yaml", "run.h5"}, {.replace = true, .key = "--output-dir"});
  write_text_atomically(set.path("plan.yaml"), "new plan");
  write_text_atomically(set.path("run.h5"), "new run");
  EXPECT_EQ(slurp(dir_ / "run" / "plan.yaml"), "old plan");
  set.commit();
  EXPECT_EQ(slurp(dir_ / "run" / "plan.yaml"), "new plan");
  EXPECT_EQ(slurp(dir_ / "run" / "run.h5"), "new run");
  EXPECT_EQ(slurp(dir_ / "run" / "timeline.png"), "a plot");  // carried over
  EXPECT_EQ(listing(dir_), std::vector<std::string>{"run"});
  fs::create_directories(dir_ / "run" / "plots");
  EXPECT_EQ(error_of([&] {
              StagedFolder s(dir_ / "run", {"plan.yaml"}, {.replace = true, .key = "--output-dir"});
            }),
            "--output-dir: the output folder holds the folder \"plots\", which replacing it would "
            "lose (got \"" +
                target + "\"; expected a folder that holds only files, or another folder)");
  put(dir_ / "file", "x");
  EXPECT_EQ(error_of([&] { StagedFolder s(dir_ / "file", {"a"}, {.key = "--output-dir"}); }),
            "--output-dir: the output folder is a file (got \"" + (dir_ / "file").string() +
                "\"; expected a folder or a new name)");
}

TEST_F(OutputFiles, StagedFolderRemovesStaleStagingFolders) {
  fs::create_directories(dir_ / "run.nest-tmp-00000000000000aa");
  put(dir_ / "run.nest-tmp-00000000000000aa" / "plan.yaml", "left by SIGKILL");
  StagedFolder set(dir_ / "run", {"plan.yaml"}, {.key = "--output-dir"});
  EXPECT_EQ(listing(dir_), std::vector<std::string>{set.staging().filename().string()});
}

TEST_F(OutputFiles, StagedFolderThroughASymlinkReplacesTheFolderItNames) {
  fs::create_directories(dir_ / "real");
  fs::create_directory_symlink(dir_ / "real", dir_ / "link");
  StagedFolder set(dir_ / "link", {"a"}, {.key = "--output-dir"});
  write_text_atomically(set.path("a"), "1");
  set.commit();
  EXPECT_TRUE(fs::is_symlink(dir_ / "link"));
  EXPECT_EQ(slurp(dir_ / "real" / "a"), "1");
}

TEST_F(OutputFiles, FolderLockRefusesASecondHolderAndSurvivesNoCrash) {
  const std::string folder = dir_.string();
  {
    const FolderLock lock(dir_, "--output");
    EXPECT_EQ(slurp(dir_ / kLockFileName), std::to_string(::getpid()) + "\n");
    EXPECT_EQ(error_of([&] { const FolderLock again(dir_, "--output"); }),
              "--output: nest process " + std::to_string(::getpid()) +
                  " is writing into this folder (got \"" + folder +
                  "\"; expected a folder no other sweep is using (the lock: " + folder +
                  "/.nest-lock))");
  }
  EXPECT_TRUE(fs::is_empty(dir_));  // released: the lock file is gone
  // A lock file left by a killed process holds no flock: it is taken over.
  put(dir_ / kLockFileName, "99999999\n");
  {
    const FolderLock lock(dir_, "--output");
    EXPECT_EQ(slurp(dir_ / kLockFileName), std::to_string(::getpid()) + "\n");
  }
  // A holder in another process, killed by SIGKILL: its lock goes with it.
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const FolderLock lock(dir_, "--output");
    [[maybe_unused]] const ssize_t n = ::write(ready[1], "1", 1);
    ::pause();
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(error_of([&] { const FolderLock held(dir_, "--output"); }), "(no error)");
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  ::close(ready[0]);
  ::close(ready[1]);
  EXPECT_TRUE(fs::exists(dir_ / kLockFileName));  // the file stays, the lock does not
  EXPECT_EQ(error_of([&] { const FolderLock after(dir_, "--output"); }), "(no error)");
}

TEST_F(OutputFiles, OutputsThatAreInputsOrEachOtherAreRefused) {
  put(dir_ / "plan.yaml", "plan");
  fs::create_hard_link(dir_ / "plan.yaml", dir_ / "hard.yaml");
  const std::vector<NamedPath> inputs = {{"--plan", dir_ / "plan.yaml"}};
  const std::vector<NamedPath> same_input = {{"--output", dir_ / "." / "hard.yaml"}};
  EXPECT_EQ(error_of([&] { check_outputs(same_input, inputs); }),
            "--output: the output would replace the input --plan (got \"" +
                (dir_ / "." / "hard.yaml").string() + "\"; expected a file that is not an input)");
  const std::vector<NamedPath> twice = {
      {"--output", dir_ / "x"}, {"--trace", ""}, {"--csv", dir_ / "sub" / ".." / "x"}};
  EXPECT_EQ(error_of([&] { check_outputs(twice, inputs); }),
            "--csv: the same file as --output (got \"" + (dir_ / "sub" / ".." / "x").string() +
                "\"; expected a file of its own for each output)");
  const std::vector<NamedPath> fine = {{"--output", dir_ / "x.h5"}, {"--trace", dir_ / "x.json"}};
  EXPECT_EQ(error_of([&] { check_outputs(fine, inputs); }), "(no error)");
}

}  // namespace
}  // namespace nest
