#pragma once
// A stand-in GPU for machines without one: a Backend that forwards every op to an inner backend
// (the CPU backend, or a CountingBackend around it) but runs it LATER, on a worker thread per queue
// (compute and communication), the way a GPU runs a stream's kernels after the launch returned.
// Its devices are of kind Cuda (DeviceSet::create_simulated_gpus), so the engine takes its GPU
// paths: DDP's communication thread and queue, events between the queues, synchronous copies.
//
// What it catches: work on one queue that reads what the other queue (or the host) writes without
// an event or a synchronisation in between runs on another thread with no happens-before, so it is
// a data race under ThreadSanitizer and, most of the time, wrong values in a bit-for-bit comparison.
// What it does not: a free that a real stream would order before a later use (the queued ops hold
// their tensors until they ran, as if every tensor were recorded on every stream that used it).
#include <algorithm>
#include <condition_variable>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/device.h"

namespace dpv::testing {

// One queue of work (a stream): ops run in submission order on a thread of their own. The first
// error an op throws is kept and thrown by the next drain, as CUDA reports a kernel's error late.
class FakeQueue {
 public:
  void submit(std::function<void()> op) {
    worker_.submit([this, op = std::move(op)] {
      try {
        op();
      } catch (...) {
        std::lock_guard lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
    });
  }
  // Waits until every op submitted before the call has run (cudaStreamSynchronize).
  void drain() {
    auto done = std::make_shared<std::promise<void>>();
    std::future<void> ran = done->get_future();
    worker_.submit([done] { done->set_value(); });
    ran.get();
    std::exception_ptr error;
    {
      std::lock_guard lock(error_mutex_);
      std::swap(error, error_);
    }
    if (error) std::rethrow_exception(error);
  }

 private:
  std::mutex error_mutex_;
  std::exception_ptr error_;
  DeviceWorker worker_;  // last: its thread stops (running what is left) before the rest goes
};

// A cudaEvent_t: fired when the queue it was recorded on reaches it.
class FakeEvent final : public QueueEvent {
 public:
  void fire() {
    {
      std::lock_guard lock(mutex_);
      fired_ = true;
    }
    cv_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    cv_.wait(lock, [this] { return fired_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool fired_ = false;
};

class FakeGpuBackend final : public Backend {
 public:
  explicit FakeGpuBackend(std::unique_ptr<Backend> inner = make_cpu_backend()) : inner_(std::move(inner)) {}
  ~FakeGpuBackend() override {
    // Whatever is still queued runs before the queues go (their destructors join the threads).
    try {
      compute_.drain();
      comm_.drain();
    } catch (...) {  // a destructor reports nothing; the test that queued the op failed already
    }
  }

  // --- queues
  std::shared_ptr<QueueEvent> record_event(DeviceQueue queue) override {
    auto event = std::make_shared<FakeEvent>();
    of(queue).submit([event] { event->fire(); });
    return event;
  }
  void queue_wait(DeviceQueue queue, const std::shared_ptr<QueueEvent>& event) override {
    if (!event) return;
    // The queue's thread blocks until the event fired: the ops after it run after the event's ops.
    auto fake = std::dynamic_pointer_cast<FakeEvent>(event);
    if (!fake) throw Error("a fake GPU waits only for its own events");
    of(queue).submit([fake] { fake->wait(); });
  }
  void run_on_queue(DeviceQueue queue, const std::function<void()>& fn) override {
    auto& current = current_queues();
    const size_t depth = current.size();
    current.push_back({this, queue});
    try {
      fn();
    } catch (...) {
      current.resize(depth);
      throw;
    }
    current.resize(depth);
  }

  // A test's gate: `queue` runs nothing after this until `open` is ready.
  void hold(DeviceQueue queue, std::shared_future<void> open) {
    of(queue).submit([open] { open.wait(); });
  }

  // --- memory: allocations at once (cudaMallocAsync hands out the pointer at once), frees in the
  // order of the current queue.
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* ptr, size_t bytes) override {
    try {
      current().submit([inner = inner_.get(), ptr, bytes] { inner->release(ptr, bytes); });
    } catch (...) {  // called from a destructor: the memory leaks rather than anything throwing
    }
  }
  void copy(void* dst, const Device* dst_device, const void* src, const Device* src_device, size_t bytes) override {
    // As CudaBackend::copy: another device's queued work is done before its bytes are used (from
    // the communication queue, the other's communication queue only; else both), and the copy is
    // synchronous for the caller (the host data is readable, the source reusable).
    const bool from_comm = &current() == &comm_;
    for (const Device* other : {dst_device, src_device})
      if (auto* fake = of_device(other); fake && fake != this) {
        if (!from_comm) fake->compute_.drain();
        fake->comm_.drain();
      }
    current().submit([=, inner = inner_.get()] { inner->copy(dst, dst_device, src, src_device, bytes); });
    current().drain();
  }
  void fill(Tensor& t, double value) override {
    later([=, t = t](Backend& be) mutable { be.fill(t, value); });
  }
  void synchronize() override {
    inner_->synchronize();  // counted by a CountingBackend
    current().drain();
  }
  double now() override {
    current().drain();  // CUDA's clock is an event the host waits for
    return inner_->now();
  }

  // --- dense algebra and element-wise ops: queued.
  void gemm(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) override {
    later([=, c = c](Backend& be) mutable { be.gemm(ta, tb, rows, cols, inner, alpha, a, b, beta, c); });
  }
  void add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) override {
    later([=, y = y](Backend& be) mutable { be.add_channel_bias(y, bias, N, C, S); });
  }
  void sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) override {
    later([=, out = out](Backend& be) mutable { be.sum_channels(dy, out, N, C, S, accumulate); });
  }
  void add_inplace(Tensor& dst, const Tensor& src) override {
    later([=, dst = dst](Backend& be) mutable { be.add_inplace(dst, src); });
  }
  void addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) override {
    later([=, dst = dst](Backend& be) mutable { be.addcmul_inplace(dst, a, b); });
  }
  void scale_inplace(Tensor& dst, double alpha) override {
    later([=, dst = dst](Backend& be) mutable { be.scale_inplace(dst, alpha); });
  }
  void relu_forward(const Tensor& x, Tensor& y) override {
    later([=, y = y](Backend& be) mutable { be.relu_forward(x, y); });
  }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    later([=, dx = dx](Backend& be) mutable { be.relu_backward(y, dy, dx); });
  }
  void im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) override {
    later([=, col = col](Backend& be) mutable { be.im2col(x, col, g); });
  }
  void col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) override {
    later([=, dx = dx](Backend& be) mutable { be.col2im(col, dx, g); });
  }
  void permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) override {
    later([=, dst = dst](Backend& be) mutable { be.permute_nos(src, dst, A, B, S); });
  }
  // The convolutions may give `saved` a tensor of their own (the caller's object): they run once
  // the queue has drained, on the calling thread, as the CPU backend runs them (same bits).
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, Tensor& saved,
                      const ConvGeometry& g) override {
    current().drain();
    inner_->conv2d_forward(x, w, bias, y, saved, g);
  }
  void conv2d_backward(const Tensor& x, const Tensor& saved, const Tensor& w, const Tensor& dy, Tensor& dw,
                       bool accumulate_dw, Tensor* dx, const ConvGeometry& g) override {
    current().drain();
    inner_->conv2d_backward(x, saved, w, dy, dw, accumulate_dw, dx, g);
  }

  // --- batch norm, loss, optimizer: queued (the loss checks its targets on the host, as the CUDA
  // backend reads its invalid-target report back, so it runs once the queue has drained).
  void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) override {
    later([=, mean = mean, var_b = var_b](Backend& be) mutable { be.bn_stats(x, mean, var_b, N, C, S); });
  }
  void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                    Tensor& y, int64_t N, int64_t C, int64_t S) override {
    later([=, y = y](Backend& be) mutable { be.bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S); });
  }
  void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy, Tensor& sum_dy_xmu,
                          int64_t N, int64_t C, int64_t S) override {
    later([=, sum_dy = sum_dy, sum_dy_xmu = sum_dy_xmu](Backend& be) mutable {
      be.bn_backward_reduce(dy, x, mean, sum_dy, sum_dy_xmu, N, C, S);
    });
  }
  void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count, Tensor& dx,
                         int64_t N, int64_t C, int64_t S) override {
    later([=, dx = dx](Backend& be) mutable {
      be.bn_backward_elemt(dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
    });
  }
  void bn_normalize_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                         const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S) override {
    later([=, y = y](Backend& be) mutable { be.bn_normalize_relu(x, mean, invstd, gamma, beta, y, N, C, S); });
  }
  void bn_relu_backward(const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                        const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu, double count, Tensor& dx, int64_t N,
                        int64_t C, int64_t S) override {
    later([=, sum_dy = sum_dy, sum_dy_xmu = sum_dy_xmu, dx = dx](Backend& be) mutable {
      be.bn_relu_backward(dy, y, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
    });
  }
  void bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts, double eps,
                       double momentum, Tensor& running_mean, Tensor& running_var, Tensor& mean, Tensor& invstd,
                       int64_t R, int64_t C) override {
    later([=, running_mean = running_mean, running_var = running_var, mean = mean, invstd = invstd](Backend& be) mutable {
      be.bn_gather_stats(mean_all, invstd_all, counts, eps, momentum, running_mean, running_var, mean, invstd, R, C);
    });
  }
  void bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) override {
    later([=, invstd = invstd](Backend& be) mutable { be.bn_invstd(var_b, eps, invstd); });
  }
  void bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum, Tensor& running_mean,
                         Tensor& running_var) override {
    later([=, running_mean = running_mean, running_var = running_var](Backend& be) mutable {
      be.bn_update_running(mean, var_b, n, momentum, running_mean, running_var);
    });
  }
  void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                     double grad_scale) override {
    current().drain();
    inner_->cross_entropy(logits, target, loss_out, dlogits, grad_scale);
  }
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                  double weight_decay, bool first_step) override {
    later([=, param = param, momentum_buf = momentum_buf](Backend& be) mutable {
      be.sgd_update(param, grad, momentum_buf, lr, momentum, weight_decay, first_step);
    });
  }
  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const kernels::math::AdamStep& step) override {
    later([=, param = param, exp_avg = exp_avg, exp_avg_sq = exp_avg_sq](Backend& be) mutable {
      be.adam_update(param, grad, exp_avg, exp_avg_sq, step);
    });
  }

 private:
  struct CurrentQueue {
    const FakeGpuBackend* backend;
    DeviceQueue queue;
  };
  // The calling thread's run_on_queue nesting (innermost last), over every fake device.
  static std::vector<CurrentQueue>& current_queues() {
    thread_local std::vector<CurrentQueue> queues;
    return queues;
  }
  FakeQueue& of(DeviceQueue queue) { return queue == DeviceQueue::Compute ? compute_ : comm_; }
  FakeQueue& current() {
    const auto& queues = current_queues();
    for (auto it = queues.rbegin(); it != queues.rend(); ++it)
      if (it->backend == this) return of(it->queue);
    return compute_;
  }
  static FakeGpuBackend* of_device(const Device* device) {
    return device ? dynamic_cast<FakeGpuBackend*>(&device->backend()) : nullptr;
  }
  // Queues `op` on the current queue; it runs on the inner backend once the queue reaches it.
  template <typename Op>
  void later(Op op) {
    current().submit([inner = inner_.get(), op = std::move(op)]() mutable { op(*inner); });
  }
  std::unique_ptr<Backend> inner_;
  FakeQueue compute_;
  FakeQueue comm_;
};

// cuda:0xK of fake GPUs, each over `make_inner()` (the CPU backend by default).
inline std::shared_ptr<DeviceSet> fake_gpu_devices(int k, const std::function<std::unique_ptr<Backend>()>& make_inner =
                                                              [] { return make_cpu_backend(); }) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (int i = 0; i < k; ++i) backends.push_back(std::make_unique<FakeGpuBackend>(make_inner()));
  return DeviceSet::create_simulated_gpus(std::move(backends));
}

}  // namespace dpv::testing
