#include "course/gemm_reference.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/number_text.h"
#include "engine/tensor.h"

namespace dpv::course {

std::vector<GemmShape> mlp_step_gemms(const ModelSpec& spec, int64_t batch) {
  std::vector<GemmShape> shapes;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.kind != LayerKind::Linear) continue;
    const std::string p = std::to_string(i);
    shapes.push_back({p + ".forward", false, true, batch, l.out_features, l.in_features});
    shapes.push_back({p + ".grad_weight", true, false, l.out_features, l.in_features, batch});
    // The model's first layer gets no input gradient; a Linear after convolutions does.
    if (i > 0) shapes.push_back({p + ".grad_input", false, false, batch, l.in_features, l.out_features});
  }
  return shapes;
}

struct GemmReference::Buffers {
  // One set of operands per shape: a [M*K], b [K*N], c [M*N], in the precision of the run; the
  // engine's backend reads the same values through host tensors.
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<double>> f64;
  std::unique_ptr<CpuGemm> backend;  // EngineCpu and Onednn: the CPU backend's gemm, timed
  std::vector<Tensor> tensors;       // EngineCpu and Onednn: a, b, c per shape
};

GemmReference::GemmReference(std::vector<GemmShape> shapes, bool float64, GemmLibrary library)
    : shapes_(std::move(shapes)), float64_(float64), library_(library), buffers_(std::make_unique<Buffers>()) {
  // Values in [-1, 1) from a cheap generator: GEMM time does not depend on them, and setting up
  // the large MLP's operands with std::normal_distribution took longer than the measurement.
  uint64_t state = 0x9e3779b97f4a7c15ull;
  auto fill = [&](auto& list, size_t n) {
    list.emplace_back(n);
    for (auto& v : list.back()) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      v = static_cast<std::decay_t<decltype(v)>>(static_cast<double>(state >> 11) * 0x1.0p-52 - 1.0);
    }
  };
  for (const GemmShape& s : shapes_) {
    for (size_t n : {static_cast<size_t>(s.M * s.K), static_cast<size_t>(s.K * s.N), static_cast<size_t>(s.M * s.N)}) {
      if (float64_) fill(buffers_->f64, n); else fill(buffers_->f32, n);
    }
    flops_ += s.flops();
  }
  check(library_ != GemmLibrary::Onednn || (!float64_ && cpu_has_onednn()),
        "oneDNN's sgemm alone needs float32 and a build with oneDNN (an internal error)");
  by_shape_.assign(shapes_.size(), 0.0);
  if (library_ != GemmLibrary::OpenBlas) {
    buffers_->backend = std::make_unique<CpuGemm>();
    const DType dt = float64_ ? DType::Float64 : DType::Float32;
    for (size_t i = 0; i < shapes_.size(); ++i) {
      const GemmShape& s = shapes_[i];
      const Shape a = s.trans_a ? Shape{s.K, s.M} : Shape{s.M, s.K}, b = s.trans_b ? Shape{s.N, s.K} : Shape{s.K, s.N};
      for (const Shape& shape : {a, b, Shape{s.M, s.N}}) {
        Tensor t = Tensor::empty(shape, dt);
        const size_t k = buffers_->tensors.size();
        if (float64_) std::copy_n(buffers_->f64[k].data(), t.numel(), t.data<double>());
        else std::copy_n(buffers_->f32[k].data(), t.numel(), t.data<float>());
        buffers_->tensors.push_back(std::move(t));
      }
    }
  }
}

GemmReference::~GemmReference() = default;

double GemmReference::time_one_pass() {
  const int previous_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const auto shape_start = clock::now();
    run_shape(i);
    by_shape_[i] = std::chrono::duration<double>(clock::now() - shape_start).count();
  }
  const double seconds = std::chrono::duration<double>(clock::now() - t0).count();
  openblas_set_num_threads(previous_threads);
  return seconds;
}

void GemmReference::run_shape(size_t i) {
  const GemmShape& s = shapes_[i];
  if (library_ != GemmLibrary::OpenBlas) {
    auto& t = buffers_->tensors;
    if (library_ == GemmLibrary::EngineCpu)
      buffers_->backend->run(s.trans_a, s.trans_b, s.M, s.N, s.K, 1.0, t[3 * i], t[3 * i + 1], 0.0, t[3 * i + 2]);
    else
      buffers_->backend->run_with(CpuGemmLibrary::Onednn, s.trans_a, s.trans_b, s.M, s.N, s.K, t[3 * i], t[3 * i + 1],
                                  t[3 * i + 2]);
    return;
  }
  // Row-major; the leading dimension is the row length of the matrix as stored.
  const int64_t lda = s.trans_a ? s.M : s.K, ldb = s.trans_b ? s.K : s.N;
  const auto ta = s.trans_a ? CblasTrans : CblasNoTrans, tb = s.trans_b ? CblasTrans : CblasNoTrans;
  if (float64_) {
    auto& b = buffers_->f64;
    cblas_dgemm(CblasRowMajor, ta, tb, s.M, s.N, s.K, 1.0, b[3 * i].data(), lda, b[3 * i + 1].data(), ldb, 0.0,
                b[3 * i + 2].data(), s.N);
  } else {
    auto& b = buffers_->f32;
    cblas_sgemm(CblasRowMajor, ta, tb, s.M, s.N, s.K, 1.0f, b[3 * i].data(), lda, b[3 * i + 1].data(), ldb, 0.0f,
                b[3 * i + 2].data(), s.N);
  }
}

CpuGemmShape cpu_gemm_shape(const GemmShape& s) { return {s.trans_a, s.trans_b, s.M, s.N, s.K, /*beta_zero=*/true}; }

std::vector<std::pair<std::string, int>> engine_gemm_libraries(const std::vector<GemmShape>& shapes, bool float64) {
  std::vector<std::pair<std::string, int>> counts;
  for (const GemmShape& s : shapes) {
    const std::string name = cpu_gemm_library(float64, cpu_gemm_shape(s));
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == name; });
    if (it == counts.end()) counts.emplace_back(name, 1);
    else ++it->second;
  }
  return counts;
}

std::string engine_gemm_library(const std::vector<GemmShape>& shapes, bool float64) {
  std::string words;
  for (const auto& [name, count] : engine_gemm_libraries(shapes, float64))
    words += words.empty() ? name + " for " + count_text(count, "shape") : ", " + name + " for " + std::to_string(count);
  return words;
}

}  // namespace dpv::course
