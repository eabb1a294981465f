#pragma once
// The CUDA backend of one device: a compute stream, a communication stream (DDP's per-rank NCCL
// stream, Backend's DeviceQueue::Communication), a memory pool, a cuBLAS handle and a clock of CUDA
// events of its own. Virtual devices (cuda:0x4) are four of these on one GPU: their pools, streams
// and handles are separate, so their work overlaps on the GPU the way separate GPUs' work would
// (one shared pool would let one slot's frees be reused by another only behind the first slot's
// stream, serialising them).
// Private to engine/cuda: the collectives and the runtime info use the stream and ordinal.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "engine/backend.h"
#include "engine/device.h"

namespace dpv {

class CudaBackend final : public Backend {
 public:
  CudaBackend(int ordinal, int slot);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  int ordinal() const { return ordinal_; }
  // The calling thread's current stream of this device: the communication stream inside
  // run_on_queue(Communication), else the compute stream. Every op, copy and allocation uses it,
  // so a collective issued from the communication queue (NCCL on the tensor's stream) runs there.
  cudaStream_t stream() const;
  // This device's memory pool (stream-ordered allocations of this slot only).
  cudaMemPool_t pool() const { return pool_; }
  // Makes this device's GPU current on the calling thread (each device worker, the main thread).
  void activate() const;
  // "cuda:0 (virtual device 2)" for messages.
  std::string where() const;
  // The CUDA backend of a device, or null for host memory and simulated CPU devices.
  static CudaBackend* of(const Device* device);

  void* allocate(size_t bytes) override;
  void release(void* ptr, size_t bytes) override;
  void copy(void* dst, const Device* dst_device, const void* src, const Device* src_device, size_t bytes) override;
  void fill(Tensor& t, double value) override;
  void synchronize() override;
  double now() override;
  std::shared_ptr<QueueEvent> record_event(DeviceQueue queue) override;
  void queue_wait(DeviceQueue queue, const std::shared_ptr<QueueEvent>& event) override;
  void run_on_queue(DeviceQueue queue, const std::function<void()>& fn) override;
  // Waits for both streams: another device's copy reads or writes this one's memory.
  void synchronize_all();

  void gemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) override;
  void add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) override;
  void sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) override;
  void add_inplace(Tensor& dst, const Tensor& src) override;
  void addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) override;
  void scale_inplace(Tensor& dst, double alpha) override;
  void relu_forward(const Tensor& x, Tensor& y) override;
  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override;
  void im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) override;
  void col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) override;
  void permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) override;

  // Batch norm, loss and optimizer: cuda_backend_norm.cpp.
  void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) override;
  void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                    Tensor& y, int64_t N, int64_t C, int64_t S) override;
  void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy, Tensor& sum_dy_xmu,
                          int64_t N, int64_t C, int64_t S) override;
  void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count, Tensor& dx,
                         int64_t N, int64_t C, int64_t S) override;
  void bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts, double eps,
                       double momentum, Tensor& running_mean, Tensor& running_var, Tensor& mean, Tensor& invstd,
                       int64_t R, int64_t C) override;
  void bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) override;
  void bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum, Tensor& running_mean,
                         Tensor& running_var) override;
  void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                     double grad_scale) override;
  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                  double weight_decay, bool first_step) override;
  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const kernels::math::AdamStep& step) override;

  // Checks that t is defined, lives on this device (this GPU and this virtual slot: another slot's
  // tensor is written by another stream, so reading it here would race) and holds at least `numel`
  // elements of `dtype`.
  void expect(const Tensor& t, const char* op, const char* name, DType dtype, int64_t numel) const;

 private:
  cudaStream_t stream_of(DeviceQueue queue) const { return queue == DeviceQueue::Compute ? stream_ : comm_stream_; }

  int ordinal_;
  int slot_;
  cudaStream_t stream_ = nullptr;       // compute
  cudaStream_t comm_stream_ = nullptr;  // communication
  cudaMemPool_t pool_ = nullptr;
  cublasHandle_t blas_ = nullptr;
  std::mutex blas_mutex_;  // a cuBLAS handle must not be used by two threads at once
  // Clock: seconds = anchor_seconds_ + elapsed(anchor_, tick); re-anchored on every read so the
  // float milliseconds of cudaEventElapsedTime never span long intervals.
  std::mutex clock_mutex_;
  cudaEvent_t anchor_ = nullptr;
  cudaEvent_t tick_ = nullptr;
  double anchor_seconds_ = 0;
  std::mutex loss_mutex_;          // guards host_info_
  int64_t* host_info_ = nullptr;  // pinned, 2 values: cross-entropy's invalid-target report
};

}  // namespace dpv
