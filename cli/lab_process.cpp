#include "cli/lab_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include "engine/error.h"

namespace dpv::cli {
namespace {

constexpr size_t kKeptOutput = 64 * 1024;
std::atomic<int> g_signal{0};

void on_signal(int sig) { g_signal.store(sig); }

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_child(int out_fd, pid_t parent, const std::vector<char*>& argv) {
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the lab died before the prctl
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::dup2(out_fd, 1);
  ::dup2(out_fd, 2);
  const int devnull = ::open("/dev/null", O_RDONLY);
  if (devnull >= 0) ::dup2(devnull, 0);
  ::execvp(argv[0], argv.data());
  const char msg[] = "dpv lab: cannot run the command\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(127);
}

}  // namespace

LabProcess::LabProcess(const std::vector<std::string>& argv) {
  check(!argv.empty(), "no command to run");
  std::vector<std::string> args = argv;
  std::vector<char*> cargv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno), ErrorClass::OSError);
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error("cannot start '" + argv[0] + "' (fork): " + std::strerror(errno), ErrorClass::OSError);
  }
  if (pid == 0) exec_child(fds[1], parent, cargv);
  ::setpgid(pid, pid);  // also here: no race with a stop right after the fork
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  pid_ = pid;
  out_fd_ = fds[0];
}

LabProcess::~LabProcess() {
  if (pid_ > 0) stop(std::chrono::milliseconds(500));
  if (out_fd_ >= 0) ::close(out_fd_);
}

void LabProcess::read_output() {
  if (out_fd_ < 0) return;
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n > 0) {
      result_.output.append(buf, static_cast<size_t>(n));
      if (result_.output.size() > kKeptOutput) result_.output.erase(0, result_.output.size() - kKeptOutput);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n == 0) {  // every writer closed it
      ::close(out_fd_);
      out_fd_ = -1;
    }
    return;
  }
}

bool LabProcess::poll() {
  read_output();
  if (pid_ <= 0) return true;
  int status = 0;
  const pid_t done = ::waitpid(pid_, &status, WNOHANG);
  if (done == 0) return false;
  read_output();
  if (done == pid_) {
    result_.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  pid_ = -1;
  return true;
}

void LabProcess::stop(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (!poll()) {
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      result_.exit_code = 128 + SIGKILL;
      pid_ = -1;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // polling a child we signalled
  }
  // A grandchild may still hold the pipe (the group got the signal too): read what is there.
  read_output();
}

void wait_all(std::vector<LabProcess*> processes, std::chrono::steady_clock::time_point deadline,
              bool stop_all_on_failure, bool stop_on_interrupt) {
  for (;;) {
    bool all_done = true, one_failed = false;
    for (LabProcess* p : processes) {
      if (!p->poll()) all_done = false;
      else if (p->result().exit_code != 0) one_failed = true;
    }
    if (all_done) return;
    const bool late = std::chrono::steady_clock::now() >= deadline;
    const bool interrupted = stop_on_interrupt && InterruptGuard::interrupted();
    if (late || interrupted || (stop_all_on_failure && one_failed)) {
      for (LabProcess* p : processes) {
        if (!p->running()) continue;
        p->stop();
        p->mark_stopped(late, interrupted);
      }
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling children, bounded by the deadline
  }
}

ProcessResult run_with_timeout(const std::vector<std::string>& argv, std::chrono::milliseconds timeout) {
  LabProcess p(argv);
  wait_all({&p}, std::chrono::steady_clock::now() + timeout, false, false);  // short commands run to the end
  return p.result();
}

InterruptGuard::InterruptGuard() {
  g_signal.store(0);
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
}

InterruptGuard::~InterruptGuard() {
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
}

bool InterruptGuard::interrupted() { return g_signal.load() != 0; }
int InterruptGuard::signal() { return g_signal.load(); }

}  // namespace dpv::cli
