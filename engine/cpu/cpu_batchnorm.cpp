// BatchNorm on the CPU: statistics in two passes accumulated in double (batch_norm_cpu_update_stats),
// the folded affine transform of PyTorch's CPU kernel, and the backward's reduce and element-wise
// parts. The ReLU-fused forms run the very same arithmetic, so they match the unfused ops bit for bit.
#include "engine/cpu/cpu_batchnorm.h"

// channel_sums.h's lane vectors are returned by value from always-inlined helpers; GCC notes at
// the end of this file that such returns differ between the baseline and AVX-512 clones' calling
// conventions, which no call here ever uses.
#pragma GCC diagnostic ignored "-Wpsabi"

#include "engine/cpu/channel_sums.h"
#include "engine/dtype_dispatch.h"
#include "kernels/math/batchnorm.h"
#include "kernels/math/elementwise.h"

namespace dpv::cpu {

namespace math = kernels::math;

// The loops below are built for the baseline x86-64 (SSE2) and, chosen at load time by the CPU
// they run on, for AVX2 and AVX-512: their per-channel double-precision sums are instruction-bound
// at two doubles per vector. The arithmetic per element is the same in every clone (the file is
// built without floating-point contraction, so no clone turns a multiply-add into an FMA).
// Not under TSan or ASan: their instrumented code cannot run in the ifunc resolver that picks a
// clone at load time (a TSan binary crashed there before main).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__) && \
    !defined(__SANITIZE_ADDRESS__)
#define DPV_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DPV_VECTOR_CLONES
#endif

namespace {

// sum[C] = the mean of each channel of x [N, C], sq[C] = its sum of squared deviations.
template <typename T>
DPV_VECTOR_CLONES void stats_rows(const T* __restrict px, double* __restrict sum, double* __restrict sq, int64_t N,
                                  int64_t C) {
  const double n = static_cast<double>(N);
  for (int64_t c = 0; c < C; ++c) sum[c] = sq[c] = 0.0;
  for (int64_t r = 0; r < N; ++r) {
    const T* __restrict row = px + r * C;
    for (int64_t c = 0; c < C; ++c) sum[c] += row[c];
  }
  for (int64_t c = 0; c < C; ++c) sum[c] = n > 0 ? sum[c] / n : 0.0;
  for (int64_t r = 0; r < N; ++r) {
    const T* __restrict row = px + r * C;
    for (int64_t c = 0; c < C; ++c) {
      const double d = row[c] - sum[c];
      sq[c] += d * d;
    }
  }
}

// [N, C, S] (S > 1): per channel, the sum and then the squared deviations over its N runs of S
// values, in Lanes (channel_sums.h, inlined here so that it is built for each clone's vectors).
// K channels side by side (channel_sums.h's add_runs: the same sums, overlapped). Pairs: the
// second BatchNorm's forward 0.091 -> 0.070 ms, the first's 0.151 -> 0.140; fours gained nothing more.
template <int K, typename T>
DPV_RUN_LOOP void stats_channels(const T* __restrict px, T* __restrict mean, T* __restrict var_b, int64_t c0,
                                 int64_t N, int64_t C, int64_t S) {
  const double n = static_cast<double>(N * S);
  Lanes<double> sum[K];
  for (int64_t r = 0; r < N; ++r) {
    const T* runs[K];
    for (int k = 0; k < K; ++k) runs[k] = px + (r * C + c0 + k) * S;
    add_runs<K>(sum, runs, S);
  }
  double m[K];
  for (int k = 0; k < K; ++k) m[k] = n > 0 ? sum[k].total() / n : 0.0;
  Lanes<double> sq[K];
  for (int64_t r = 0; r < N; ++r) {
    const T* runs[K];
    for (int k = 0; k < K; ++k) runs[k] = px + (r * C + c0 + k) * S;
    add_squared_deviations_runs<K>(sq, runs, S, m);
  }
  for (int k = 0; k < K; ++k) {
    mean[c0 + k] = static_cast<T>(m[k]);
    var_b[c0 + k] = static_cast<T>(n > 0 ? sq[k].total() / n : 0.0);
  }
}

template <typename T>
DPV_VECTOR_CLONES void stats_planes(const T* __restrict px, T* __restrict mean, T* __restrict var_b, int64_t N,
                                    int64_t C, int64_t S) {
  int64_t c = 0;
  for (; c + 2 <= C; c += 2) stats_channels<2>(px, mean, var_b, c, N, C, S);
  if (c < C) stats_channels<1>(px, mean, var_b, c, N, C, S);
}

}  // namespace

void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) {
  dispatch_float(x.dtype(), "batch_norm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    const T* px = x.data<T>();
    const double n = static_cast<double>(N * S);
    if (S == 1) {
      // [N, C]: walk rows in memory order with one accumulator per channel (still two passes in double).
      double* sum = channel_scratch<double>(0, C);
      double* sq = channel_scratch<double>(1, C);
      stats_rows(px, sum, sq, N, C);
      for (int64_t c = 0; c < C; ++c) {
        mean.data<T>()[c] = static_cast<T>(sum[c]);
        var_b.data<T>()[c] = static_cast<T>(n > 0 ? sq[c] / n : 0.0);
      }
      return;
    }
    stats_planes(px, mean.data<T>(), var_b.data<T>(), N, C, S);
  });
}

namespace {

// The S == 1 loops ([N, C], after a Linear layer) walk rows in memory order with per-channel
// values in separate arrays, so the inner loop over channels vectorises; the arithmetic per
// element is the same as for S > 1.

template <typename T, bool Relu>
DPV_VECTOR_CLONES void normalize_loops(const T* __restrict px, const T* __restrict alpha, const T* __restrict shift, T* __restrict py,
                     int64_t N, int64_t C, int64_t S) {
  auto apply = [](T x, T al, T sh) {
    const T y = math::bn_apply_affine(x, math::BnAffine<T>{al, sh});
    if constexpr (Relu) return math::relu(y);
    return y;
  };
  if (S == 1) {
    for (int64_t r = 0; r < N; ++r) {
      const T* __restrict in = px + r * C;
      T* __restrict out = py + r * C;
      for (int64_t c = 0; c < C; ++c) out[c] = apply(in[c], alpha[c], shift[c]);
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < N; ++r) {
      const T* in = px + (r * C + c) * S;
      T* out = py + (r * C + c) * S;
      for (int64_t s = 0; s < S; ++s) out[s] = apply(in[s], alpha[c], shift[c]);
    }
}

// The gradient at one element: dy, or with a fused ReLU, ReLU's backward of it (0 where y <= 0).
template <typename T, bool Relu>
inline T masked(T dy, T y) {
  if constexpr (Relu) return math::relu_backward(y, dy);
  return dy;
}

// One channel's sums over its N runs of S values ([N, C, S], S > 1): sum dy and sum dy * (x - mean)
// in channel_sums.h's lanes, in double, rounded to T once. Shared by the reduce pass and the
// channel-by-channel backward, so both add in the same order. Always inlined, as channel_sums.h's
// run loops are: out of line it was built once, for the baseline SSE2, and the AVX-512 clone of
// backward_planes called that copy (19% of the CNN's step in perf, most of its first BatchNorm's
// backward).
template <typename T, bool Relu>
DPV_RUN_LOOP void reduce_channel(const T* pdy, const T* py, const T* px, const T* mean, T* sum_dy, T* sum_dy_xmu,
                           int64_t c, int64_t N, int64_t C, int64_t S) {
  const double m = mean[c];
  Lanes<double> sdy, sdxm;
  for (int64_t r = 0; r < N; ++r) {
    const int64_t run = (r * C + c) * S;
    if constexpr (Relu)
      add_backward_terms(sdy, sdxm, ReluMaskedGrad<T>{pdy + run, py + run}, px + run, S, m);
    else
      add_backward_terms(sdy, sdxm, PlainGrad<T>{pdy + run}, px + run, S, m);
  }
  sum_dy[c] = static_cast<T>(sdy.total());
  sum_dy_xmu[c] = static_cast<T>(sdxm.total());
}

template <typename T, bool Relu>
DPV_VECTOR_CLONES void backward_reduce_loops(const T* __restrict pdy, const T* __restrict py, const T* __restrict px, const T* mean,
                           T* sum_dy, T* sum_dy_xmu, int64_t N, int64_t C, int64_t S) {
  if (S == 1) {
    double* __restrict sdy = channel_scratch<double>(0, C);
    double* __restrict sdxm = channel_scratch<double>(1, C);
    double* __restrict m = channel_scratch<double>(2, C);
    for (int64_t c = 0; c < C; ++c) {
      sdy[c] = sdxm[c] = 0.0;
      m[c] = mean[c];
    }
    for (int64_t r = 0; r < N; ++r) {
      const T* __restrict dyr = pdy + r * C;
      const T* __restrict yr = Relu ? py + r * C : pdy + r * C;
      const T* __restrict xr = px + r * C;
      for (int64_t c = 0; c < C; ++c) {
        // Masked in double (exact: the same value as masking in T, then widening), which lets the
        // float loop vectorise.
        const double g = masked<double, Relu>(dyr[c], yr[c]);
        sdy[c] += g;
        sdxm[c] += g * (xr[c] - m[c]);
      }
    }
    for (int64_t c = 0; c < C; ++c) {
      sum_dy[c] = static_cast<T>(sdy[c]);
      sum_dy_xmu[c] = static_cast<T>(sdxm[c]);
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c) reduce_channel<T, Relu>(pdy, py, px, mean, sum_dy, sum_dy_xmu, c, N, C, S);
}

template <typename T, bool Relu>
DPV_VECTOR_CLONES void backward_elemt_loops(const T* __restrict pdy, const T* __restrict py, const T* __restrict px,
                          const T* __restrict m, const T* __restrict mean_dy, const T* __restrict proj,
                          const T* __restrict scale, T* pdx, int64_t N, int64_t C, int64_t S) {
  // dx is not __restrict: a caller may pass dy itself (every element is read before it is written).
  auto elemt = [](T g, T x, T mc, T md, T pj, T sc) {
    return math::bn_backward_elemt(g, x, mc, math::BnBackwardTerms<T>{md, pj, sc});
  };
  if (S == 1) {
    for (int64_t r = 0; r < N; ++r) {
      const int64_t row = r * C;
      for (int64_t c = 0; c < C; ++c) {
        const T g = masked<T, Relu>(pdy[row + c], Relu ? py[row + c] : T(0));
        pdx[row + c] = elemt(g, px[row + c], m[c], mean_dy[c], proj[c], scale[c]);
      }
    }
    return;
  }
  for (int64_t c = 0; c < C; ++c)
    for (int64_t r = 0; r < N; ++r)
      for (int64_t s = 0; s < S; ++s) {
        const int64_t i = (r * C + c) * S + s;
        const T g = masked<T, Relu>(pdy[i], Relu ? py[i] : T(0));
        pdx[i] = elemt(g, px[i], m[c], mean_dy[c], proj[c], scale[c]);
      }
}

// The whole backward of a [N, C, S] BatchNorm (S > 1), channel by channel: a channel's reduce and
// then its element-wise pass while its N runs (N * S values of dy, x and, fused, y) are still in
// the core's cache, instead of the reduce over the whole tensor and then the element-wise pass
// over it again (the CNN's first BatchNorm holds 1 MiB per tensor: several times the L2 cache).
// The same arithmetic as backward_reduce_loops followed by backward_elemt_loops (channel_sums.h's
// lanes for the sums, the per-channel terms in T), so the same numbers to the bit.
template <typename T, bool Relu>
DPV_VECTOR_CLONES void backward_planes(const T* pdy, const T* __restrict py, const T* __restrict px,
                                       const T* __restrict mean, const T* __restrict invstd,
                                       const T* __restrict gamma, T* __restrict sum_dy, T* __restrict sum_dy_xmu,
                                       T count, T* pdx, int64_t N, int64_t C, int64_t S) {
  // dx may be dy itself: a channel's dy is read whole by its reduce before its dx is written.
  for (int64_t c = 0; c < C; ++c) {
    reduce_channel<T, Relu>(pdy, py, px, mean, sum_dy, sum_dy_xmu, c, N, C, S);
    const T mc = mean[c];
    const auto t = math::bn_backward_terms(sum_dy[c], sum_dy_xmu[c], count, invstd[c], gamma[c]);
    for (int64_t r = 0; r < N; ++r) {
      const int64_t run = (r * C + c) * S;
      const T* dyr = pdy + run;
      const T* __restrict yr = Relu ? py + run : nullptr;
      const T* __restrict xr = px + run;
      T* dxr = pdx + run;
      for (int64_t s = 0; s < S; ++s) {
        const T g = masked<T, Relu>(dyr[s], Relu ? yr[s] : T(0));
        dxr[s] = math::bn_backward_elemt(g, xr[s], mc, t);
      }
    }
  }
}

}  // namespace

void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                  Tensor& y, int64_t N, int64_t C, int64_t S, bool relu) {
  dispatch_float(x.dtype(), "batch_norm", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    // PyTorch CPU folds the affine transform: y = x * alpha + shift, alpha = invstd * gamma.
    T* alpha = channel_scratch<T>(0, C);
    T* shift = channel_scratch<T>(1, C);
    for (int64_t c = 0; c < C; ++c) {
      const auto a = math::bn_fold_affine(mean.data<T>()[c], invstd.data<T>()[c], gamma.data<T>()[c], beta.data<T>()[c]);
      alpha[c] = a.alpha;
      shift[c] = a.shift;
    }
    if (relu)
      normalize_loops<T, true>(x.data<T>(), alpha, shift, y.data<T>(), N, C, S);
    else
      normalize_loops<T, false>(x.data<T>(), alpha, shift, y.data<T>(), N, C, S);
  });
}

void bn_backward_reduce(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean, Tensor& sum_dy,
                        Tensor& sum_dy_xmu, int64_t N, int64_t C, int64_t S) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (relu_y)
      backward_reduce_loops<T, true>(dy.data<T>(), relu_y->data<T>(), x.data<T>(), mean.data<T>(), sum_dy.data<T>(),
                                     sum_dy_xmu.data<T>(), N, C, S);
    else
      backward_reduce_loops<T, false>(dy.data<T>(), nullptr, x.data<T>(), mean.data<T>(), sum_dy.data<T>(),
                                      sum_dy_xmu.data<T>(), N, C, S);
  });
}

void bn_backward_elemt(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean,
                       const Tensor& invstd, const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                       double count, Tensor& dx, int64_t N, int64_t C, int64_t S) {
  dispatch_float(x.dtype(), "batch_norm_backward", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    // Per channel: the mean and the three terms of math::bn_backward_elemt, in the tensor's dtype.
    T* m = channel_scratch<T>(0, C);
    T* mean_dy = channel_scratch<T>(1, C);
    T* proj = channel_scratch<T>(2, C);
    T* scale = channel_scratch<T>(3, C);
    for (int64_t c = 0; c < C; ++c) {
      m[c] = mean.data<T>()[c];
      const auto t = math::bn_backward_terms(sum_dy.data<T>()[c], sum_dy_xmu.data<T>()[c], static_cast<T>(count),
                                             invstd.data<T>()[c], gamma.data<T>()[c]);
      mean_dy[c] = t.mean_dy;
      proj[c] = t.proj;
      scale[c] = t.scale;
    }
    if (relu_y)
      backward_elemt_loops<T, true>(dy.data<T>(), relu_y->data<T>(), x.data<T>(), m, mean_dy, proj, scale,
                                    dx.data<T>(), N, C, S);
    else
      backward_elemt_loops<T, false>(dy.data<T>(), nullptr, x.data<T>(), m, mean_dy, proj, scale, dx.data<T>(), N, C,
                                     S);
  });
}

void bn_backward(const Tensor& dy, const Tensor* relu_y, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                 const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu, double count, Tensor& dx, int64_t N,
                 int64_t C, int64_t S) {
  if (S == 1) {
    // [N, C]: all of it is a few rows; the two passes walk them in memory order.
    bn_backward_reduce(dy, relu_y, x, mean, sum_dy, sum_dy_xmu, N, C, S);
    bn_backward_elemt(dy, relu_y, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
    return;
  }
  dispatch_float(x.dtype(), "batch_norm_backward", [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (relu_y)
      backward_planes<T, true>(dy.data<T>(), relu_y->data<T>(), x.data<T>(), mean.data<T>(), invstd.data<T>(),
                               gamma.data<T>(), sum_dy.data<T>(), sum_dy_xmu.data<T>(), static_cast<T>(count),
                               dx.data<T>(), N, C, S);
    else
      backward_planes<T, false>(dy.data<T>(), nullptr, x.data<T>(), mean.data<T>(), invstd.data<T>(), gamma.data<T>(),
                                sum_dy.data<T>(), sum_dy_xmu.data<T>(), static_cast<T>(count), dx.data<T>(), N, C, S);
  });
}

}  // namespace dpv::cpu
