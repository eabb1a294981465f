#pragma once
// Chrome trace event JSON (opens in Perfetto and chrome://tracing): one complete event ("ph":"X")
// per device per stage, on a track per device, with bytes and bandwidth of collectives in args.
#include <string>
#include <vector>

#include "engine/observer.h"

namespace dpv {

class TraceRecorder : public Observer {
 public:
  void on_stage(const StageEvent& event) override;
  // Starts a new iteration: later events are placed after the ones recorded so far.
  void begin_iteration();
  const std::vector<StageEvent>& events() const { return events_; }
  std::string to_json() const;
  void save(const std::string& path) const;  // atomic write
  void clear();
  // The trace's process name (default "dpviz DataParallel"; "dpviz DDP" for a DDP rank's trace).
  void set_process_name(std::string name) { process_name_ = std::move(name); }

 private:
  std::string process_name_ = "dpviz DataParallel";
  std::vector<StageEvent> events_;
  std::vector<double> offsets_;  // per event: seconds added to its times (iterations laid end to end)
  double base_ = 0;
  double last_end_ = 0;
};

}  // namespace dpv
