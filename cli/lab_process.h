#pragma once
// The child processes of `dpv lab network`: the `ip` and `tc` commands that build the namespaces,
// and the two `dpv launch` nodes of each point. Every one runs in a process group of its own with a
// deadline, is stopped (SIGTERM, then SIGKILL) when the deadline passes or the lab is interrupted,
// and dies with the lab (PR_SET_PDEATHSIG), so none outlives it.
#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace dpv::cli {

struct ProcessResult {
  int exit_code = -1;      // the exit status; 128 + the signal when killed by one
  bool timed_out = false;  // stopped at its deadline
  bool interrupted = false;  // stopped because the lab got SIGINT or SIGTERM
  bool stopped_by_lab = false;  // the lab stopped it (deadline, interrupt, or another process failed)
  std::string output;      // stdout and stderr together (the last 64 KiB)
};

// A started child; stop() or the destructor ends it (and its process group) if it still runs.
class LabProcess {
 public:
  // `argv[0]` is looked up in PATH. Throws dpv::Error when it cannot be started.
  explicit LabProcess(const std::vector<std::string>& argv);
  ~LabProcess();
  LabProcess(const LabProcess&) = delete;
  LabProcess& operator=(const LabProcess&) = delete;

  // Reads its output and reaps it; true once it exited (then result() is final).
  bool poll();
  // SIGTERM to its process group, SIGKILL after `grace`; reaps it.
  void stop(std::chrono::milliseconds grace = std::chrono::milliseconds(2000));
  const ProcessResult& result() const { return result_; }
  // Why the lab stopped it (wait_all's deadline, or an interrupt).
  void mark_stopped(bool timed_out, bool interrupted) {
    result_.timed_out = timed_out;
    result_.interrupted = interrupted;
    result_.stopped_by_lab = true;
  }
  bool running() const { return pid_ > 0; }

 private:
  void read_output();
  pid_t pid_ = -1;
  int out_fd_ = -1;
  ProcessResult result_;
};

// Runs `argv` to the end or to `timeout`; never throws for a failing command (see the result).
ProcessResult run_with_timeout(const std::vector<std::string>& argv, std::chrono::milliseconds timeout);

// Waits for every process to exit, at most until `deadline`; stops the rest at the deadline (marked
// timed out) or when the lab was interrupted (marked interrupted). `stop_all_on_failure`: the first
// one to exit with a status other than 0 stops the others (a failed node leaves the other waiting).
// `stop_on_interrupt`: Ctrl-C stops them (the job); the clean-up's own short commands (`ip netns del`
// after a Ctrl-C) must run to the end, bounded by their deadline alone.
void wait_all(std::vector<LabProcess*> processes, std::chrono::steady_clock::time_point deadline,
              bool stop_all_on_failure, bool stop_on_interrupt = true);

// SIGINT and SIGTERM set a flag instead of killing the lab, so it can stop its children and remove
// its namespaces first. While an InterruptGuard lives the handlers are installed.
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  static bool interrupted();
  static int signal();  // the signal that came (0: none)
};

}  // namespace dpv::cli
