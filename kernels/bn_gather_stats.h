#pragma once
// SyncBatchNorm's merge (PyTorch's batch_norm_gather_stats_with_counts). Per channel c, over
// ranks j in rank order (ranks with count < 1 are left out, as PyTorch masks them):
//   v_j = ((1/invstd_j)^2 - eps) * count_j;  f = 1/(n + count_j)
//   var_n += v_j + (avg - mean_j)^2 * n * count_j * f;  avg = n*f*avg + count_j*f*mean_j;  n += count_j
// then mean = avg, invstd = 1/sqrt(var_n/n + eps), and when running stats are given (non-null)
//   running_mean = (1-m)*running_mean + m*avg;  running_var = (1-m)*running_var + m*var_n/(n-1)
// with n the total count. mean_all and invstd_all are [R, C]; counts are host values (R at most
// kMaxGatherRanks), passed to the kernel by value.
#include "kernels/launch.h"

namespace dpv::kernels {
int bn_gather_stats(const float* mean_all, const float* invstd_all, const double* counts_host, int64_t R, int64_t C,
                    double eps, double momentum, float* running_mean, float* running_var, float* mean, float* invstd,
                    void* stream);
int bn_gather_stats(const double* mean_all, const double* invstd_all, const double* counts_host, int64_t R,
                    int64_t C, double eps, double momentum, double* running_mean, double* running_var, double* mean,
                    double* invstd, void* stream);
}  // namespace dpv::kernels
