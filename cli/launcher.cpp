#include "cli/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <utility>

#include "cli/launch_events.h"
#include "cli/launch_worker.h"
#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/error.h"

namespace dpv::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Signals reach the poll loop through a pipe: the handler only writes the signal number.
int g_signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  const int saved = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  [[maybe_unused]] ssize_t n = ::write(g_signal_pipe[1], &b, 1);
  errno = saved;
}

void signal_all(std::vector<Worker>& workers, int sig) {
  for (Worker& w : workers) {
    if (!w.running) continue;
    ::kill(-w.pid, sig);
    // A stopped worker would keep SIGTERM pending until the grace ran out: continued, it acts on it now.
    if (w.stopped && sig != SIGKILL) ::kill(-w.pid, SIGCONT);
    w.signaled_by_launcher = true;
  }
}

// The plan's own contradictions, found before anything is started.
void check_plan(const LaunchPlan& plan) {
  if (plan.command.empty())
    throw Error("nothing to launch: give the dpv subcommand after --, e.g. `dpv launch --nproc-per-node 2 -- bench allreduce`",
                ErrorClass::ValueError);
  if (plan.node_rank >= plan.nnodes) {
    throw Error("--node-rank " + std::to_string(plan.node_rank) + " is out of range for --nnodes " +
                    std::to_string(plan.nnodes) + " (node ranks are 0 .. nnodes - 1)",
                ErrorClass::ValueError);
  }
  if (plan.command[0] == "launch") throw Error("`dpv launch -- launch ...` would launch launchers; give a worker command", ErrorClass::ValueError);
  if (plan.master_port == 0 && plan.nnodes > 1)
    throw Error("--master-port 0 (pick a free port) works on one node only: the other nodes must be told the port, "
                "so give --master-port P on every node", ErrorClass::ValueError);
}

// The node that hosts the store checks its port first: a port in use is an error before any worker
// starts. Port 0 asks the system for a free one, which the workers are then given.
int resolve_master_port(const LaunchPlan& plan) {
  int master_port = plan.master_port;
  if (plan.node_rank == 0) {
    try {
      master_port = dist::check_store_port(plan.master_addr, plan.master_port);
    } catch (const Error& e) {
      throw e.reworded(e.what() + launch_flags_hint(e));
    }
  }
  return master_port;
}

// The handlers the launcher replaced, put back once the workers are gone.
struct SavedHandlers {
  struct sigaction old_int {}, old_term {}, old_hup {};
};

// SIGINT, SIGTERM and SIGHUP (a closed terminal) go into g_signal_pipe for the poll loop; SIGPIPE
// is ignored.
SavedHandlers install_signal_handlers() {
  if (::pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
    throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  SavedHandlers saved;
  ::sigaction(SIGINT, &sa, &saved.old_int);
  ::sigaction(SIGTERM, &sa, &saved.old_term);
  ::sigaction(SIGHUP, &sa, &saved.old_hup);
  ::signal(SIGPIPE, SIG_IGN);
  return saved;
}

void restore_signal_handlers(const SavedHandlers& saved) {
  ::sigaction(SIGINT, &saved.old_int, nullptr);
  ::sigaction(SIGTERM, &saved.old_term, nullptr);
  ::sigaction(SIGHUP, &saved.old_hup, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
}

// All of this node's workers, or none: if one cannot start, those already started are killed and reaped.
std::vector<Worker> start_workers(const LaunchPlan& plan, int master_port, const std::string& exe, int attempt,
                                  LaunchEvents& events) {
  std::vector<Worker> workers;
  try {
    for (int i = 0; i < plan.nproc_per_node; ++i) {
      workers.push_back(start_worker(plan, exe, i, master_port, attempt));
      events.started(workers.back());
    }
  } catch (...) {
    signal_all(workers, SIGKILL);
    for (Worker& w : workers) ::waitpid(w.pid, nullptr, 0);
    throw;
  }
  return workers;
}

// What the poll loop tracks while one attempt's workers run.
struct Supervision {
  std::vector<Worker> workers;
  double grace_s = 0;
  std::optional<size_t> first_failure;
  // A worker found stopped (SIGSTOP) when the first one failed: the others most likely failed
  // waiting for it, so it is the one to blame.
  std::optional<size_t> stopped_at_failure;
  int stop_signal = 0;  // SIGINT/SIGTERM/SIGHUP received by the launcher
  std::optional<Clock::time_point> kill_at;

  // Sends sig to every running worker; the first stop also sets when the stragglers get SIGKILL.
  void begin_stop(int sig) {
    signal_all(workers, sig);
    if (!kill_at) kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
  }
  // The rank whose failure ended the attempt (the stopped one, when one was), or -1.
  int failed_rank() const {
    if (stopped_at_failure) return workers[*stopped_at_failure].rank;
    return first_failure ? workers[*first_failure].rank : -1;
  }
};

size_t count_running(const std::vector<Worker>& workers) {
  size_t running = 0;
  for (const Worker& w : workers) running += w.running;
  return running;
}

// Waits up to 50 ms for a signal or worker output, so exits are noticed promptly without spinning.
void wait_for_activity(const std::vector<Worker>& workers) {
  std::vector<pollfd> fds{{g_signal_pipe[0], POLLIN, 0}};
  for (const Worker& w : workers)
    if (w.err_fd >= 0) fds.push_back({w.err_fd, POLLIN, 0});
  ::poll(fds.data(), fds.size(), 50);
}

// Passes every signal the launcher received on to the workers; the first one is the stop reason.
// SIGHUP (the terminal closed) stops them as SIGTERM does: they have no terminal of their own.
void forward_signals(Supervision& s) {
  unsigned char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) == 1) {
    if (!s.stop_signal) s.stop_signal = sig;
    s.begin_stop(sig == SIGHUP ? SIGTERM : sig);
  }
}

// Records the workers that exited, stopped or continued; the first failure (not caused by a stop)
// stops the others. Every worker's status is collected before any failure is judged, so a rank
// stopped just before another failed is known as stopped when the failure is reported.
void reap_exited(Supervision& s, LaunchEvents& events) {
  std::vector<size_t> exited;
  for (size_t i = 0; i < s.workers.size(); ++i) {
    Worker& w = s.workers[i];
    if (!w.running) continue;
    int status = 0;
    if (::waitpid(w.pid, &status, WNOHANG | WUNTRACED | WCONTINUED) != w.pid) continue;
    if (WIFSTOPPED(status) || WIFCONTINUED(status)) {
      w.stopped = WIFSTOPPED(status);
      w.stop_signal = w.stopped ? WSTOPSIG(status) : 0;
      continue;
    }
    w.running = false;
    w.status = status;
    ::kill(-w.pid, SIGKILL);  // anything the worker left behind in its process group
    events.exited(w);
    exited.push_back(i);
  }
  for (size_t i : exited) {
    if (!failed(s.workers[i].status) || s.first_failure || s.stop_signal) continue;
    s.first_failure = i;
    for (size_t j = 0; j < s.workers.size(); ++j)
      if (j != i && s.workers[j].running && s.workers[j].stopped && !s.stopped_at_failure) s.stopped_at_failure = j;
    s.begin_stop(SIGTERM);
  }
}

// Forwards output and signals until every worker has exited, then reads the rest of their output.
void supervise(Supervision& s, LaunchEvents& events) {
  for (;;) {
    if (count_running(s.workers) == 0) break;
    wait_for_activity(s.workers);
    forward_signals(s);
    for (Worker& w : s.workers) drain(w, false);
    reap_exited(s, events);
    if (s.kill_at && Clock::now() >= *s.kill_at) signal_all(s.workers, SIGKILL);
  }
  for (Worker& w : s.workers) drain(w, true);
  for (Worker& w : s.workers)
    if (w.err_fd >= 0) ::close(w.err_fd);
}

std::string who(const Worker& w) {
  return "rank " + std::to_string(w.rank) + " (local rank " + std::to_string(w.local_rank) + ", pid " +
         std::to_string(w.pid) + ")";
}

// What ended the attempt, naming the rank to blame: "rank 1 (local rank 1, pid 7) exited with
// status 1: ...", or, when a rank was stopped, that one and the rank that failed waiting for it.
std::string describe_failure(const Supervision& s) {
  const Worker& w = s.workers[*s.first_failure];
  const std::string failure = describe_status(w.status) + (w.last_error.empty() ? std::string() : ": " + w.last_error);
  if (s.stopped_at_failure) {
    const Worker& stopped = s.workers[*s.stopped_at_failure];
    return who(stopped) + " was stopped by " + signal_name(stopped.stop_signal) +
           " and never arrived; rank " + std::to_string(w.rank) + " failed waiting for it (" + failure + ")";
  }
  return who(w) + " " + failure;
}

std::string stop_signal_words(int sig) {
  if (sig == SIGINT) return "SIGINT (Ctrl-C): sent it";
  if (sig == SIGHUP) return "SIGHUP (the terminal closed): sent SIGTERM";
  return "SIGTERM: sent it";
}

// A stop or a failed worker is the launcher's error; a clean run returns.
void report_outcome(const Supervision& s) {
  if (s.stop_signal) {
    throw Error("stopped by " + stop_signal_words(s.stop_signal) + " to " + std::to_string(s.workers.size()) +
                " worker(s) and waited for them to exit");
  }
  if (s.first_failure) {
    int others = static_cast<int>(s.workers.size()) - 1;
    throw Error(describe_failure(s) +
                (others > 0 ? " (stopped the other " + std::to_string(others) + " worker(s) of this node)" : ""))
        .at_rank(s.failed_rank());
  }
}

// One attempt: this node's workers started, supervised to the end.
Supervision run_attempt(const LaunchPlan& plan, int master_port, const std::string& exe, int attempt,
                        LaunchEvents& events) {
  Supervision s;
  s.grace_s = plan.grace_s;
  s.workers = start_workers(plan, master_port, exe, attempt, events);
  supervise(s, events);
  return s;
}

// Runs attempts until one ends without a worker failure, the launcher is stopped, or the
// restarts are spent; returns the last attempt. `attempts`: how many were started.
Supervision run_attempts(const LaunchPlan& plan, int master_port, LaunchEvents& events, int& attempts) {
  const std::string exe = self_executable();
  for (int attempt = 0;; ++attempt) {
    attempts = attempt + 1;
    Supervision s = run_attempt(plan, master_port, exe, attempt, events);
    if (s.stop_signal || !s.first_failure || attempt >= plan.max_restarts) return s;
    // As torchrun's elastic agent: every worker of this node is stopped (done by the failure's
    // SIGTERM, SIGKILL after the grace) and all are started again, with the same ranks.
    std::cerr << "dpv launch: " << describe_failure(s) << "; restarting all " << s.workers.size() << " workers (restart "
              << attempt + 1 << " of " << plan.max_restarts << ")\n";
    std::cerr.flush();
    events.restarting(attempt + 1, s.failed_rank(), plan.max_restarts);
  }
}

}  // namespace

// The variables of worker_environment that come from a flag of `dpv launch`.
const std::vector<std::pair<std::string, std::string>>& flag_of_variable() {
  static const std::vector<std::pair<std::string, std::string>> list{
      {"MASTER_ADDR", "--master-addr"},   {"MASTER_PORT", "--master-port"},
      {"WORLD_SIZE", "--nnodes x --nproc-per-node"}, {"LOCAL_WORLD_SIZE", "--nproc-per-node"},
      {"GROUP_RANK", "--node-rank"},      {"DPV_BACKEND", "--backend"},
      {"DPV_TIMEOUT", "--timeout"},       {"GLOO_SOCKET_IFNAME", "--iface"},
  };
  return list;
}

std::string launch_flags_hint(const Error& e) {
  std::string named;
  for (const std::string& setting : e.settings())
    for (const auto& [variable, flag] : flag_of_variable())
      if (setting == variable) named += (named.empty() ? "" : ", ") + variable + " from " + flag;
  return named.empty() ? std::string() : " (dpv launch sets " + named + ")";
}

bool launched_by_dpv_launch() {
  const char* value = std::getenv(kLaunchedByVariable);
  return value != nullptr && std::string(value) == "dpv launch";
}

void run_launch(const LaunchPlan& plan, LaunchEvents& events) {
  int master_port = 0;
  try {
    check_plan(plan);
    master_port = resolve_master_port(plan);
  } catch (const Error& e) {  // nothing started: the events still end with why
    events.finished(false, 0, -1, e.what());
    throw;
  }
  const SavedHandlers saved = install_signal_handlers();
  int attempts = 0;
  std::optional<Supervision> last;
  try {
    last = run_attempts(plan, master_port, events, attempts);
  } catch (const Error& e) {  // a worker that could not be started
    restore_signal_handlers(saved);
    events.finished(false, attempts, -1, e.what());
    throw;
  }
  restore_signal_handlers(saved);
  try {
    report_outcome(*last);
  } catch (const Error& e) {
    events.finished(false, attempts, last->failed_rank(), e.what());
    throw;
  }
  events.finished(true, attempts, -1,
                  "all " + std::to_string(last->workers.size()) + " worker(s) of this node exited with status 0");
}

}  // namespace dpv::cli
