// The CUDA backend, part two: batch norm (plain and SyncBatchNorm's merge), cross-entropy and SGD.
#include <string>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/cuda_check.h"
#include "engine/dtype_dispatch.h"
#include "engine/error.h"
#include "engine/index.h"
#include "kernels/bn_backward_elemt.h"
#include "kernels/bn_backward_reduce.h"
#include "kernels/bn_gather_stats.h"
#include "kernels/bn_invstd.h"
#include "kernels/bn_normalize.h"
#include "kernels/bn_stats.h"
#include "kernels/bn_update_running.h"
#include "kernels/cross_entropy.h"
#include "kernels/adam_update.h"
#include "kernels/sgd_update.h"

namespace dpv {

namespace {

// Typed device pointer of an optional tensor (null when undefined: affine=False, no running stats).
template <typename T>
T* optional_data(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

}  // namespace

void CudaBackend::bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) {
  const DType dt = x.dtype();
  expect(x, "batch_norm_stats", "input", dt, N * C * S);
  expect(mean, "batch_norm_stats", "mean", dt, C);
  expect(var_b, "batch_norm_stats", "var", dt, C);
  activate();
  dispatch_float(dt, "batch_norm_stats", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_stats(x.data<T>(), mean.data<T>(), var_b.data<T>(), N, C, S, stream()));
  });
}

void CudaBackend::bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                               const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S) {
  const DType dt = x.dtype();
  expect(x, "batch_norm_elemt", "input", dt, N * C * S);
  expect(y, "batch_norm_elemt", "output", dt, N * C * S);
  expect(mean, "batch_norm_elemt", "mean", dt, C);
  expect(invstd, "batch_norm_elemt", "invstd", dt, C);
  if (gamma.defined()) expect(gamma, "batch_norm_elemt", "weight", dt, C);
  if (beta.defined()) expect(beta, "batch_norm_elemt", "bias", dt, C);
  activate();
  dispatch_float(dt, "batch_norm_elemt", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_normalize(x.data<T>(), mean.data<T>(), invstd.data<T>(), optional_data<T>(gamma),
                                         optional_data<T>(beta), y.data<T>(), N, C, S, stream()));
  });
}

void CudaBackend::bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy,
                                     Tensor& sum_dy_xmu, int64_t N, int64_t C, int64_t S) {
  const DType dt = x.dtype();
  expect(dy, "batch_norm_backward_reduce", "grad_output", dt, N * C * S);
  expect(x, "batch_norm_backward_reduce", "input", dt, N * C * S);
  expect(mean, "batch_norm_backward_reduce", "mean", dt, C);
  expect(sum_dy, "batch_norm_backward_reduce", "sum_dy", dt, C);
  expect(sum_dy_xmu, "batch_norm_backward_reduce", "sum_dy_xmu", dt, C);
  activate();
  dispatch_float(dt, "batch_norm_backward_reduce", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_backward_reduce(dy.data<T>(), x.data<T>(), mean.data<T>(), sum_dy.data<T>(),
                                               sum_dy_xmu.data<T>(), N, C, S, stream()));
  });
}

void CudaBackend::bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                                    const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count,
                                    Tensor& dx, int64_t N, int64_t C, int64_t S) {
  const DType dt = x.dtype();
  expect(dy, "batch_norm_backward_elemt", "grad_output", dt, N * C * S);
  expect(x, "batch_norm_backward_elemt", "input", dt, N * C * S);
  expect(dx, "batch_norm_backward_elemt", "grad_input", dt, N * C * S);
  expect(mean, "batch_norm_backward_elemt", "mean", dt, C);
  expect(invstd, "batch_norm_backward_elemt", "invstd", dt, C);
  expect(sum_dy, "batch_norm_backward_elemt", "sum_dy", dt, C);
  expect(sum_dy_xmu, "batch_norm_backward_elemt", "sum_dy_xmu", dt, C);
  if (gamma.defined()) expect(gamma, "batch_norm_backward_elemt", "weight", dt, C);
  if (!(count > 0)) throw Error("batch_norm_backward_elemt: the total count must be positive, got " + std::to_string(count));
  activate();
  dispatch_float(dt, "batch_norm_backward_elemt", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_backward_elemt(dy.data<T>(), x.data<T>(), mean.data<T>(), invstd.data<T>(),
                                              optional_data<T>(gamma), sum_dy.data<T>(), sum_dy_xmu.data<T>(), count,
                                              dx.data<T>(), N, C, S, stream()));
  });
}

void CudaBackend::bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts,
                                  double eps, double momentum, Tensor& running_mean, Tensor& running_var, Tensor& mean,
                                  Tensor& invstd, int64_t R, int64_t C) {
  const DType dt = mean.dtype();
  if (R < 1 || R > kernels::kMaxGatherRanks)
    throw Error("batch_norm_gather_stats_with_counts: " + std::to_string(R) + " ranks; the CUDA backend takes 1 to " +
                std::to_string(kernels::kMaxGatherRanks));
  if (static_cast<int64_t>(counts.size()) < R)
    throw Error("batch_norm_gather_stats_with_counts: " + std::to_string(counts.size()) + " counts for " +
                std::to_string(R) + " ranks");
  expect(mean_all, "batch_norm_gather_stats_with_counts", "mean_all", dt, R * C);
  expect(invstd_all, "batch_norm_gather_stats_with_counts", "invstd_all", dt, R * C);
  expect(mean, "batch_norm_gather_stats_with_counts", "mean", dt, C);
  expect(invstd, "batch_norm_gather_stats_with_counts", "invstd", dt, C);
  if (running_mean.defined() != running_var.defined())
    throw Error("batch_norm_gather_stats_with_counts: running_mean and running_var must both be given or both be absent");
  if (running_mean.defined()) {
    expect(running_mean, "batch_norm_gather_stats_with_counts", "running_mean", dt, C);
    expect(running_var, "batch_norm_gather_stats_with_counts", "running_var", dt, C);
  }
  activate();
  dispatch_float(dt, "batch_norm_gather_stats_with_counts", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_gather_stats(mean_all.data<T>(), invstd_all.data<T>(), counts.data(), R, C, eps,
                                            momentum, optional_data<T>(running_mean), optional_data<T>(running_var),
                                            mean.data<T>(), invstd.data<T>(), stream()));
  });
}

void CudaBackend::bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) {
  const DType dt = var_b.dtype();
  expect(var_b, "batch_norm", "var", dt, var_b.numel());
  expect(invstd, "batch_norm", "invstd", dt, var_b.numel());
  activate();
  dispatch_float(dt, "batch_norm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_invstd(var_b.data<T>(), eps, invstd.data<T>(), var_b.numel(), stream()));
  });
}

void CudaBackend::bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum,
                                    Tensor& running_mean, Tensor& running_var) {
  const DType dt = mean.dtype();
  const int64_t C = mean.numel();
  expect(var_b, "batch_norm", "var", dt, C);
  expect(running_mean, "batch_norm", "running_mean", dt, C);
  expect(running_var, "batch_norm", "running_var", dt, C);
  activate();
  dispatch_float(dt, "batch_norm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::bn_update_running(mean.data<T>(), var_b.data<T>(), n, momentum, running_mean.data<T>(),
                                              running_var.data<T>(), C, stream()));
  });
}

void CudaBackend::cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                                double grad_scale) {
  const DType dt = logits.dtype();
  if (logits.ndim() != 2) throw Error("cross_entropy: expected logits [N, K], got " + shape_str(logits.shape()));
  const int64_t N = logits.dim(0), K = logits.dim(1);
  expect(target, "cross_entropy", "target", DType::Int64, N);
  expect(loss_out, "cross_entropy", "loss", dt, 1);
  expect(dlogits, "cross_entropy", "grad_logits", dt, N * K);
  activate();
  // Stream-ordered scratch (cudaMallocAsync from the pool), freed in stream order on every path:
  // plain cudaMalloc/cudaFree would synchronise the whole device.
  struct Workspace {
    void* ptr = nullptr;
    cudaStream_t stream;
    ~Workspace() {
      if (ptr && cudaFreeAsync(ptr, stream) != cudaSuccess) cudaGetLastError();
    }
  } workspace{nullptr, stream()};
  DPV_CUDA_CHECK(cudaMallocFromPoolAsync(&workspace.ptr, ix(kernels::cross_entropy_workspace_bytes(N)), pool_, stream()));
  dispatch_float(dt, "cross_entropy", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::cross_entropy(logits.data<T>(), target.data<int64_t>(), loss_out.data<T>(),
                                          dlogits.data<T>(), N, K, grad_scale, workspace.ptr, stream()));
  });
  // A kernel cannot throw: it reports the first invalid target, read back here.
  std::lock_guard<std::mutex> lock(loss_mutex_);
  DPV_CUDA_CHECK(cudaMemcpyAsync(host_info_, kernels::cross_entropy_info(workspace.ptr, N), 2 * sizeof(int64_t),
                                 cudaMemcpyDeviceToHost, stream()));
  DPV_CUDA_CHECK(cudaStreamSynchronize(stream()));
  if (host_info_[0] >= 0) throw Error("Target " + std::to_string(host_info_[1]) + " is out of bounds.", ErrorClass::IndexError);
}

void CudaBackend::sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                             double weight_decay, bool first_step) {
  const DType dt = param.dtype();
  const int64_t n = param.numel();
  expect(param, "sgd", "param", dt, n);
  expect(grad, "sgd", "grad", dt, n);
  if (momentum != 0) expect(momentum_buf, "sgd", "momentum_buffer", dt, n);
  activate();
  dispatch_float(dt, "sgd", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    T* buf = momentum != 0 ? momentum_buf.data<T>() : nullptr;
    DPV_CUDA_CHECK(kernels::sgd_update(param.data<T>(), grad.data<T>(), buf, n, lr, momentum, weight_decay, first_step,
                                       stream()));
  });
}

void CudaBackend::adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                              const kernels::math::AdamStep& step) {
  const DType dt = param.dtype();
  const int64_t n = param.numel();
  expect(param, "adam", "param", dt, n);
  expect(grad, "adam", "grad", dt, n);
  expect(exp_avg, "adam", "exp_avg", dt, n);
  expect(exp_avg_sq, "adam", "exp_avg_sq", dt, n);
  activate();
  dispatch_float(dt, "adam", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    DPV_CUDA_CHECK(kernels::adam_update(param.data<T>(), grad.data<T>(), exp_avg.data<T>(), exp_avg_sq.data<T>(), n,
                                        step, stream()));
  });
}

}  // namespace dpv
