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

#include "engine/device.h"

namespace dpv {

class CommThread {
 public:
  explicit CommThread(bool threaded = true) : threaded_(threaded) {}
  bool threaded() const { return threaded_; }

  // Queues `fn` on the thread; the future carries its exception, if any.
  std::shared_future<void> submit(std::function<void()> fn) {
    auto done = std::make_shared<std::promise<void>>();
    std::shared_future<void> f = done->get_future().share();
    if (!worker_) worker_ = std::make_unique<DeviceWorker>();
    worker_->submit([fn = std::move(fn), done] {
      try {
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
  void run(const std::function<void()>& fn) {
    if (threaded_)
      submit(fn).get();
    else
      fn();
  }

 private:
  bool threaded_;
  std::unique_ptr<DeviceWorker> worker_;
};

}  // namespace dpv
