#pragma once
// One worker process of `dpv launch`: started as a child of this same dpv binary with torchrun's
// variables, its stderr forwarded line by line with a "[rank r] " prefix. A worker dies with its
// launcher (PR_SET_PDEATHSIG), so a launcher killed by SIGKILL, or by a closed terminal, leaves no
// worker holding the store port.
#include <sys/types.h>

#include <string>
#include <vector>

#include "cli/launcher.h"

namespace dpv::cli {

struct Worker {
  int rank = 0, local_rank = 0;
  int attempt = 0;          // TORCHELASTIC_RESTART_COUNT it was started with
  pid_t pid = -1;
  int err_fd = -1;          // read end of its stderr pipe; -1 once closed
  std::string partial;      // stderr bytes after the last newline
  std::string last_error;   // its last "dpv: error: ..." line (or last line)
  bool running = true;
  bool stopped = false;     // stopped by a signal (SIGSTOP, SIGTSTP): seen through waitpid(WUNTRACED)
  int stop_signal = 0;      // the signal that stopped it, while `stopped`
  bool signaled_by_launcher = false;  // the launcher sent it a signal (a forwarded stop, or the stop after a failure)
  int status = 0;
};

// Starts local rank `local_rank` of `plan` meeting at `master_port`, attempt `attempt` (0 first).
// Throws dpv::Error when the process cannot be started.
Worker start_worker(const LaunchPlan& plan, const std::string& exe, int local_rank, int master_port, int attempt);

// Forwards what the worker wrote to stderr; `until_eof` reads the rest once it exited.
void drain(Worker& w, bool until_eof);

// "exited with status 1", "was killed by signal 9 (Killed)".
std::string describe_status(int status);
bool failed(int status);
// "SIGSTOP": the name of a signal number, for messages.
std::string signal_name(int sig);

// The path of this dpv binary, which the workers run.
std::string self_executable();

}  // namespace dpv::cli
