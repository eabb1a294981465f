#include "cli/train_loop.h"

#include <algorithm>
#include <chrono>
#include <iostream>
#include <optional>

#include "course/batchnorm_stats.h"

namespace dpv::cli {
namespace {

// A traced step with a measuring observer too: both see its stages.
class BothObservers : public Observer {
 public:
  BothObservers(Observer& a, Observer& b) : a_(a), b_(b) {}
  void on_stage(const StageEvent& event) override {
    a_.on_stage(event);
    b_.on_stage(event);
  }
  bool wants_snapshots() const override { return a_.wants_snapshots() || b_.wants_snapshots(); }

 private:
  Observer& a_;
  Observer& b_;
};

}  // namespace

void LossWindow::add(double loss, double accuracy) {
  losses_.push_back(loss);
  accuracies_.push_back(accuracy);
  if (losses_.size() > kWindow) {
    losses_.erase(losses_.begin());
    accuracies_.erase(accuracies_.begin());
  }
}

ProgressSample LossWindow::sample(int64_t step, int64_t batch, double seconds) const {
  ProgressSample s;
  s.step = step;
  for (size_t i = 0; i < losses_.size(); ++i) {
    s.loss += losses_[i] / static_cast<double>(losses_.size());
    s.accuracy += accuracies_[i] / static_cast<double>(accuracies_.size());
  }
  s.samples_per_s = seconds > 0 ? static_cast<double>(batch * step) / seconds : 0;
  return s;
}

Tensor pick_rows(const Tensor& target, const std::vector<int64_t>& indices) {
  const std::vector<int64_t> all = target.to_int64();
  std::vector<int64_t> out;
  out.reserve(indices.size());
  for (int64_t i : indices) out.push_back(all[static_cast<size_t>(i)]);
  return Tensor::from_int64({static_cast<int64_t>(out.size())}, out);
}

int64_t batch_start(int64_t step, int64_t n, int64_t batch) {
  const int64_t per_epoch = std::max<int64_t>(n / batch, 1);
  return step % per_epoch * batch;
}

void run_training_loop(Strategy& strategy, const TrainLoopInputs& in, TraceRecorder& trace) {
  if (in.first_step >= in.steps) return;  // resumed at (or past) --steps: nothing left to train
  const Dataset& data = *in.data;
  std::optional<ProgressReporter> progress;
  if (in.progress) progress.emplace(std::cout, in.steps, ProgressReporter::stdout_is_terminal());
  LossWindow window;
  ProgressSample sample;
  const int64_t n = data.inputs.dim(0);
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = in.first_step; step < in.steps; ++step) {
    Dataset b = take_batch(data, batch_start(step, n, in.batch), in.batch);
    const bool traced = in.traced && step - in.first_step < in.trace_steps;
    if (traced) trace.begin_iteration();
    Observer* observer = traced ? &trace : in.observer;
    std::optional<BothObservers> both;
    if (traced && in.observer) observer = &both.emplace(trace, *in.observer);
    auto it = strategy.begin_iteration(b.inputs, b.targets, observer);
    it->run_to_end();
    if (in.after_step) in.after_step(step + 1);
    if (!progress) continue;
    // Rank 0's loss and accuracy on the rows it saw (DataParallel: the whole batch).
    window.add(it->loss(), course::accuracy(it->output(), pick_rows(b.targets, it->output_rows())));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sample = window.sample(step + 1, in.batch, seconds);
    sample.samples_per_s = seconds > 0 ? static_cast<double>(in.batch * (step + 1 - in.first_step)) / seconds : 0;
    progress->update(sample);
  }
  if (progress) progress->finish(sample);
}

}  // namespace dpv::cli
