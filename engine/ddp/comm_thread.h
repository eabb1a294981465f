#pragma once
// One rank's communication thread, for groups whose collectives must be issued from a thread of
// the rank's own (Gloo and NCCL processes, in-process ranks on GPU memory): every collective the
// rank issues (construction broadcasts, buffer broadcasts, bucket all-reduces, SyncBatchNorm's
// all-gather and all-reduce) goes through this one FIFO, so each rank issues its collectives in the
// same order as every other rank (what torch.distributed requires) while the bucket all-reduces
// still overlap the rest of the backward.
// In-process ranks on host memory need none (threaded = false): their bucket all-reduces run on
// the group's own communication thread (ProcessGroup::start_all_reduce_sum), independent of the
// blocking collectives, which run() then calls straight from the rank's thread, every rank being
// in the same stage at once. The thread is made only when a job is first submitted.
#include <exception>
#include <functional>
#include <future>
#include <memory>

#include "engine/backend.h"
#include "engine/device.h"

namespace dpv {

class CommThread {
 public:
  // `queues`: the rank's device backend, whose queues order the jobs (null: no ordering needed).
  explicit CommThread(bool threaded = true, Backend* queues = nullptr) : threaded_(threaded), queues_(queues) {}
  bool threaded() const { return threaded_; }

  // Queues `fn` on the thread, to run on the device's communication queue after the compute work
  // queued so far; the future carries its exception, if any.
  std::shared_future<void> submit(std::function<void()> fn) {
    auto done = std::make_shared<std::promise<void>>();
    std::shared_future<void> f = done->get_future().share();
    if (!worker_) worker_ = std::make_unique<DeviceWorker>();
    std::shared_ptr<QueueEvent> inputs_ready = queues_ ? queues_->record_event(DeviceQueue::Compute) : nullptr;
    worker_->submit([fn = std::move(fn), done, queues = queues_, inputs_ready] {
      try {
        if (queues)
          queues->run_on_queue(DeviceQueue::Communication, [&] {
            queues->queue_wait(DeviceQueue::Communication, inputs_ready);
            fn();
          });
        else
          fn();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
    return f;
  }
  // Runs `fn` behind everything already queued and waits for it (rethrowing its error); without a
  // thread, runs it here.
  // Its results are then ordered before the compute work queued after run() returns.
  void run(const std::function<void()>& fn) {
    if (threaded_) {
      submit(fn).get();
      join_compute();
    } else {
      fn();
    }
  }
  // The compute queue's later work waits for everything the jobs queued on the communication queue
  // (call it once the jobs' futures are ready: their collectives are then all queued).
  void join_compute() {
    if (!queues_) return;
    const std::shared_ptr<QueueEvent> done = queues_->record_event(DeviceQueue::Communication);
    queues_->queue_wait(DeviceQueue::Compute, done);
  }

 private:
  bool threaded_;
  Backend* queues_;
  std::unique_ptr<DeviceWorker> worker_;
};

}  // namespace dpv
