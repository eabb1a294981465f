#pragma once
// A backend that forwards every op to the CPU backend and counts the copies from its device to
// the host, with their sizes, the copies from the host to its device and the synchronize() calls:
// what a GPU would pay in transfers and synchronisations.
#include <atomic>
#include <memory>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/device.h"

namespace dpv::testing {

struct HostCopyCounter {
  std::atomic<int64_t> copies{0};
  std::atomic<int64_t> bytes{0};
  std::atomic<int64_t> largest{0};  // bytes of the largest single copy
  std::atomic<int64_t> to_device{0};  // copies from the host to the device
  std::atomic<int64_t> synchronizes{0};  // synchronize() calls
  void reset() {
    copies = 0;
    bytes = 0;
    largest = 0;
    to_device = 0;
    synchronizes = 0;
  }
};

class CountingBackend final : public Backend {
 public:
  explicit CountingBackend(std::shared_ptr<HostCopyCounter> counter)
      : inner_(make_cpu_backend()), counter_(std::move(counter)) {}

  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void release(void* ptr, size_t bytes) override { inner_->release(ptr, bytes); }
  void copy(void* dst, const Device* dst_device, const void* src, const Device* src_device, size_t bytes) override {
    if (dst_device == nullptr && src_device != nullptr) {
      ++counter_->copies;
      counter_->bytes += static_cast<int64_t>(bytes);
      int64_t seen = counter_->largest.load();
      while (static_cast<int64_t>(bytes) > seen && !counter_->largest.compare_exchange_weak(seen, static_cast<int64_t>(bytes))) {
      }
    }
    if (dst_device != nullptr && src_device == nullptr) ++counter_->to_device;
    inner_->copy(dst, dst_device, src, src_device, bytes);
  }
  void fill(Tensor& t, double value) override { inner_->fill(t, value); }
  void synchronize() override {
    ++counter_->synchronizes;
    inner_->synchronize();
  }
  double now() override { return inner_->now(); }
  void gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) override {
    inner_->gemm(ta, tb, M, N, K, alpha, a, b, beta, c);
  }
  void add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) override {
    inner_->add_channel_bias(y, bias, N, C, S);
  }
  void sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) override {
    inner_->sum_channels(dy, out, N, C, S, accumulate);
  }
  void add_inplace(Tensor& dst, const Tensor& src) override { inner_->add_inplace(dst, src); }
  void addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) override { inner_->addcmul_inplace(dst, a, b); }
  void scale_inplace(Tensor& dst, double alpha) override { inner_->scale_inplace(dst, alpha); }
  void relu_forward(const Tensor& x, Tensor& y) override { inner_->relu_forward(x, y); }
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override { inner_->relu_backward(y, dy, dx); }
  void im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) override { inner_->im2col(x, col, g); }
  void col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) override { inner_->col2im(col, dx, g); }
  void permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) override {
    inner_->permute_nos(src, dst, A, B, S);
  }
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, Tensor& saved,
                      const ConvGeometry& g) override {
    inner_->conv2d_forward(x, w, bias, y, saved, g);
  }
  void conv2d_backward(const Tensor& x, const Tensor& saved, const Tensor& w, const Tensor& dy, Tensor& dw,
                       bool accumulate_dw, Tensor* dx, const ConvGeometry& g) override {
    inner_->conv2d_backward(x, saved, w, dy, dw, accumulate_dw, dx, g);
  }
  void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) override {
    inner_->bn_stats(x, mean, var_b, N, C, S);
  }
  void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                    Tensor& y, int64_t N, int64_t C, int64_t S) override {
    inner_->bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S);
  }
  void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy, Tensor& sum_dy_xmu,
                          int64_t N, int64_t C, int64_t S) override {
    inner_->bn_backward_reduce(dy, x, mean, sum_dy, sum_dy_xmu, N, C, S);
  }
  void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count, Tensor& dx,
                         int64_t N, int64_t C, int64_t S) override {
    inner_->bn_backward_elemt(dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
  }
  void bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts, double eps,
                       double momentum, Tensor& running_mean, Tensor& running_var, Tensor& mean, Tensor& invstd,
                       int64_t W, int64_t C) override {
    inner_->bn_gather_stats(mean_all, invstd_all, counts, eps, momentum, running_mean, running_var, mean, invstd, W, C);
  }
  void bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) override { inner_->bn_invstd(var_b, eps, invstd); }
  void bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum, Tensor& running_mean,
                         Tensor& running_var) override {
    inner_->bn_update_running(mean, var_b, n, momentum, running_mean, running_var);
  }
  void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                     double grad_scale) override {
    inner_->cross_entropy(logits, target, loss_out, dlogits, grad_scale);
  }
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                  double weight_decay, bool first_step) override {
    inner_->sgd_update(param, grad, momentum_buf, lr, momentum, weight_decay, first_step);
  }
  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const kernels::math::AdamStep& step) override {
    inner_->adam_update(param, grad, exp_avg, exp_avg_sq, step);
  }

 private:
  std::unique_ptr<Backend> inner_;
  std::shared_ptr<HostCopyCounter> counter_;
};

// cpu:k whose devices all count into `counter`.
inline std::shared_ptr<DeviceSet> counting_devices(int k, const std::shared_ptr<HostCopyCounter>& counter) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (int i = 0; i < k; ++i) backends.push_back(std::make_unique<CountingBackend>(counter));
  return DeviceSet::create_simulated(std::move(backends));
}

}  // namespace dpv::testing
