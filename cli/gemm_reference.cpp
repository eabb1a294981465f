#include "cli/gemm_reference.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>

namespace dpv::cli {

std::vector<GemmShape> mlp_step_gemms(const ModelSpec& spec, int64_t batch) {
  std::vector<GemmShape> shapes;
  bool first = true;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    if (l.kind != LayerKind::Linear) continue;
    const std::string p = std::to_string(i);
    shapes.push_back({p + ".forward", false, true, batch, l.out_features, l.in_features});
    shapes.push_back({p + ".grad_weight", true, false, l.out_features, l.in_features, batch});
    if (!first) shapes.push_back({p + ".grad_input", false, false, batch, l.in_features, l.out_features});
    first = false;
  }
  return shapes;
}

struct GemmReference::Buffers {
  // One set of operands per shape: a [M*K], b [K*N], c [M*N], in the precision of the run.
  std::vector<std::vector<float>> f32;
  std::vector<std::vector<double>> f64;
};

GemmReference::GemmReference(std::vector<GemmShape> shapes, bool float64)
    : shapes_(std::move(shapes)), float64_(float64), buffers_(std::make_unique<Buffers>()) {
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
}

GemmReference::~GemmReference() = default;

double GemmReference::time_one_pass() {
  const int previous_threads = openblas_get_num_threads();
  openblas_set_num_threads(1);
  const auto t0 = std::chrono::steady_clock::now();
  for (size_t i = 0; i < shapes_.size(); ++i) {
    const GemmShape& s = shapes_[i];
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
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  openblas_set_num_threads(previous_threads);
  return seconds;
}

GemmRate measure_openblas(const std::vector<GemmShape>& shapes, bool float64, double min_seconds) {
  GemmReference ref(shapes, float64);
  GemmRate rate;
  rate.flops_per_step = ref.flops_per_pass();
  ref.time_one_pass();  // warm-up
  rate.seconds = 1e30;
  double spent = 0;
  int passes = 0;
  while (spent < min_seconds || passes < 3) {
    const double s = ref.time_one_pass();
    rate.seconds = std::min(rate.seconds, s);
    spent += s;
    ++passes;
  }
  return rate;
}

}  // namespace dpv::cli
