#include <cuda_runtime.h>

#include "kernels/bn_gather_stats.h"
#include "kernels/common.cuh"

namespace dpv::kernels {
namespace {

struct Counts {
  double value[kMaxGatherRanks];
};

template <typename T>
__global__ void bn_gather_stats_kernel(const T* mean_all, const T* invstd_all, Counts counts, int64_t R, int64_t C,
                                       double eps, double momentum, T* running_mean, T* running_var, T* mean,
                                       T* invstd) {
  for (int64_t c = detail::global_thread(); c < C; c += detail::grid_threads()) {
    double avg = 0.0, var_n = 0.0, n = 0.0;
    for (int64_t j = 0; j < R; ++j) {
      const double count = counts.value[j];
      if (count < 1.0) continue;
      const double std_j = 1.0 / static_cast<double>(invstd_all[j * C + c]);
      const double mean_j = static_cast<double>(mean_all[j * C + c]);
      const double v = (std_j * std_j - eps) * count;
      const double f = 1.0 / (n + count);
      const double delta = avg - mean_j;
      var_n += v + delta * delta * n * count * f;
      avg = n * f * avg + count * f * mean_j;
      n += count;
    }
    mean[c] = static_cast<T>(avg);
    invstd[c] = static_cast<T>(1.0 / sqrt(var_n / n + eps));
    if (running_mean) running_mean[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_mean[c]) + momentum * avg);
    if (running_var)
      running_var[c] = static_cast<T>((1.0 - momentum) * static_cast<double>(running_var[c]) + momentum * var_n / (n - 1.0));
  }
}

template <typename T>
int launch(const T* mean_all, const T* invstd_all, const double* counts_host, int64_t R, int64_t C, double eps,
           double momentum, T* running_mean, T* running_var, T* mean, T* invstd, void* stream) {
  if (R < 1 || R > kMaxGatherRanks) return static_cast<int>(cudaErrorInvalidValue);
  if (C <= 0) return 0;
  Counts counts{};
  for (int64_t j = 0; j < R; ++j) counts.value[j] = counts_host[j];
  detail::clear_earlier_error();
  bn_gather_stats_kernel<T><<<detail::grid_for(C), detail::kThreads, 0, detail::as_stream(stream)>>>(
      mean_all, invstd_all, counts, R, C, eps, momentum, running_mean, running_var, mean, invstd);
  return detail::launch_status();
}

}  // namespace

int bn_gather_stats(const float* mean_all, const float* invstd_all, const double* counts_host, int64_t R, int64_t C,
                    double eps, double momentum, float* running_mean, float* running_var, float* mean, float* invstd,
                    void* stream) {
  return launch(mean_all, invstd_all, counts_host, R, C, eps, momentum, running_mean, running_var, mean, invstd, stream);
}
int bn_gather_stats(const double* mean_all, const double* invstd_all, const double* counts_host, int64_t R,
                    int64_t C, double eps, double momentum, double* running_mean, double* running_var, double* mean,
                    double* invstd, void* stream) {
  return launch(mean_all, invstd_all, counts_host, R, C, eps, momentum, running_mean, running_var, mean, invstd, stream);
}

}  // namespace dpv::kernels
