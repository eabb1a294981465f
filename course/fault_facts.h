#pragma once
// The fault lab of the Timeline page: the learner picks a rank, a fault (SIGKILL, SIGSTOP: a hang,
// SIGTERM) and a moment (after step k, or now), and whether the job may restart from its
// checkpoints; the app runs `dpv launch --events-file ... [--max-restarts 1] -- train --ddp ...`,
// sends the fault itself to that rank's pid, and watches what the launcher does.
// FaultLab is the lab's state as plain values (no Qt): what the events and rank 0's lines said, when
// the fault is due, and the facts of the run (FaultFacts) that lessons/ddp/faults.md is written from.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "course/launch_events.h"
#include "course/lesson_facts.h"

namespace dpv::course {

enum class FaultKind { Kill, Stop, Term };  // SIGKILL (kill -9), SIGSTOP (a hang), SIGTERM

int fault_signal(FaultKind kind);  // the signal number sent

struct FaultPlan {
  int rank = 1;                 // the rank the fault is sent to
  FaultKind kind = FaultKind::Kill;
  int after_step = 1;           // sent once rank 0 reports this step; 0: only when fire_now() asks
  bool restart = false;         // dpv launch --max-restarts 1, train --checkpoint ... --checkpoint-every 1
  int world = 2;
  double timeout_s = 15;        // dpv launch --timeout: how long a collective waits for a silent rank
};

// What the lesson is written from: one run of the lab, as it ended (or stands).
struct FaultFacts {
  int rank = 1;
  std::string signal;            // "SIGKILL"
  bool killed = false, hung = false, terminated = false;  // which fault
  int after_step = 0;            // 0: sent by hand ("now")
  int world = 2;
  int timeout_s = 15;
  bool fault_sent = false;
  bool restart_allowed = false;  // --max-restarts 1
  int max_restarts = 0;
  bool finished = false;         // the launcher's "finished" event came
  bool job_ok = false;
  int restarts_used = 0;
  bool resumed = false;          // a restarted rank 0 printed "resumed from ... (step S)"
  int resumed_step = 0;
  int failed_rank = -1;          // the rank the launcher named
  bool others_stopped = false;   // the launcher stopped the other ranks
  double seconds_to_end = 0;     // from the fault to the job's end
};

class FaultLab {
 public:
  explicit FaultLab(FaultPlan plan) : plan_(plan) {}

  void on_event(const LaunchEvent& event);
  void on_output_line(std::string_view line);  // rank 0's stdout: its progress and resume lines
  void fire_now() { fire_now_ = true; }        // "Send now": due() answers at once once the rank runs

  // The fault to send now, once: the target rank's pid in the first attempt (a restart is never
  // faulted again) when the step was reached or fire_now() asked. Call sent() after sending.
  struct Send {
    int64_t pid;
    int signal;
  };
  std::optional<Send> due() const;
  void sent();  // a SIGSTOP leaves the rank stopped: no event says so, the lab does

  const FaultPlan& plan() const { return plan_; }
  const LaunchJob& job() const { return job_; }
  bool fault_sent() const { return sent_; }
  int last_step() const { return last_step_; }
  std::optional<int> resumed_from() const { return resumed_; }
  // `seconds_to_end`: measured by the caller from the fault to the job's end.
  FaultFacts facts(double seconds_to_end) const;

 private:
  FaultPlan plan_;
  LaunchJob job_;
  bool fire_now_ = false;
  bool sent_ = false;
  int last_step_ = 0;
  std::optional<int> resumed_;
};

// The facts by name for the lesson template (course/lesson_template.h).
std::vector<NamedFact> fault_fact_table(const FaultFacts& facts);

}  // namespace dpv::course
