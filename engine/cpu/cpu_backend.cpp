// The CPU backend: oneDNN (when the build has it) for float32 convolutions; float32 matrix products
// with the faster of OpenBLAS and oneDNN per shape (gemm_choice.h), float64 ones with OpenBLAS;
// plain loops for the rest. It is the reference every CUDA
// op is tested against, so it favours clarity and PyTorch's CPU accumulation (BatchNorm statistics
// in two passes accumulated in double, as batch_norm_cpu_update_stats does; long channel runs in
// several parallel accumulators).
#include <cblas.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/backend.h"
#include "engine/core_backends.h"
#include "engine/cpu/channel_sums.h"
#include "engine/cpu/cpu_batchnorm.h"
#include "engine/cpu/gemm_choice.h"
#include "engine/cpu/gemm_choice_sgemm.h"
#if DPV_HAVE_ONEDNN
#include "engine/cpu/onednn_conv.h"
#include "engine/cpu/onednn_gemm.h"
#endif
#include "engine/device.h"
#include "engine/dtype_dispatch.h"
#include "engine/error.h"
#include "engine/index.h"
#include "kernels/math/batchnorm.h"
#include "kernels/math/cross_entropy.h"
#include "kernels/math/elementwise.h"
#include "kernels/math/indexing.h"

namespace dpv {

namespace {

namespace math = kernels::math;
using cpu::add_run;
using cpu::Lanes;

void openblas_single_thread() {
  // Each simulated device is one worker thread; OpenBLAS must not spawn its own threads inside it.
  static const bool once = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)once;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend() {
    openblas_single_thread();
    (void)cpu::process_gemm_chooser();  // a bad DPV_GEMM stops the run here, before any step
  }

  ~CpuBackend() override {
    for (auto& [bytes, blocks] : cache_)
      for (void* p : blocks) std::free(p);
  }

  // A caching allocator, as PyTorch's device allocators are: blocks freed by one iteration are
  // reused by the next instead of going back to the system (large blocks would otherwise be
  // unmapped and page-faulted in again every step). Memory counters still see live tensors only.
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    {
      std::lock_guard lock(cache_mutex_);
      auto it = cache_.find(rounded);
      if (it != cache_.end() && !it->second.empty()) {
        void* p = it->second.back();
        it->second.pop_back();
        return p;
      }
    }
    void* p = std::aligned_alloc(64, rounded);
    if (!p) throw Error("out of memory on a simulated device allocating " + std::to_string(bytes) + " bytes");
    return p;
  }
  void release(void* ptr, size_t bytes) override {
    std::lock_guard lock(cache_mutex_);
    cache_[(bytes + 63) / 64 * 64].push_back(ptr);
  }
  void copy(void* dst, const Device*, const void* src, const Device*, size_t bytes) override {
    std::memcpy(dst, src, bytes);
  }
  void fill(Tensor& t, double value) override {
    switch (t.dtype()) {
      case DType::Float32: std::fill_n(t.data<float>(), t.numel(), static_cast<float>(value)); break;
      case DType::Float64: std::fill_n(t.data<double>(), t.numel(), value); break;
      case DType::Int64: std::fill_n(t.data<int64_t>(), t.numel(), static_cast<int64_t>(value)); break;
    }
  }
  void synchronize() override {}
  double now() override {
    using clock = std::chrono::steady_clock;
    return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
  }

  void gemm(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a, const Tensor& b,
            double beta, Tensor& c) override {
    if (rows == 0 || cols == 0) return;
    const int64_t lda = ta ? rows : inner, ldb = tb ? inner : cols, ldc = cols;
    if (inner == 0) {  // BLAS leaves C untouched for inner = 0 only when beta = 1
      scale_inplace(c, beta);
      return;
    }
    if (c.dtype() == DType::Float32) {
      const CpuGemmShape shape{ta, tb, rows, cols, inner, beta == 0.0};
      const CpuGemmLibrary library = cpu::sgemm_library(shape, a.data<float>(), lda, b.data<float>(), ldb);
      cpu::run_sgemm(library, ta, tb, rows, cols, inner, static_cast<float>(alpha), a.data<float>(), lda, b.data<float>(),
                ldb, static_cast<float>(beta), c.data<float>(), ldc);
      return;
    }
    // float64: OpenBLAS (oneDNN has no dgemm).
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, static_cast<int>(rows),
                static_cast<int>(cols), static_cast<int>(inner), alpha, a.data<double>(), static_cast<int>(lda),
                b.data<double>(), static_cast<int>(ldb), beta, c.data<double>(), static_cast<int>(ldc));
  }

  void add_channel_bias(Tensor& y, const Tensor& bias, int64_t N, int64_t C, int64_t S) override {
    dispatch_float(y.dtype(), "add_channel_bias", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* py = y.data<T>();
      const T* pb = bias.data<T>();
      if (S == 1) {  // [N, C] after a Linear: rows in memory order, the loop over channels vectorises
        for (int64_t r = 0; r < N; ++r) {
          T* __restrict row = py + r * C;
          for (int64_t c = 0; c < C; ++c) row[c] += pb[c];
        }
        return;
      }
      for (int64_t r = 0; r < N; ++r)
        for (int64_t c = 0; c < C; ++c) {
          T* row = py + (r * C + c) * S;
          for (int64_t s = 0; s < S; ++s) row[s] += pb[c];
        }
    });
  }

  void sum_channels(const Tensor& dy, Tensor& out, int64_t N, int64_t C, int64_t S, bool accumulate) override {
    dispatch_float(dy.dtype(), "sum_channels", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* p = dy.data<T>();
      T* o = out.data<T>();
      if (S == 1) {
        // [N, C]: one running sum per channel, rows in memory order (the same additions in the same
        // order as the per-channel walk below, which strides by C here).
        T* __restrict acc = cpu::channel_scratch<T>(0, C);
        for (int64_t c = 0; c < C; ++c) acc[c] = 0;
        for (int64_t r = 0; r < N; ++r) {
          const T* __restrict row = p + r * C;
          for (int64_t c = 0; c < C; ++c) acc[c] += row[c];
        }
        for (int64_t c = 0; c < C; ++c) o[c] = accumulate ? o[c] + acc[c] : acc[c];
        return;
      }
      for (int64_t c = 0; c < C; ++c) {
        Lanes<T> acc;
        for (int64_t r = 0; r < N; ++r) add_run(acc, p + (r * C + c) * S, S);
        o[c] = accumulate ? o[c] + acc.total() : acc.total();
      }
    });
  }

  void add_inplace(Tensor& dst, const Tensor& src) override {
    if (dst.dtype() == DType::Int64) {  // num_batches_tracked
      int64_t* d = dst.data<int64_t>();
      const int64_t* s = src.data<int64_t>();
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += s[i];
      return;
    }
    dispatch_float(dst.dtype(), "add", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* d = dst.data<T>();
      const T* s = src.data<T>();
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += s[i];
    });
  }

  void addcmul_inplace(Tensor& dst, const Tensor& a, const Tensor& b) override {
    dispatch_float(dst.dtype(), "addcmul_", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* d = dst.data<T>();
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] += pa[i] * pb[i];
    });
  }

  void scale_inplace(Tensor& dst, double alpha) override {
    dispatch_float(dst.dtype(), "scale", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* d = dst.data<T>();
      const T a = static_cast<T>(alpha);
      for (int64_t i = 0, n = dst.numel(); i < n; ++i) d[i] = math::scale(d[i], a);
    });
  }

  void relu_forward(const Tensor& x, Tensor& y) override {
    dispatch_float(x.dtype(), "relu", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* px = x.data<T>();
      T* py = y.data<T>();
      for (int64_t i = 0, n = x.numel(); i < n; ++i) py[i] = math::relu(px[i]);
    });
  }

  void relu_backward(const Tensor& y, const Tensor& dy, Tensor& dx) override {
    dispatch_float(y.dtype(), "relu_backward", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* py = y.data<T>();
      const T* pdy = dy.data<T>();
      T* pdx = dx.data<T>();
      for (int64_t i = 0, n = y.numel(); i < n; ++i) pdx[i] = math::relu_backward(py[i], pdy[i]);
    });
  }

  void im2col(const Tensor& x, Tensor& col, const ConvGeometry& g) override {
    dispatch_float(x.dtype(), "im2col", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* px = x.data<T>();
      T* pc = col.data<T>();
      const int64_t L = g.OH * g.OW, rows = g.C * g.kh * g.kw;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t r = 0; r < rows; ++r) {
          const math::ConvTap t = math::conv_tap(r, g);
          T* out = pc + (n * rows + r) * L;
          const T* img = px + (n * g.C + t.c) * g.H * g.W;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = math::conv_input_coord(oh, t.ki, g.stride, g.pad);
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = math::conv_input_coord(ow, t.kj, g.stride, g.pad);
              out[oh * g.OW + ow] = (ih >= 0 && ih < g.H && iw >= 0 && iw < g.W) ? img[ih * g.W + iw] : T(0);
            }
          }
        }
    });
  }

  void col2im(const Tensor& col, Tensor& dx, const ConvGeometry& g) override {
    fill(dx, 0.0);
    dispatch_float(col.dtype(), "col2im", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* pc = col.data<T>();
      T* px = dx.data<T>();
      const int64_t L = g.OH * g.OW, rows = g.C * g.kh * g.kw;
      for (int64_t n = 0; n < g.N; ++n)
        for (int64_t r = 0; r < rows; ++r) {
          const math::ConvTap t = math::conv_tap(r, g);
          const T* in = pc + (n * rows + r) * L;
          T* img = px + (n * g.C + t.c) * g.H * g.W;
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = math::conv_input_coord(oh, t.ki, g.stride, g.pad);
            if (ih < 0 || ih >= g.H) continue;
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const int64_t iw = math::conv_input_coord(ow, t.kj, g.stride, g.pad);
              if (iw >= 0 && iw < g.W) img[ih * g.W + iw] += in[oh * g.OW + ow];
            }
          }
        }
    });
  }

  void permute_nos(const Tensor& src, Tensor& dst, int64_t A, int64_t B, int64_t S) override {
    dispatch_float(src.dtype(), "permute", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const T* ps = src.data<T>();
      T* pd = dst.data<T>();
      for (int64_t a = 0; a < A; ++a)
        for (int64_t b = 0; b < B; ++b) {
          const int64_t run = (b * A + a) * S;  // dst [B, A, S]: a run of S elements from src [A, B, S]
          std::memcpy(pd + run, ps + math::permute_source(run, A, B, S), sizeof(T) * S);
        }
    });
  }

#if DPV_HAVE_ONEDNN
  // Conv2d in float32 through oneDNN (as PyTorch's CPU convolutions); float64 takes the im2col
  // default, oneDNN having no float64 convolution.
  void conv2d_forward(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& y, Tensor& saved,
                      const ConvGeometry& g) override {
    if (x.dtype() != DType::Float32) return Backend::conv2d_forward(x, w, bias, y, saved, g);
    conv_.forward(x.data<float>(), w.data<float>(), bias ? bias->data<float>() : nullptr, y.data<float>(), w.dim(0), g);
    saved = Tensor();
  }

  void conv2d_backward(const Tensor& x, const Tensor& saved, const Tensor& w, const Tensor& dy, Tensor& dw,
                       bool accumulate_dw, Tensor* dx, const ConvGeometry& g) override {
    if (x.dtype() != DType::Float32) return Backend::conv2d_backward(x, saved, w, dy, dw, accumulate_dw, dx, g);
    conv_.backward(x.data<float>(), dy.data<float>(), w.data<float>(), dw.data<float>(), accumulate_dw,
                   dx ? dx->data<float>() : nullptr, w.dim(0), g);
  }
#endif

  void bn_stats(const Tensor& x, Tensor& mean, Tensor& var_b, int64_t N, int64_t C, int64_t S) override {
    cpu::bn_stats(x, mean, var_b, N, C, S);
  }

  void bn_normalize(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma, const Tensor& beta,
                    Tensor& y, int64_t N, int64_t C, int64_t S) override {
    cpu::bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S, /*relu=*/false);
  }

  void bn_normalize_relu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& gamma,
                         const Tensor& beta, Tensor& y, int64_t N, int64_t C, int64_t S) override {
    cpu::bn_normalize(x, mean, invstd, gamma, beta, y, N, C, S, /*relu=*/true);
  }

  void bn_backward_reduce(const Tensor& dy, const Tensor& x, const Tensor& mean, Tensor& sum_dy, Tensor& sum_dy_xmu,
                          int64_t N, int64_t C, int64_t S) override {
    cpu::bn_backward_reduce(dy, nullptr, x, mean, sum_dy, sum_dy_xmu, N, C, S);
  }

  void bn_backward_elemt(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                         const Tensor& gamma, const Tensor& sum_dy, const Tensor& sum_dy_xmu, double count, Tensor& dx,
                         int64_t N, int64_t C, int64_t S) override {
    cpu::bn_backward_elemt(dy, nullptr, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
  }

  void bn_relu_backward(const Tensor& dy, const Tensor& y, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                        const Tensor& gamma, Tensor& sum_dy, Tensor& sum_dy_xmu, double count, Tensor& dx, int64_t N,
                        int64_t C, int64_t S) override {
    cpu::bn_backward(dy, &y, x, mean, invstd, gamma, sum_dy, sum_dy_xmu, count, dx, N, C, S);
  }

  void bn_gather_stats(const Tensor& mean_all, const Tensor& invstd_all, const std::vector<double>& counts, double eps,
                       double momentum, Tensor& running_mean, Tensor& running_var, Tensor& mean, Tensor& invstd,
                       int64_t R, int64_t C) override {
    dispatch_float(mean.dtype(), "batch_norm_gather_stats_with_counts", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for (int64_t c = 0; c < C; ++c) {
        // batch_norm_reduce_statistics_kernel: Chan's merge in rank order, M2 rebuilt from invstd.
        // The CUDA kernel accumulates in float for float inputs; we follow the input's precision.
        T avg = 0, var_n = 0, n = 0;
        for (int64_t j = 0; j < R; ++j) {
          const T count = static_cast<T>(counts[ix(j)]);
          if (count < 1) continue;  // empty ranks are masked out
          const T m = mean_all.data<T>()[j * C + c];
          const T is = invstd_all.data<T>()[j * C + c];
          const T v = (T(1) / (is * is) - static_cast<T>(eps)) * count;
          const T f = T(1) / (n + count);
          var_n += v + (avg - m) * (avg - m) * n * count * f;
          avg = n * f * avg + count * f * m;
          n += count;
        }
        mean.data<T>()[c] = avg;
        invstd.data<T>()[c] = T(1) / std::sqrt(var_n / n + static_cast<T>(eps));
        if (running_mean.defined()) {
          T& rm = running_mean.data<T>()[c];
          T& rv = running_var.data<T>()[c];
          rm = static_cast<T>((1 - momentum) * rm + momentum * avg);
          rv = static_cast<T>((1 - momentum) * rv + momentum * (var_n / (n - 1)));
        }
      }
    });
  }

  void bn_invstd(const Tensor& var_b, double eps, Tensor& invstd) override {
    dispatch_float(var_b.dtype(), "batch_norm", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for (int64_t c = 0, C = var_b.numel(); c < C; ++c)
        invstd.data<T>()[c] = static_cast<T>(math::bn_invstd(static_cast<double>(var_b.data<T>()[c]), eps));
    });
  }

  void bn_update_running(const Tensor& mean, const Tensor& var_b, double n, double momentum, Tensor& running_mean,
                         Tensor& running_var) override {
    dispatch_float(mean.dtype(), "batch_norm", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      for (int64_t c = 0, C = mean.numel(); c < C; ++c) {
        T& rm = running_mean.data<T>()[c];
        T& rv = running_var.data<T>()[c];
        const double unbiased = math::bn_unbiased_var(static_cast<double>(var_b.data<T>()[c]), n);
        rm = static_cast<T>(math::bn_running_update<double>(rm, mean.data<T>()[c], momentum));
        rv = static_cast<T>(math::bn_running_update<double>(rv, unbiased, momentum));
      }
    });
  }

  void cross_entropy(const Tensor& logits, const Tensor& target, Tensor& loss_out, Tensor& dlogits,
                     double grad_scale) override {
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const int64_t N = logits.dim(0), K = logits.dim(1);
      const T* pl = logits.data<T>();
      const int64_t* pt = target.data<int64_t>();
      T* pd = dlogits.data<T>();
      // Rows with target ignore_index (-100) count for nothing: the mean is over the others.
      int64_t counted = 0;
      for (int64_t i = 0; i < N; ++i) {
        const math::TargetKind kind = math::classify_target(pt[i], K);
        if (kind == math::TargetKind::OutOfRange)
          throw Error("Target " + std::to_string(pt[i]) + " is out of bounds.", ErrorClass::IndexError);
        counted += kind == math::TargetKind::Counted;
      }
      const double scale = grad_scale / static_cast<double>(counted);
      double total = 0;
      for (int64_t i = 0; i < N; ++i) {
        const int64_t t = pt[i];
        if (t == kIgnoreIndex) {
          std::fill_n(pd + i * K, K, T(0));
          continue;
        }
        const T* row = pl + i * K;
        T mx = row[0];
        for (int64_t k = 1; k < K; ++k) mx = std::max(mx, row[k]);
        double se = 0;
        for (int64_t k = 0; k < K; ++k) se += std::exp(static_cast<double>(row[k] - mx));
        const double lse = std::log(se) + mx;
        total += math::ce_row_loss(lse, row[t]);
        for (int64_t k = 0; k < K; ++k) pd[i * K + k] = static_cast<T>(math::ce_grad(row[k], lse, k == t, scale));
      }
      loss_out.data<T>()[0] = static_cast<T>(math::ce_mean(total, counted));
    });
  }

  void sgd_update(Tensor& param, const Tensor& grad, Tensor& momentum_buf, double lr, double momentum,
                  double weight_decay, bool first_step) override {
    dispatch_float(param.dtype(), "sgd", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      T* p = param.data<T>();
      const T* g = grad.data<T>();
      T* buf = momentum != 0 ? momentum_buf.data<T>() : nullptr;
      const T wd = static_cast<T>(weight_decay), mom = static_cast<T>(momentum), step = static_cast<T>(lr);
      const int64_t n = param.numel();
      // One loop per case (the flags are loop-invariant), so each one vectorises.
      if (!buf) {
        for (int64_t i = 0; i < n; ++i) math::sgd_update<T>(p[i], g[i], nullptr, step, mom, wd, first_step);
      } else {
        for (int64_t i = 0; i < n; ++i) math::sgd_update<T>(p[i], g[i], buf + i, step, mom, wd, first_step);
      }
    });
  }

  void adam_update(Tensor& param, const Tensor& grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                   const math::AdamStep& step) override {
    dispatch_float(param.dtype(), "adam", [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      const math::AdamScalars<T> scalars = math::adam_scalars<T>(step);
      T* p = param.data<T>();
      const T* g = grad.data<T>();
      T* m = exp_avg.data<T>();
      T* v = exp_avg_sq.data<T>();
      const int64_t n = param.numel();
      for (int64_t i = 0; i < n; ++i) math::adam_update<T>(p[i], g[i], m[i], v[i], scalars);
    });
  }

 private:
#if DPV_HAVE_ONEDNN
  cpu::OnednnConv conv_;
#endif
  std::mutex cache_mutex_;
  std::unordered_map<size_t, std::vector<void*>> cache_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

namespace cpu {

#if DPV_HAVE_ONEDNN
bool built_with_onednn() { return true; }
#else
bool built_with_onednn() { return false; }
#endif

void onednn_sgemm_if_built(bool ta, bool tb, int64_t rows, int64_t cols, int64_t inner, float alpha, const float* a,
                           int64_t lda, const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
#if DPV_HAVE_ONEDNN
  onednn_sgemm(ta, tb, rows, cols, inner, alpha, a, lda, b, ldb, beta, c, ldc);
#else
  (void)ta, (void)tb, (void)rows, (void)cols, (void)inner, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb,
      (void)beta, (void)c, (void)ldc;
  throw Error("oneDNN sgemm asked for in a build without oneDNN (an internal error)");
#endif
}

}  // namespace cpu

}  // namespace dpv
