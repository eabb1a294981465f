#pragma once
// One interface per device kind. The CPU backend (OpenBLAS + plain loops) is the reference every
// CUDA op is tested against. All tensors are contiguous row-major and live on the backend's device;
// outputs are preallocated by the caller. Float ops take float32 or float64 (all operands alike).
//
// Dimension letters, one meaning each across the engine (shape comments, parameter names):
//   N  batch: the samples of a batch or of one replica's chunk (rows of an activation)
//   C  channels: a BatchNorm's or a convolution's channels, a Linear layer's features
//   H, W  height and width of an image;  OH, OW  those of a convolution's output
//   S  spatial positions per channel (H*W for images, 1 after a Linear layer): x is [N, C, S]
//   K  classes: the logits are [N, K]
//   R  replicas: the devices (ranks) taking part in a step or a collective
//   L  layers of a model
//   kh, kw  a convolution's kernel size
// A matrix product's sizes are named rows, cols and inner (never M/N/K, which would reuse N and K);
// permute_nos moves generic axes [A, B, S] -> [B, A, S].
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "engine/tensor.h"
#include "kernels/math/adam.h"
#include "kernels/math/cross_entropy.h"
#include "kernels/math/indexing.h"

namespace dpv {

// A device's two queues of work, as PyTorch's DDP on a GPU uses them: the compute stream every op
// goes to, and a communication stream per rank the collectives run on, so a bucket's all-reduce
// overlaps the rest of the backward. The two are ordered only by events (QueueEvent).
enum class DeviceQueue { Compute, Communication };

// A point in one queue's work (a cudaEvent_t on CUDA): the work queued before it was recorded.
// Devices whose ops are done when they return (the CPU) have none: their events are null.
class QueueEvent {
 public:
  virtual ~QueueEvent() = default;
};

// nn.CrossEntropyLoss's default ignore_index (-100): a row with this target is left out of the loss.
using kernels::math::kIgnoreIndex;

class Backend {
 public:
  virtual ~Backend() = default;

  // --- memory
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* ptr, size_t bytes) = 0;
  // Copies bytes between this device and the host or another device (either side may be host).
  virtual void copy(void* dst, const Device* dst_device, const void* src, const Device* src_device,
                    size_t bytes) = 0;
  virtual void fill(Tensor& t, double value) = 0;
  // Waits for all queued work on this device (no-op on CPU).
  virtual void synchronize() = 0;
  // Seconds on this device's clock, for stage timings: wall time on CPU; CUDA events on GPUs.
  virtual double now() = 0;

  // --- queues (see DeviceQueue). Ops, copies, allocations and synchronize() go to the calling
  // thread's current queue of this device: Compute, unless the thread is inside run_on_queue.
  // The defaults are a device whose work is done when the op returns (the CPU): one queue, null
  // events, nothing to wait for.
  // Records an event at the end of the work queued so far on `queue`; null when nothing can be pending.
  virtual std::shared_ptr<QueueEvent> record_event(DeviceQueue queue) {
    (void)queue;
    return nullptr;
  }
  // Work queued on `queue` after this call starts only once `event`'s work has finished; the host
  // does not wait. A null event waits for nothing.
  virtual void queue_wait(DeviceQueue queue, const std::shared_ptr<QueueEvent>& event) {
    (void)queue;
    (void)event;
  }
  // Runs fn on the calling thread with `queue` as its current queue of this device (the way
  // c10::cuda::CUDAStreamGuard makes a stream current), then restores the previous one.
  virtual void run_on_queue(DeviceQueue queue, const std::function<void()>& fn) {
    (void)queue;
    fn();
  }

  // --- dense algebra
  // c[rows,cols] = alpha * op(a) @ op(b) + beta * c, op = transpose when the flag is set.
  // a is [rows,inner] (or [inner,rows] when trans_a), b is [inner,cols] (or [cols,inner] when trans_b).
  virtual void gemm(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha,
                    const Tensor& a, const Tensor& b, double beta, Tensor& c) = 0;
  // y[N, C, S] += bias[C] broadcast over N and S (Linear: S = 1; Conv2d: S = H*W).
  virtual void add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) = 0;
  // out[C] (+)= sum over N and S of dy[N, C, S]; accumulate adds to out instead of overwriting.
  virtual void sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) = 0;
  // dst += src (same shape; float32, float64 or int64): reduce-add, gradient accumulation,
  // BatchNorm's num_batches_tracked.
  virtual void add_inplace(Tensor& dst, const Tensor& src) = 0;
  // dst += a * b elementwise (torch.addcmul_ with value 1): BatchNorm's weight gradient.
  virtual void addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) = 0;
  // dst *= alpha
  virtual void scale_inplace(Tensor& dst, double alpha) = 0;

  // --- activations
  virtual void relu_forward(const Tensor& x, Tensor& y) = 0;
  // dx = 0 where y <= 0 else dy (threshold_backward: a NaN in y passes dy through)
  virtual void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) = 0;

  // --- convolution helpers: x [N, C, H, W] -> col [N, C*kh*kw, OH*OW] and back (col2im adds)
  using ConvGeometry = kernels::math::ConvShape;  // {N, C, H, W, kh, kw, stride, pad, OH, OW}
  virtual void im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) = 0;
  virtual void col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) = 0;  // dx is zeroed first
  // [N, O, S] <-> [O, N, S] transposes used around the conv GEMMs.
  virtual void permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) = 0;  // [A,B,S] -> [B,A,S]

  // --- nn.Conv2d (groups 1, no dilation) on x [N, C, H, W], w [O, C, kh, kw] and bias [O] (null:
  // none) into y [N, O, OH, OW]. The defaults (engine/conv2d_im2col.cpp) are im2col + one GEMM per
  // pass, the reference, with add_channel_bias for the bias; a backend may override them with a
  // library's kernels (the CPU backend runs oneDNN in float32, the bias inside its convolution).
  // `saved` carries what backward needs besides x and w (the im2col path keeps its columns there;
  // an override may leave it empty). The bias gradient is the layer's sum_channels.
  virtual void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, Tensor& saved,
                              const ConvGeometry& g);
  // dw[O, C, kh, kw] = (accumulate_dw ? dw : 0) + the weight gradient; when dx is given,
  // *dx[N, C, H, W] = the input gradient (overwritten).
  virtual void conv2d_backward(const Tensor& x, const Tensor& saved, const Tensor& w, const Tensor& dy, Tensor& dw,
                               bool accumulate_dw, Tensor* dx, const ConvGeometry& g);

  // --- batch norm over x [N, C, S] (N = batch, S = spatial), per channel c.
  // mean[C] and var_b[C] (biased) of the local input, two-pass, accumulated in double.
  virtual void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) = 0;
  // y = (x - mean) * invstd * gamma + beta
  virtual void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                            const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S) = 0;
  // sum_dy[C] = sum dy;  sum_dy_xmu[C] = sum dy * (x - mean)
  virtual void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy,
                                  Tensor& sum_dy_xmu, int64_t N, int64_t C, int64_t S) = 0;
  // dx = (dy - sum_dy/n - (x - mean) * invstd^2 * sum_dy_xmu/n) * invstd * gamma, n = total count
  virtual void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                 const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                                 double count, Tensor& dx, int64_t N, int64_t C, int64_t S) = 0;
  // BatchNorm followed by ReLU in one pass over memory each way (the model's layers stay two
  // stages; the ReLU's stage then passes its tensor through). The defaults (engine/bn_relu_default.cpp)
  // compose the ops above; the CPU backend fuses the loops, with the same arithmetic.
  // y = relu((x - mean) * invstd * gamma + beta)
  virtual void bn_normalize_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                                 const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S);
  // With g = (y > 0 ? dy : 0) for y the fused forward's output (ReLU's backward): sum_dy[C] and
  // sum_dy_xmu[C] as bn_backward_reduce of g, then dx as bn_backward_elemt of g with `count`.
  virtual void bn_relu_backward(const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& mean,
                                const Tensor& invstd, const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu,
                                double count, Tensor& dx, int64_t N, int64_t C, int64_t S);
  // SyncBatchNorm merge (batch_norm_gather_stats_with_counts): mean_all/invstd_all [R, C],
  // counts [R] (float64, host-readable); writes mean[C], invstd[C] and updates running stats
  // with the total count for the unbiased variance.
  virtual void bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts,
                               double eps, double momentum, Tensor& running_mean, Tensor& running_var,
                               Tensor& mean, Tensor& invstd, int64_t R, int64_t C) = 0;
  // invstd[C] = 1/sqrt(var_b + eps); running stats update of plain BatchNorm with n/(n-1).
  virtual void bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) = 0;
  virtual void bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum,
                                 Tensor& running_mean, Tensor& running_var) = 0;

  // --- loss: mean cross-entropy of logits [N, K] against int64 targets [N], nn.CrossEntropyLoss's
  // defaults: rows whose target is kIgnoreIndex (-100) are left out (their dlogits rows are 0) and
  // the mean is over the other n rows; n = 0 gives a nan loss, as PyTorch does.
  // loss_out is a one-element tensor; dlogits = (softmax - onehot) * grad_scale / n.
  // Throws dpv::Error (IndexError) for a target outside [0, K) other than kIgnoreIndex.
  virtual void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                             double grad_scale) = 0;

  // --- optimizer (torch.optim.SGD, dampening 0, no nesterov):
  // d = grad + wd * p; buf = first ? d : momentum * buf + d; p -= lr * (momentum ? buf : d)
  virtual void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                          double weight_decay, bool first_step) = 0;
  // torch.optim.Adam / AdamW (kernels/math/adam.h): param, exp_avg and exp_avg_sq updated in place;
  // `step` holds the hyper-parameters and the parameter's step count after this step's increment.
  virtual void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                           const kernels::math::AdamStep& step) = 0;
};

// Backends are made by engine/backend_registry.h (make_cpu_backend, make_cuda_backend).

}  // namespace dpv
