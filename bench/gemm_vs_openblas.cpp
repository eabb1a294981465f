// Where does the large MLP's training step spend the time that is not OpenBLAS's own GEMM time?
// Interleaves, round by round (so all three see the same machine load):
//   (a) cblas_sgemm alone on the step's GEMM shapes (one OpenBLAS thread),
//   (b) the same GEMMs through the engine's CPU backend (dpv::Backend::gemm on engine tensors),
//   (c) one whole engine training step (Trainer + Iteration on one simulated device),
// and prints the best time of each. (b) - (a) is the cost of the engine's GEMM wrapper, (c) - (b)
// the cost of everything else in the step (BatchNorm, ReLU, loss, SGD, allocation, threads).
//   bench_gemm_vs_openblas [preset=mlp-large] [batch=256] [rounds=7]
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/model.h"

namespace {

struct Shape3 {
  bool ta, tb;
  int64_t M, N, K;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const std::string preset = argc > 1 ? argv[1] : "mlp-large";
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 256;
  const int rounds = argc > 3 ? std::atoi(argv[3]) : 7;
  try {
    dpv::ModelSpec spec = dpv::preset_model(preset);
    std::vector<Shape3> shapes;
    double flops = 0;
    bool first = true;
    for (const auto& l : spec.layers) {
      if (l.kind != dpv::LayerKind::Linear) continue;
      shapes.push_back({false, true, batch, l.out_features, l.in_features});       // y = x W^T
      shapes.push_back({true, false, l.out_features, l.in_features, batch});       // dW = dy^T x
      if (!first) shapes.push_back({false, false, batch, l.in_features, l.out_features});  // dx = dy W
      first = false;
    }
    for (const auto& s : shapes) flops += 2.0 * s.M * s.N * s.K;

    // Operands as engine tensors on the host; raw pointers for cblas.
    std::vector<dpv::Tensor> a, b, c;
    dpv::Rng rng(3);
    auto random = [&](int64_t rows, int64_t cols) {
      std::vector<double> v(static_cast<size_t>(rows * cols));
      for (double& x : v) x = rng.normal();
      return dpv::Tensor::from_doubles({rows, cols}, dpv::DType::Float32, v);
    };
    for (const auto& s : shapes) {
      a.push_back(s.ta ? random(s.K, s.M) : random(s.M, s.K));
      b.push_back(s.tb ? random(s.N, s.K) : random(s.K, s.N));
      c.push_back(dpv::Tensor::zeros({s.M, s.N}, dpv::DType::Float32));
    }
    auto backend = dpv::make_cpu_backend();

    dpv::Model model(spec);
    dpv::Dataset data = dpv::make_blobs(batch, 10, spec.layers.front().in_features, 1);
    dpv::Trainer trainer(dpv::DeviceSet::create("cpu:1"), dpv::Model(spec), model.initial_state(0),
                         dpv::TrainOptions{});

    openblas_set_num_threads(1);
    double best_raw = 1e30, best_backend = 1e30, best_step = 1e30;
    for (int r = 0; r < rounds + 1; ++r) {  // round 0 warms up
      auto t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& s = shapes[i];
        cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, s.M, s.N, s.K,
                    1.0f, a[i].data<float>(), s.ta ? s.M : s.K, b[i].data<float>(), s.tb ? s.K : s.N, 0.0f,
                    c[i].data<float>(), s.N);
      }
      const double raw = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      for (size_t i = 0; i < shapes.size(); ++i) {
        const auto& s = shapes[i];
        backend->gemm(s.ta, s.tb, s.M, s.N, s.K, 1.0, a[i], b[i], 0.0, c[i]);
      }
      const double via_backend = seconds_since(t0);
      t0 = std::chrono::steady_clock::now();
      dpv::Iteration(trainer, data.inputs, data.targets).run_to_end();
      const double step = seconds_since(t0);
      if (r > 0) {
        best_raw = std::min(best_raw, raw);
        best_backend = std::min(best_backend, via_backend);
        best_step = std::min(best_step, step);
      }
    }
    std::printf("%s, batch %lld: %.2f GFLOP of GEMM per training step (%zu GEMMs); best of %d rounds\n",
                preset.c_str(), static_cast<long long>(batch), flops / 1e9, shapes.size(), rounds);
    std::printf("  (a) cblas_sgemm alone        %8.2f ms  %6.1f GFLOP/s\n", 1e3 * best_raw, flops / best_raw / 1e9);
    std::printf("  (b) engine Backend::gemm     %8.2f ms  %6.1f GFLOP/s  (%.0f%% of a)\n", 1e3 * best_backend,
                flops / best_backend / 1e9, 100 * best_raw / best_backend);
    std::printf("  (c) engine training step     %8.2f ms  %6.1f GFLOP/s  (%.0f%% of a)\n", 1e3 * best_step,
                flops / best_step / 1e9, 100 * best_raw / best_step);
    std::printf("  OpenBLAS %s, core %s\n", openblas_get_config(), openblas_get_corename());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_gemm_vs_openblas: %s\n", e.what());
    return 1;
  }
  return 0;
}
