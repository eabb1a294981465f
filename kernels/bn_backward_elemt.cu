#include "kernels/bn_backward_elemt.h"
#include "kernels/common.cuh"
#include "kernels/math/batchnorm.h"

namespace dpv::kernels {
namespace {

template <typename T>
__global__ void bn_backward_elemt_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* mean,
                                         const T* invstd, const T* gamma, const T* sum_dy, const T* sum_dy_xmu,
                                         double count, T* __restrict__ dx, int64_t C, int64_t S, int64_t total) {
  detail::for_each_index(total, [&](int64_t i) {
    const int64_t c = (i / S) % C;
    const double g = gamma ? static_cast<double>(gamma[c]) : 1.0;
    const math::BnBackwardTerms<double> t = math::bn_backward_terms<double>(sum_dy[c], sum_dy_xmu[c], count, invstd[c], g);
    dx[i] = static_cast<T>(math::bn_backward_elemt<double>(dy[i], x[i], mean[c], t));
  });
}

template <typename T>
int launch(const T* dy, const T* x, const T* mean, const T* invstd, const T* gamma, const T* sum_dy,
           const T* sum_dy_xmu, double count, T* dx, int64_t N, int64_t C, int64_t S, void* stream) {
  const int64_t total = N * C * S;
  if (total <= 0) return 0;
  detail::clear_earlier_error();
  bn_backward_elemt_kernel<T><<<detail::grid_for(total), detail::kThreads, 0, detail::as_stream(stream)>>>(
      dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, C, S, total);
  return detail::launch_status();
}

}  // namespace

int bn_backward_elemt(const float* dy, const float* x, const float* mean, const float* invstd, const float* gamma,
                      const float* sum_dy, const float* sum_dy_xmu, double count, float* dx, int64_t N, int64_t C,
                      int64_t S, void* stream) {
  return launch(dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S, stream);
}
int bn_backward_elemt(const double* dy, const double* x, const double* mean, const double* invstd,
                      const double* gamma, const double* sum_dy, const double* sum_dy_xmu, double count, double* dx,
                      int64_t N, int64_t C, int64_t S, void* stream) {
  return launch(dy, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S, stream);
}

}  // namespace dpv::kernels
