#pragma once
// The one training loop of `dpv train`, whichever strategy runs it (DataParallel's Trainer, DDP's
// in-process ranks, a launched DDP rank): batches in order over the data (the last partial batch
// of an epoch dropped), a progress line of the loss and accuracy averaged over the last 20 steps,
// and the first --trace-steps iterations recorded in the trace.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cli/progress.h"
#include "engine/datasets.h"
#include "engine/strategy.h"
#include "engine/trace.h"

namespace dpv::cli {

// The progress line's window: the last kWindow steps' loss and accuracy.
class LossWindow {
 public:
  static constexpr size_t kWindow = 20;
  void add(double loss, double accuracy);
  // Step `step` (1-based) of batches of `batch` samples, `seconds` after training began.
  ProgressSample sample(int64_t step, int64_t batch, double seconds) const;

 private:
  std::vector<double> losses_, accuracies_;
};

// Rows `indices` of an int64 target vector [N] -> [indices.size()].
Tensor pick_rows(const Tensor& target, const std::vector<int64_t>& indices);

// Where step `step` (0-based) takes its batch from: batches follow each other over the data of
// `n` samples, a new epoch starting when the next batch would not fit (the partial one dropped).
int64_t batch_start(int64_t step, int64_t n, int64_t batch);

struct TrainLoopInputs {
  const Dataset* data = nullptr;
  int64_t batch = 0, steps = 0;
  int64_t first_step = 0;  // steps already done (a resumed run): the loop goes on from there
  // Called after each step with the number of steps done (a checkpoint's chance to be written).
  std::function<void(int64_t)> after_step;
  bool traced = false;  // record the first trace_steps iterations in `trace`
  int trace_steps = 5;
  bool progress = true;  // print the progress line (a launched DDP rank other than 0 trains silently)
  // Sees every step's stages (a traced step's too), e.g. --step-json's meter; after_step reads it.
  Observer* observer = nullptr;
};

// Trains `strategy` for in.steps steps, printing progress on stdout; records into `trace`.
void run_training_loop(Strategy& strategy, const TrainLoopInputs& in, TraceRecorder& trace);

}  // namespace dpv::cli
