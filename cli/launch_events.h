#pragma once
// `dpv launch --events-file PATH`: what happened to the workers, as JSON Lines, for a program that
// watches the job (the app's fault lab). The file is created (or truncated) at the start; each
// event is one JSON object on one line, written with one write(), so a reader never sees half a
// line of a finished event. The objects (docs/formats.md, "Launch events"):
//   {"event":"started","attempt":A,"rank":R,"local_rank":L,"pid":P}
//   {"event":"exited","attempt":A,"rank":R,"pid":P,"exit_code":C|null,"signal":S|null,"stopped_by_launcher":B}
//   {"event":"restarting","attempt":A+1,"failed_rank":R,"max_restarts":N}
//   {"event":"finished","ok":B,"attempts":A+1,"failed_rank":R|-1,"message":"..."}
#include <string>

namespace dpv::cli {

struct Worker;

class LaunchEvents {
 public:
  LaunchEvents() = default;  // no file: every event is dropped
  // Opens PATH for the events, refusing what is not (or would not be) a regular file, as every
  // output of dpv; throws dpv::Error naming `option` and the reason.
  LaunchEvents(const std::string& path, const std::string& option);
  ~LaunchEvents();
  LaunchEvents(const LaunchEvents&) = delete;
  LaunchEvents& operator=(const LaunchEvents&) = delete;

  void started(const Worker& w);
  void exited(const Worker& w);
  void restarting(int next_attempt, int failed_rank, int max_restarts);
  void finished(bool ok, int attempts, int failed_rank, const std::string& message);

 private:
  void append(const std::string& line);
  int fd_ = -1;
  std::string path_;
};

}  // namespace dpv::cli
