#pragma once
// What one DDP step cost on rank 0, read from the stages its iteration reports (an Observer that
// wants no snapshots, so it copies nothing to the host): the measurement `dpv lab network` puts
// beside the cost model's prediction (ddp_step_model.h), and the facts that prediction starts from.
//   step_s      the iteration, from its first stage to the end of the optimizer step
//   exposed_s   communication the backward did not hide: from the end of rank 0's backward to the
//               end of its last bucket all-reduce (0 when every bucket finished during the backward)
//   bytes       the bucket buffers all-reduced in the step (nccl-tests' size, summed)
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "engine/ddp/comm_hooks/hook_error.h"
#include "engine/netmodel/ddp_step_model.h"
#include "engine/observer.h"

namespace dpv::netmodel {

struct MeasuredBucket {
  BucketFacts facts;          // facts.bytes: what crossed the link (sent_bytes, else buffer_bytes)
  double start = 0, end = 0;  // seconds from the start of the step, on rank 0's communication thread
  size_t buffer_bytes = 0;    // the bucket's flat buffer
  size_t sent_bytes = 0;      // what the collective(s) reported (a communication hook's own bytes)
};

// What a bucket's collectives put on the link: their reported bytes, the buffer's when none were.
inline size_t link_bytes(size_t buffer_bytes, size_t sent_bytes) { return sent_bytes > 0 ? sent_bytes : buffer_bytes; }

struct StepMeasure {
  double step_s = 0;
  double exposed_s = 0;
  size_t bytes = 0;       // the buckets' buffers
  size_t sent_bytes = 0;  // the buckets' collectives' reported bytes (differs only with a hook)
  double backward_end_s = 0;
  std::vector<MeasuredBucket> buckets;  // in launch order
  // The compute the prediction takes (world and collective filled by the caller).
  DdpStepFacts facts;
  // Set on a probed step (DdpOptions::probe_hook_error_at; filled by whoever holds rank 0's
  // DdpRank, not by StepMeter): the hook's gradient error. Its extra all-reduce spoils the step's
  // timing, so summaries leave a probed step out (lab_summary.h).
  std::optional<HookErrorMeasure> hook_error;
};

class StepMeter : public Observer {
 public:
  // Collects the events of the iteration in progress (device 0's communication: rank 0's).
  void on_stage(const StageEvent& event) override { events_.push_back(event); }
  bool wants_snapshots() const override { return false; }
  // The finished iteration's measure; forgets its events for the next one. Throws dpv::Error when
  // no Backward stage was seen (not a DDP iteration).
  StepMeasure take(int world);

 private:
  std::vector<StageEvent> events_;
};

// The layer a parameter belongs to, from its state-dict name ("3.weight" -> 3); -1 if none.
int layer_of_parameter(const std::string& name);

}  // namespace dpv::netmodel
