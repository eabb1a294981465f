#include "course/fault_facts.h"

#include <csignal>
#include <cmath>

namespace dpv::course {

int fault_signal(FaultKind kind) {
  switch (kind) {
    case FaultKind::Kill: return SIGKILL;
    case FaultKind::Stop: return SIGSTOP;
    case FaultKind::Term: return SIGTERM;
  }
  return SIGKILL;
}

void FaultLab::on_event(const LaunchEvent& event) {
  // A rank the lab stopped stays "stopped" until the launcher reports its end.
  job_.apply(event);
}

void FaultLab::on_output_line(std::string_view line) {
  if (const std::optional<int> step = progress_step(line)) last_step_ = std::max(last_step_, *step);
  if (const std::optional<int> step = resumed_step(line)) resumed_ = *step;
}

std::optional<FaultLab::Send> FaultLab::due() const {
  if (sent_ || job_.finished || job_.attempt != 0) return std::nullopt;
  const bool now = fire_now_ || (plan_.after_step > 0 && last_step_ >= plan_.after_step);
  if (!now) return std::nullopt;
  const std::optional<int64_t> pid = job_.running_pid(plan_.rank);
  if (!pid) return std::nullopt;
  return Send{*pid, fault_signal(plan_.kind)};
}

void FaultLab::sent() {
  sent_ = true;
  if (plan_.kind != FaultKind::Stop) return;
  if (plan_.rank >= 0 && plan_.rank < static_cast<int>(job_.ranks.size())) {
    RankStatus& s = job_.ranks[static_cast<size_t>(plan_.rank)];
    s.state = RankState::Stopped;
    s.signal = SIGSTOP;
  }
}

FaultFacts FaultLab::facts(double seconds_to_end) const {
  FaultFacts f;
  f.rank = plan_.rank;
  f.signal = signal_name(fault_signal(plan_.kind));
  f.killed = plan_.kind == FaultKind::Kill;
  f.hung = plan_.kind == FaultKind::Stop;
  f.terminated = plan_.kind == FaultKind::Term;
  f.after_step = plan_.after_step;
  f.world = plan_.world;
  f.timeout_s = static_cast<int>(std::lround(plan_.timeout_s));
  f.fault_sent = sent_;
  f.restart_allowed = plan_.restart;
  f.max_restarts = job_.max_restarts > 0 ? job_.max_restarts : (plan_.restart ? 1 : 0);
  f.finished = job_.finished.has_value();
  f.job_ok = job_.finished && job_.finished->ok;
  f.restarts_used = job_.restarts;
  f.resumed = resumed_.has_value();
  f.resumed_step = resumed_.value_or(0);
  f.failed_rank = job_.first_failed_rank;
  f.others_stopped = job_.stopped_by_launcher > 0;
  f.seconds_to_end = seconds_to_end;
  return f;
}

std::vector<NamedFact> fault_fact_table(const FaultFacts& f) {
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", f.seconds_to_end);
  return {
      {"rank", int64_t{f.rank}, "the rank the fault was sent to"},
      {"signal", f.signal, "the signal sent: SIGKILL, SIGSTOP or SIGTERM"},
      {"killed", f.killed, "the fault was kill -9 (SIGKILL)"},
      {"hung", f.hung, "the fault was SIGSTOP: the rank hangs, alive but silent"},
      {"terminated", f.terminated, "the fault was SIGTERM"},
      {"after_step", int64_t{f.after_step}, "the step after which it was sent (0: by hand)"},
      {"sent_by_hand", f.after_step == 0, "the fault was sent with \"Send now\""},
      {"world", int64_t{f.world}, "the job's processes"},
      {"timeout_s", int64_t{f.timeout_s}, "dpv launch --timeout, seconds"},
      {"fault_sent", f.fault_sent, "the fault was sent"},
      {"restart_allowed", f.restart_allowed, "the job may restart (--max-restarts 1, with checkpoints)"},
      {"max_restarts", int64_t{f.max_restarts}, "--max-restarts"},
      {"finished", f.finished, "the launcher reported the job's end"},
      {"job_ok", f.job_ok, "the job ended well"},
      {"job_failed", f.finished && !f.job_ok, "the job ended with an error"},
      {"restarted", f.restarts_used > 0, "the launcher restarted the workers"},
      {"restarts_used", int64_t{f.restarts_used}, "restarts the launcher made"},
      {"resumed", f.resumed, "the restarted job resumed from a checkpoint"},
      {"resumed_step", int64_t{f.resumed_step}, "the step of the checkpoint it resumed from"},
      {"failed_rank_known", f.failed_rank >= 0, "the launcher named the failed rank"},
      {"failed_rank", int64_t{f.failed_rank}, "the rank the launcher named as failed"},
      {"others_stopped", f.others_stopped, "the launcher stopped the other ranks"},
      {"seconds_to_end", std::string(seconds), "seconds from the fault to the job's end"},
  };
}

}  // namespace dpv::course
