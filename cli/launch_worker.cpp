#include "cli/launch_worker.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <map>

#include "engine/error.h"

extern char** environ;

namespace dpv::cli {
namespace {

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

std::vector<std::string> worker_environment(const LaunchPlan& plan, int rank, int local_rank, int master_port,
                                            int attempt) {
  std::map<std::string, std::string> set{
      {"RANK", std::to_string(rank)},
      {"LOCAL_RANK", std::to_string(local_rank)},
      {"WORLD_SIZE", std::to_string(plan.nproc_per_node * plan.nnodes)},
      {"LOCAL_WORLD_SIZE", std::to_string(plan.nproc_per_node)},
      {"GROUP_RANK", std::to_string(plan.node_rank)},
      {"MASTER_ADDR", plan.master_addr},
      {"MASTER_PORT", std::to_string(master_port)},
      {"DPV_BACKEND", name(plan.backend)},
      {"DPV_TIMEOUT", std::to_string(plan.timeout_s)},
      // As torchrun's agent: which attempt this is (0 first) and how many restarts the job allows.
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(attempt)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(plan.max_restarts)},
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

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void exec_worker(int err_fd, pid_t launcher, std::vector<char*>& argv, std::vector<char*>& envp) {
  // The worker dies with the launcher, however the launcher ends (SIGKILL included). The launcher
  // may have died before prctl: then this process was re-parented already, and must not run.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);
  // Own process group: a terminal's Ctrl-C reaches the launcher only, which forwards it once.
  ::setpgid(0, 0);
  ::dup2(err_fd, STDERR_FILENO);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGINT, SIG_DFL);
  ::signal(SIGTERM, SIG_DFL);
  ::signal(SIGHUP, SIG_DFL);
  ::signal(SIGPIPE, SIG_DFL);
  ::execve(argv[0], argv.data(), envp.data());
  const char* msg = "dpv: error: cannot start the worker program\n";
  [[maybe_unused]] ssize_t n = ::write(STDERR_FILENO, msg, std::strlen(msg));
  ::_exit(127);
}

}  // namespace

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
  }
  return "stopped";
}

bool failed(int status) { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::string self_executable() {
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) throw Error(std::string("cannot find this program's path (/proc/self/exe): ") + std::strerror(errno));
  return std::string(path, static_cast<size_t>(n));
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
    if (n < 0 && errno == EAGAIN) return;  // a grandchild may still hold the pipe: do not wait for it
    ::close(w.err_fd);  // EOF
    w.err_fd = -1;
    if (!w.partial.empty()) forward_lines(w, "\n", 1);
    return;
  }
}

Worker start_worker(const LaunchPlan& plan, const std::string& exe, int local_rank, int master_port, int attempt) {
  Worker w;
  w.local_rank = local_rank;
  w.attempt = attempt;
  w.rank = plan.node_rank * plan.nproc_per_node + local_rank;
  std::vector<std::string> args{exe};
  args.insert(args.end(), plan.command.begin(), plan.command.end());
  std::vector<std::string> env = worker_environment(plan, w.rank, local_rank, master_port, attempt);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("cannot create a pipe: ") + std::strerror(errno));
  const pid_t launcher = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    throw Error(std::string("cannot start a worker (fork): ") + std::strerror(errno));
  }
  if (pid == 0) exec_worker(fds[1], launcher, argv, envp);
  ::setpgid(pid, pid);  // also here: no race with the first signal
  ::close(fds[1]);
  ::fcntl(fds[0], F_SETFL, ::fcntl(fds[0], F_GETFL) | O_NONBLOCK);
  w.pid = pid;
  w.err_fd = fds[0];
  return w;
}

}  // namespace dpv::cli
