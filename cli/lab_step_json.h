#pragma once
// `dpv train --ddp --step-json FILE`: rank 0's measure of every step (engine/netmodel/step_meter.h)
// as JSON, written atomically at the end, which `dpv lab network` reads back instead of parsing the
// progress line. Format "dpv-ddp-steps" version 1 (docs/cli-lab-network.md):
//   {"format": "dpv-ddp-steps", "version": 1, "world": W, "transport": "gloo",
//    "simulated_link": null | {"rate_bits_per_s": R, "delay_s": D},
//    "steps": [{"step": 1, "step_s", "exposed_s", "bytes", "sent_bytes", "forward_s",
//               "backward_s": [per layer], "after_backward_s",
//               "buckets": [{"bytes", "ready_layer", "start_s", "end_s"}],
//               "hook_error": {"error_sq", "exact_sq", "max_abs", "elements"} (only on a step
//               --probe-hook-error probed; readers of version 1 that do not know it ignore it)}, ...]}
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "engine/netmodel/step_meter.h"

namespace dpv::cli {

struct SimulatedLinkFacts {
  double rate_bits_per_s = 0;
  double delay_s = 0;
};

struct StepLog {
  int world = 1;
  std::string transport;                          // the group's backend ("gloo", "in-process ring ...")
  std::optional<SimulatedLinkFacts> simulated_link;  // set: delays came from the cost model
  std::vector<netmodel::StepMeasure> steps;       // step i+1 at index i
};

std::string step_log_json(const StepLog& log);
// Reads and checks a step log; throws dpv::Error naming `path` and the field that is wrong.
StepLog read_step_log(const std::string& path);

struct TrainLoopInputs;  // cli/train_loop.h: the loop whose steps a StepRecorder measures

// --step-json on one rank 0: measures every step of `loop` and writes the log at the end.
class StepRecorder {
 public:
  StepRecorder(std::string path, int world, std::string transport, std::optional<SimulatedLinkFacts> link);
  // Rank 0's hook error of the step just run (DdpRank::hook_error), for a probed step.
  using HookErrorSource = std::function<std::optional<HookErrorMeasure>()>;
  // Puts the meter into `loop` and takes its measure after every step (before loop's own after_step),
  // with `hook_error`'s value when given. The recorder must outlive the loop's run.
  void attach(TrainLoopInputs& loop, HookErrorSource hook_error = {});
  void write() const;  // atomically; nothing when no path was given

 private:
  std::string path_;
  netmodel::StepMeter meter_;
  StepLog log_;
};

}  // namespace dpv::cli
