#include "launch_helpers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/support/wait.h"

extern char** environ;

namespace dpv::testing {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int bind_any_port(int* port_out) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port_out = ntohs(a.sin_port);
  return fd;
}

}  // namespace

int free_port() {
  int port = 0;
  ::close(bind_any_port(&port));
  return port;
}

bool process_alive(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return false;
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z' && text[paren + 2] != 'X';
}

ListeningPort::ListeningPort() {
  fd_ = bind_any_port(&port_);
  ::listen(fd_, 4);
}

ListeningPort::~ListeningPort() { ::close(fd_); }

Background::Background(const std::vector<std::string>& args, const std::vector<std::string>& prefix) {
  static int counter = 0;
  const auto base = std::filesystem::temp_directory_path() /
                    ("dpv_bg_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  out_path_ = base.string() + ".out";
  err_path_ = base.string() + ".err";
  std::vector<std::string> argv_strings = prefix;
  argv_strings.push_back(dpv_binary());
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = -1;
  if (posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ) == 0) pid_ = pid;
  posix_spawn_file_actions_destroy(&actions);
}

Background::~Background() {
  if (pid_ > 0 && !done_) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
  std::filesystem::remove(out_path_);
  std::filesystem::remove(err_path_);
}

std::vector<int> Background::wait_for_children(size_t count, std::chrono::milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in("/proc/" + std::to_string(pid_) + "/task/" + std::to_string(pid_) + "/children");
    std::vector<int> pids;
    for (int p; in >> p;) pids.push_back(p);
    if (pids.size() >= count) return pids;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return {};
}

bool Background::wait_for_output(const std::string& text, std::chrono::milliseconds timeout) const {
  return wait_until([&] { return slurp(out_path_).find(text) != std::string::npos; }, timeout);
}

RunResult Background::finish(std::chrono::milliseconds timeout) {
  RunResult r;
  if (pid_ <= 0) {
    r.err = "could not start dpv";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  bool exited = false;
  while (std::chrono::steady_clock::now() < deadline) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!exited) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
  }
  done_ = true;
  if (exited && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  r.out = slurp(out_path_);
  r.err = slurp(err_path_);
  if (!exited) r.err += "\n[test: dpv did not exit within the timeout and was killed]";
  return r;
}

}  // namespace dpv::testing
