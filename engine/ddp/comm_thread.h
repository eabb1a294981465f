#pragma once
// One rank's communication thread. Every collective a DDP rank issues (construction broadcasts,
// buffer broadcasts, bucket all-reduces, SyncBatchNorm's all-gather and all-reduce) goes through
// this one FIFO, so each rank issues its collectives in the same order as every other rank (what
// torch.distributed requires) while the bucket all-reduces still overlap the rest of the backward.
#include <exception>
#include <functional>
#include <future>
#include <memory>

#include "engine/device.h"

namespace dpv {

class CommThread {
 public:
  // Queues `fn`; the future carries its exception, if any.
  std::shared_future<void> submit(std::function<void()> fn) {
    auto done = std::make_shared<std::promise<void>>();
    std::shared_future<void> f = done->get_future().share();
    worker_.submit([fn = std::move(fn), done] {
      try {
        fn();
        done->set_value();
      } catch (...) {
        done->set_exception(std::current_exception());
      }
    });
    return f;
  }
  // Queues `fn` behind everything already queued and waits for it (rethrowing its error).
  void run(std::function<void()> fn) { submit(std::move(fn)).get(); }

 private:
  DeviceWorker worker_;
};

}  // namespace dpv
