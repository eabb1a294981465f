#include "cli/launch_events.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli/launch_worker.h"
#include "cli/output_paths.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"

namespace dpv::cli {
namespace {

// A worker's error line may hold any bytes: invalid UTF-8 is replaced, never a reason to throw.
std::string line_of(const nlohmann::ordered_json& event) {
  return event.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace

LaunchEvents::LaunchEvents(const std::string& path, const std::string& option) : path_(path) {
  check_output_path(path, option);  // the folder, and not a folder, a FIFO or a device
  // O_NONBLOCK: a FIFO put there since the check must not block the open; fstat then refuses it.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0644);
  if (fd_ < 0) {
    const Error e = file_error(errno, path);
    throw e.reworded(option + ": " + e.what());
  }
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    throw Error(option + ": '" + path + "' is not a regular file; give the path of a file to write the events to",
                ErrorClass::ValueError);
  }
  ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
}

LaunchEvents::~LaunchEvents() {
  if (fd_ >= 0) ::close(fd_);
}

// One write() per event: a reader polling the file sees whole lines. A failed write (disk full)
// is said once on stderr; the job itself goes on, the events are only its record.
void LaunchEvents::append(const std::string& line) {
  if (fd_ < 0) return;
  const std::string text = line + "\n";
  ssize_t n;
  do {
    n = ::write(fd_, text.data(), text.size());
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(text.size())) {
    std::cerr << "dpv launch: cannot write the events to '" << path_ << "'; no more events are written\n";
    ::close(fd_);
    fd_ = -1;
  }
}

void LaunchEvents::started(const Worker& w) {
  append(line_of(nlohmann::ordered_json{
      {"event", "started"}, {"attempt", w.attempt}, {"rank", w.rank}, {"local_rank", w.local_rank}, {"pid", w.pid}}));
}

void LaunchEvents::exited(const Worker& w) {
  const bool signaled = WIFSIGNALED(w.status);
  nlohmann::ordered_json event{{"event", "exited"}, {"attempt", w.attempt}, {"rank", w.rank}, {"pid", w.pid}};
  event["exit_code"] = signaled ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(WEXITSTATUS(w.status));
  event["signal"] = signaled ? nlohmann::ordered_json(WTERMSIG(w.status)) : nlohmann::ordered_json(nullptr);
  event["stopped_by_launcher"] = signaled && w.signaled_by_launcher;
  append(line_of(event));
}

void LaunchEvents::restarting(int next_attempt, int failed_rank, int max_restarts) {
  append(line_of(nlohmann::ordered_json{
      {"event", "restarting"}, {"attempt", next_attempt}, {"failed_rank", failed_rank}, {"max_restarts", max_restarts}}));
}

void LaunchEvents::finished(bool ok, int attempts, int failed_rank, const std::string& message) {
  append(line_of(nlohmann::ordered_json{
      {"event", "finished"}, {"ok", ok}, {"attempts", attempts}, {"failed_rank", failed_rank}, {"message", message}}));
}

}  // namespace dpv::cli
