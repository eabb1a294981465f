#pragma once
// Helpers for the tests of `dpv launch` and multi-process runs: a free port, a port held busy,
// dpv started in the background (its stdout and stderr captured) and waited for with a deadline.
#include <chrono>
#include <string>
#include <vector>

#include "run_dpv.h"

namespace dpv::testing {

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();
// True while the process exists and is not a zombie.
bool process_alive(int pid);

// Listens on 127.0.0.1 (any port) for the lifetime of the object: a port in use.
class ListeningPort {
 public:
  ListeningPort();
  ~ListeningPort();
  int port() const { return port_; }

 private:
  int fd_ = -1, port_ = 0;
};

// `dpv args...` running in the background, optionally under a command prefix (e.g. "ip netns exec ns").
class Background {
 public:
  explicit Background(const std::vector<std::string>& args, const std::vector<std::string>& prefix = {});
  ~Background();  // kills the process if still running
  int pid() const { return pid_; }
  // The pids of its child processes once there are `count` of them (empty if not within `timeout`).
  std::vector<int> wait_for_children(size_t count, std::chrono::milliseconds timeout) const;
  // Whether its standard output shows `text` within `timeout`.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds timeout) const;
  // Waits for the exit; past `timeout` kills it (exit_code -1 and a note in err).
  RunResult finish(std::chrono::milliseconds timeout);

 private:
  int pid_ = -1;
  bool done_ = false;
  std::string out_path_, err_path_;
};

}  // namespace dpv::testing
