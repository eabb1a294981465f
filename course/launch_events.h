#pragma once
// What `dpv launch --events-file PATH` says about a job, as typed values: the file is JSON Lines,
// one event per line, appended while the job runs (docs/formats.md):
//   {"event":"started","attempt":A,"rank":R,"local_rank":L,"pid":P}
//   {"event":"exited","attempt":A,"rank":R,"pid":P,"exit_code":C|null,"signal":S|null,"stopped_by_launcher":B}
//   {"event":"restarting","attempt":A+1,"failed_rank":R,"max_restarts":N}
//   {"event":"finished","ok":B,"attempts":N,"failed_rank":R|-1,"message":"..."}
// LaunchEventsReader reads the file as it grows (a last line may be half written); LaunchJob is
// the job's state that the events build, rank by rank. Also the launcher's --error-file.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpv::course {

enum class LaunchEventKind { Started, Exited, Restarting, Finished };

struct LaunchEvent {
  LaunchEventKind kind = LaunchEventKind::Started;
  int attempt = 0;               // started, exited: the attempt (0 first); restarting: the one about to start
  int rank = -1;                 // started, exited
  int local_rank = -1;           // started
  int64_t pid = 0;               // started, exited
  std::optional<int> exit_code;  // exited: the status it exited with, or none when a signal ended it
  std::optional<int> signal;     // exited: the signal that ended it
  bool stopped_by_launcher = false;  // exited: the launcher stopped it (another rank failed, or a timeout)
  int failed_rank = -1;          // restarting, finished (-1: none)
  int max_restarts = 0;          // restarting
  bool ok = false;               // finished
  int attempts = 0;              // finished: attempts made (1 + restarts)
  std::string message;           // finished
};

// A line longer than this is not an event of dpv launch (a few hundred bytes); it is skipped.
inline constexpr size_t kMaxLaunchEventLine = 64 * 1024;

// Parses one line (without its newline). Throws dpv::Error (ValueError) saying what is wrong: not
// JSON, not an object, an unknown "event", a field missing or of the wrong type.
LaunchEvent parse_launch_event(std::string_view line);

// Reads an events file as it grows: feed() the bytes appended since the last call and get the
// events of the lines completed by them. A partial last line waits for the rest; a line that
// cannot be read (too long, not an event) is skipped and described in problems().
class LaunchEventsReader {
 public:
  std::vector<LaunchEvent> feed(std::string_view bytes);
  const std::vector<std::string>& problems() const { return problems_; }
  uint64_t consumed() const { return consumed_; }  // bytes fed so far: where the next read starts

 private:
  void take_line(std::string_view line, std::vector<LaunchEvent>& out);
  std::string partial_;
  bool skipping_long_line_ = false;
  uint64_t consumed_ = 0;
  int line_no_ = 0;
  std::vector<std::string> problems_;
};

enum class RankState { Running, Exited, Signalled, Stopped };

// One rank of the job as the events (and the fault the app sent) leave it.
struct RankStatus {
  int rank = -1;
  int attempt = 0;               // the attempt this status is of
  int64_t pid = 0;
  RankState state = RankState::Running;
  std::optional<int> exit_code;  // Exited
  std::optional<int> signal;     // Signalled: the signal that ended it; Stopped: the one that stopped it
  bool stopped_by_launcher = false;
  int restarts = 0;              // restarts of the job this rank has been through
};

// The job as its events so far tell it.
struct LaunchJob {
  std::vector<RankStatus> ranks;  // by rank, grown as ranks start
  int attempt = 0;                // the newest attempt started
  int restarts = 0;               // "restarting" events seen
  int max_restarts = 0;
  // The rank whose failure ended (or restarted) the job first: the first rank that failed on its
  // own until the launcher names one (restarting, finished). The launcher's word wins: a rank that
  // hangs (SIGSTOP) fails nobody by exiting, the rank whose collective timed out exits first, and
  // the launcher blames the one it waited for.
  int first_failed_rank = -1;
  bool failed_rank_named = false;  // first_failed_rank is the launcher's
  int stopped_by_launcher = 0;    // exits of ranks the launcher stopped itself, all attempts
  std::optional<LaunchEvent> finished;
  void apply(const LaunchEvent& event);
  // The pid of `rank` in the newest attempt, when it started and still runs.
  std::optional<int64_t> running_pid(int rank) const;
};

// "SIGKILL", "SIGTERM", "SIGSTOP", ..., or "signal N".
std::string signal_name(int signal);
// The rank's state in words, from its fields: "running", "killed by SIGKILL", "stopped (SIGSTOP)",
// "exited 0", "running (restarted at attempt 1)".
std::string rank_status_text(const RankStatus& status);

// The step a `dpv train` progress line reports ("step 2/3  loss ..."), or none for any other line.
std::optional<int> progress_step(std::string_view line);
// The step a `dpv train --checkpoint` resume line reports ("resumed from ... (step S)"), or none.
std::optional<int> resumed_step(std::string_view line);

// The launcher's --error-file: {"error_class": "...", "message": "...", "rank": R}.
struct LauncherError {
  std::string error_class;
  std::string message;
  int rank = -1;
};
inline constexpr uint64_t kMaxLauncherErrorFileBytes = 1 << 20;
// Reads it through the checked input read (regular files, at most 1 MiB) and checked JSON. None
// when there is no such file; throws dpv::Error when it is there but not such a document.
std::optional<LauncherError> read_launcher_error_file(const std::string& path);

}  // namespace dpv::course
