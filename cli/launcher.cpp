#include "cli/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <optional>
#include <utility>

#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/error.h"

extern char** environ;

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

struct Worker {
  int rank = 0, local_rank = 0;
  pid_t pid = -1;
  int err_fd = -1;         // read end of its stderr pipe; -1 once closed
  std::string partial;     // stderr bytes after the last newline
  std::string last_error;  // its last "dpv: error: ..." line (or last line)
  bool running = true;
  int status = 0;
};

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped";
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

// Forwards whole lines with the rank prefix and remembers the worker's error line.
void forward_lines(Worker& w, const char* data, size_t size) {
  w.partial.append(data, size);
  size_t start = 0;
  for (size_t nl; (nl = w.partial.find('\n', start)) != std::string::npos; start = nl + 1) {
    std::string line = w.partial.substr(start, nl - start);
    std::cerr << "[rank " << w.rank << "] " << line << '\n';
    const std::string tag = "dpv: error: ";
    size_t at = line.find(tag);
    if (at != std::string::npos) w.last_error = line.substr(at + tag.size());
    else if (w.last_error.empty() && !line.empty()) w.last_error = line;
  }
  w.partial.erase(0, start);
  std::cerr.flush();
}

void drain(Worker& w, bool until_eof) {
  if (w.err_fd < 0) return;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(w.err_fd, buf, sizeof(buf));
    if (n > 0) {
      forward_lines(w, buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN && !until_eof) return;
    if (n < 0 && errno == EAGAIN) {  // a grandchild may still hold the pipe: do not wait for it
      return;
    }
    ::close(w.err_fd);  // EOF
    w.err_fd = -1;
    if (!w.partial.empty()) forward_lines(w, "\n", 1);
    return;
  }
}

std::vector<std::string> worker_environment(const LaunchPlan& plan, int rank, int local_rank) {
  std::map<std::string, std::string> set{
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(plan.nproc_per_node * plan.nnodes)},
      {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node)},
      {"GROUP_RANK", std::to_string(plan.node_rank)},
      {"MASTER_ADDR", plan.master_addr},
      {"MASTER_PORT", std::to_string(plan.master_port)},
      {"DPV_BACKEND", name(plan.backend)},
      {"DPV_TIMEOUT", std::to_string(plan.timeout_s)},
      // A worker's error names the variables it read; this says that dpv launch set them, so the
      // worker adds the launcher's flags to its message (launch_flags_hint).
      {kLaunchedByVariable, "dpv launch"},
      // Each rank is one device: OpenBLAS in every worker spinning all cores would oversubscribe them.
      {"OPENBLAS_NUM_THREADS", "1"},
      {"OMP_NUM_THREADS", "1"},
  };
  if (!plan.iface.empty()) set["GLOO_SOCKET_IFNAME"] = plan.iface;
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    // A launcher inside another launcher's job must not pass on the outer job's rank variables, nor
    // torchrun's TORCHELASTIC_* (its agent's store is not this job's: rank 0 hosts this one).
    if (set.count(name) || name.rfind("OMPI_COMM_WORLD_", 0) == 0 || name.rfind("SLURM_", 0) == 0 ||
        name.rfind("TORCHELASTIC_", 0) == 0)
      continue;
    env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

std::string self_executable() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw Error(std::string("cannot find this program's path (/proc/self/exe): ") + std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
}

Worker start_worker(const LaunchPlan& plan, const std::string& exe, int local_rank) {
  Worker w;
  w.local_rank = local_rank;
  w.rank = plan.node_rank * plan.nproc_per_node + local_rank;
  std::vector<std::string> args{exe};
  args.insert(args.end(), plan.command.begin(), plan.command.end());
  std::vector<std::string> env = worker_environment(plan, w.rank, local_rank);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("cannot start a worker (fork): ") + std::strerror(errno));
  if (pid == 0) {
    // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
    ::setpgid(0, 0);
    ::dup2(fds[1], STDERR_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::signal(SIGPIPE, SIG_DFL);
    ::execve(argv[0], argv.data(), envp.data());
    const char* msg = "dpv: error: cannot start the worker program\n";
    [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, std::strlen(msg));
    ::_exit(127);
  }
  ::setpgid(pid, pid);  // also here: no race with the first signal
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  w.pid = pid;
  w.err_fd = fds[0];
  return w;
}

void signal_all(std::vector<Worker>& workers, int sig) {
  for (Worker& w : workers)
    if (w.running) ::kill(-w.pid, sig);
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
  struct sigaction old_int {}, old_term {};
};

// SIGINT and SIGTERM go into g_signal_pipe for the poll loop; SIGPIPE is ignored.
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
  ::signal(SIGPIPE, SIG_IGN);
  return saved;
}

// All of this node's workers, or none: if one cannot start, those already started are killed and reaped.
std::vector<Worker> start_workers(const LaunchPlan& plan, int master_port, const std::string& exe) {
  std::vector<Worker> workers;
  try {
    LaunchPlan resolved = plan;
    resolved.master_port = master_port;
    for (int i = 0; i < plan.nproc_per_node; ++i) workers.push_back(start_worker(resolved, exe, i));
  } catch (...) {
    signal_all(workers, SIGKILL);
    for (Worker& w : workers) ::waitpid(w.pid, nullptr, 0);
    throw;
  }
  return workers;
}

// What the poll loop tracks while the workers run.
struct Supervision {
  std::vector<Worker> workers;
  double grace_s = 0;
  std::optional<size_t> first_failure;
  int stop_signal = 0;  // SIGINT/SIGTERM received by the launcher
  std::optional<Clock::time_point> kill_at;

  // Sends sig to every running worker; the first stop also sets when the stragglers get SIGKILL.
  void begin_stop(int sig) {
    signal_all(workers, sig);
    if (!kill_at) kill_at = Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace_s * 1000));
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
void forward_signals(Supervision& s) {
  unsigned char sig = 0;
  while (::read(g_signal_pipe[0], &sig, 1) == 1) {
    if (!s.stop_signal) s.stop_signal = sig;
    s.begin_stop(sig);
  }
}

// Records the workers that exited; the first failure (not caused by a stop) stops the others.
void reap_exited(Supervision& s) {
  for (size_t i = 0; i < s.workers.size(); ++i) {
    Worker& w = s.workers[i];
    if (!w.running) continue;
    int status = 0;
    pid_t r = ::waitpid(w.pid, &status, WNOHANG);
    if (r != w.pid) continue;
    w.running = false;
    w.status = status;
    ::kill(-w.pid, SIGKILL);  // anything the worker left behind in its process group
    if (failed(status) && !s.first_failure && !s.stop_signal) {
      s.first_failure = i;
      s.begin_stop(SIGTERM);
    }
  }
}

// Forwards output and signals until every worker has exited.
void supervise(Supervision& s) {
  for (;;) {
    if (count_running(s.workers) == 0) break;
    wait_for_activity(s.workers);
    forward_signals(s);
    for (Worker& w : s.workers) drain(w, false);
    reap_exited(s);
    if (s.kill_at && Clock::now() >= *s.kill_at) signal_all(s.workers, SIGKILL);
  }
}

// The rest of the workers' output, then the launcher's own signal handling undone.
void finish(std::vector<Worker>& workers, const SavedHandlers& saved) {
  for (Worker& w : workers) drain(w, true);
  for (Worker& w : workers)
    if (w.err_fd >= 0) ::close(w.err_fd);
  ::sigaction(SIGINT, &saved.old_int, nullptr);
  ::sigaction(SIGTERM, &saved.old_term, nullptr);
  ::close(g_signal_pipe[0]);
  ::close(g_signal_pipe[1]);
}

// A stop or a failed worker is the launcher's error; a clean run returns.
void report_outcome(const Supervision& s) {
  if (s.stop_signal) {
    throw Error(std::string("stopped by ") + (s.stop_signal == SIGINT ? "SIGINT (Ctrl-C)" : "SIGTERM") + ": sent it to " +
                std::to_string(s.workers.size()) + " worker(s) and waited for them to exit");
  }
  if (s.first_failure) {
    const Worker& w = s.workers[*s.first_failure];
    int others = static_cast<int>(s.workers.size()) - 1;
    throw Error("rank " + std::to_string(w.rank) + " (local rank " + std::to_string(w.local_rank) + ", pid " +
                std::to_string(w.pid) + ") " + describe_status(w.status) +
                (w.last_error.empty() ? std::string() : ": " + w.last_error) +
                (others > 0 ? " (stopped the other " + std::to_string(others) + " worker(s) of this node)" : ""))
        .at_rank(w.rank);
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

void run_launch(const LaunchPlan& plan) {
  check_plan(plan);
  const int master_port = resolve_master_port(plan);
  const SavedHandlers saved = install_signal_handlers();
  const std::string exe = self_executable();
  Supervision s;
  s.grace_s = plan.grace_s;
  s.workers = start_workers(plan, master_port, exe);
  supervise(s);
  finish(s.workers, saved);
  report_outcome(s);
}

}  // namespace dpv::cli
