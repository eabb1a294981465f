// Atomic writes: symbolic links written through (as torch.save does), file errors in Python's
// kinds, and no temporary file left behind when a signal ends the process mid-write.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "engine/error.h"
#include "tests/support/errors.h"
#include "engine/io/atomic_file.h"
#include "engine/io/input_file.h"
#include "engine/io/temp_file_cleanup.h"

namespace dpv {
namespace {
namespace fs = std::filesystem;
using testing::error_thrown_by;

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("dpv-atomic-test-" + std::to_string(rd()) + std::to_string(rd()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  int temp_files() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir_)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
    return n;
  }
  fs::path dir_;
};


TEST_F(AtomicWrite, WritesThroughSymbolicLinksAsTorchSaveDoes) {
  write_file_atomic(path("target.bin"), "old");
  fs::create_symlink("target.bin", path("link.bin"));  // relative, as `ln -s` usually makes them
  fs::create_symlink(path("link.bin"), path("link2.bin"));  // a chain, absolute
  write_file_atomic(path("link2.bin"), "new");
  EXPECT_TRUE(fs::is_symlink(path("link.bin")));
  EXPECT_TRUE(fs::is_symlink(path("link2.bin")));
  EXPECT_EQ(slurp(path("target.bin")), "new");
  EXPECT_EQ(write_target(path("link2.bin")), path("target.bin"));
  // A dangling link: open(path, "wb") creates the file it points to.
  fs::create_symlink("later.bin", path("dangling.bin"));
  write_file_atomic(path("dangling.bin"), "made");
  EXPECT_TRUE(fs::is_symlink(path("dangling.bin")));
  EXPECT_EQ(slurp(path("later.bin")), "made");
  EXPECT_EQ(temp_files(), 0);
}

TEST_F(AtomicWrite, ALoopOfLinksIsAnError) {
  fs::create_symlink("b", path("a"));
  fs::create_symlink("a", path("b"));
  const Error e = error_thrown_by([&] { write_file_atomic(path("a"), "x"); });
  EXPECT_EQ(e.kind(), "OSError");
  EXPECT_NE(std::string(e.what()).find("Too many levels of symbolic links"), std::string::npos) << e.what();
}

TEST_F(AtomicWrite, FileErrorsUsePythonsKinds) {
  Error e = error_thrown_by([&] { (void)read_file(path("missing.json"), kModelSpecInput); });
  EXPECT_EQ(e.kind(), "FileNotFoundError");
  EXPECT_EQ(std::string(e.what()), "[Errno 2] No such file or directory: '" + path("missing.json") + "'");
  e = error_thrown_by([&] { (void)read_file(dir_.string(), kModelSpecInput); });
  EXPECT_EQ(e.kind(), "IsADirectoryError");
  EXPECT_EQ(std::string(e.what()), "[Errno 21] Is a directory: '" + dir_.string() + "'");
  e = error_thrown_by([&] { write_file_atomic(path("no_such_folder/out.bin"), "x"); });
  EXPECT_EQ(e.kind(), "FileNotFoundError");
  EXPECT_NE(std::string(e.what()).find("no_such_folder/out.bin"), std::string::npos) << e.what();
  e = error_thrown_by([&] { write_file_atomic(dir_.string(), "x"); });
  EXPECT_EQ(e.kind(), "IsADirectoryError");
  write_file_atomic(path("file"), "x");
  e = error_thrown_by([&] { write_file_atomic(path("file/inner"), "x"); });
  EXPECT_EQ(e.kind(), "NotADirectoryError");
  if (::geteuid() != 0) {  // root reads and writes regardless of permissions
    fs::create_directories(path("locked"));
    fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
    e = error_thrown_by([&] { write_file_atomic(path("locked/out.bin"), "x"); });
    EXPECT_EQ(e.kind(), "PermissionError");
    fs::permissions(path("locked"), fs::perms::owner_all);
  }
  EXPECT_EQ(temp_files(), 0);
}

// In a child process: registers `file`, optionally forgets it, then raises SIGTERM.
int child_raising_sigterm(const std::string& file, bool forget) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int slot = remember_temp_file(file);
    if (forget) forget_temp_file(slot);
    ::raise(SIGTERM);
    ::_exit(3);  // not reached: the default action of SIGTERM ends the process
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST_F(AtomicWrite, ASignalRemovesRememberedTemporaryFilesThenEndsTheProcessAsBefore) {
  std::ofstream(path("remembered.tmp")) << "partial";
  int status = child_raising_sigterm(path("remembered.tmp"), false);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGTERM);
  EXPECT_FALSE(fs::exists(path("remembered.tmp")));

  std::ofstream(path("forgotten.tmp")) << "renamed into place already";
  status = child_raising_sigterm(path("forgotten.tmp"), true);
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_TRUE(fs::exists(path("forgotten.tmp")));
}

TEST_F(AtomicWrite, SigintDuringALargeWriteLeavesNoTemporaryFile) {
  const std::string out = path("big.bin");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string bytes(size_t{256} << 20, 'x');  // 256 MiB: the write and fsync take a while
    try {
      write_file_atomic(out, bytes);
    } catch (...) {
      ::_exit(4);
    }
    ::_exit(0);
  }
  // Wait for the temporary file to appear, then interrupt.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (temp_files() == 0 && std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) GTEST_SKIP() << "the write finished before it could be interrupted";
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) GTEST_SKIP() << "the write finished before the signal arrived";
  ASSERT_TRUE(WIFSIGNALED(status)) << status;
  EXPECT_EQ(WTERMSIG(status), SIGINT);
  EXPECT_EQ(temp_files(), 0);
  EXPECT_FALSE(fs::exists(out));
}

}  // namespace
}  // namespace dpv
