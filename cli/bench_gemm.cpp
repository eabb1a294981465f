#include "cli/bench_gemm.h"

#include <algorithm>
#include <iostream>

#include "cli/format.h"
#include "engine/core_backends.h"

namespace dpv::cli {

using course::GemmLibrary;
using course::GemmRate;
using course::GemmReference;
using course::GemmShape;

GemmReferences::GemmReferences(BenchGemm& g, const ModelSpec& spec, int64_t batch) {
  g.float64 = spec.dtype == DType::Float64;
  g.batch = batch;
  g.shapes = course::mlp_step_gemms(spec, batch);
  openblas_ = std::make_unique<GemmReference>(g.shapes, g.float64, GemmLibrary::OpenBlas);
  g.openblas_by_shape.assign(g.shapes.size(), 1e30);
  if (!g.float64 && cpu_has_onednn()) {
    onednn_ = std::make_unique<GemmReference>(g.shapes, false, GemmLibrary::Onednn);
    g.onednn_by_shape.assign(g.shapes.size(), 1e30);
  }
  for (GemmReference* r : {openblas_.get(), onednn_.get()})
    if (r) r->time_one_pass();  // warm-up
}

void GemmReferences::time_round(int passes, BenchGemm& g) {
  for (auto [reference, best] : {std::pair{openblas_.get(), &g.openblas_by_shape}, std::pair{onednn_.get(), &g.onednn_by_shape}}) {
    if (!reference) continue;
    std::vector<double> round(best->size(), 0.0);
    for (int p = 0; p < passes; ++p) {
      reference->time_one_pass();
      for (size_t i = 0; i < round.size(); ++i) round[i] += reference->last_pass_by_shape()[i];
    }
    for (size_t i = 0; i < round.size(); ++i) (*best)[i] = std::min((*best)[i], round[i] / passes);
  }
}

void GemmReferences::finish(BenchGemm& g) const {
  double blas = 0, dnn = 0, best = 0;
  for (size_t i = 0; i < g.openblas_by_shape.size(); ++i) {
    const double o = g.openblas_by_shape[i], d = onednn_ ? g.onednn_by_shape[i] : o;
    blas += o;
    dnn += d;
    best += std::min(o, d);
  }
  const double flops = openblas_->flops_per_pass();
  g.blas = {flops, blas};
  g.onednn = onednn_ ? GemmRate{flops, dnn} : GemmRate{};
  g.floor = {flops, best};
  g.library = course::engine_gemm_library(g.shapes, g.float64);
}

void report_gemm(const std::string& preset, const std::string& devices, const BenchGemm& g, double seconds_per_step,
                 nlohmann::json& out) {
  const GemmRate &floor = g.floor, &blas = g.blas;
  const double engine_gflops = floor.flops_per_step / seconds_per_step / 1e9;
  const double ratio = engine_gflops / floor.gflops(), to_openblas = engine_gflops / blas.gflops();
  const std::string onednn_words = g.onednn.seconds > 0 ? strf("oneDNN alone %.1f, ", g.onednn.gflops()) : "";
  std::cout << strf("           GEMM: %.2f GFLOP per step; best of both per shape alone %.1f GFLOP/s (%.2f ms), %s"
                    "OpenBLAS alone %.1f GFLOP/s; engine step %.1f GFLOP/s = %.0f%% of the best of both per shape "
                    "alone (%.0f%% of OpenBLAS); the engine ran %s\n",
                    floor.flops_per_step / 1e9, floor.gflops(), 1e3 * floor.seconds, onednn_words.c_str(),
                    blas.gflops(), engine_gflops, 100 * ratio, 100 * to_openblas, g.library.c_str());
  nlohmann::json shapes = nlohmann::json::array();
  for (size_t i = 0; i < g.shapes.size(); ++i) {
    const GemmShape& s = g.shapes[i];
    nlohmann::json j{{"what", s.what},
                     {"M", s.M},
                     {"N", s.N},
                     {"K", s.K},
                     {"library", cpu_gemm_library(g.float64, course::cpu_gemm_shape(s))},
                     {"openblas_ms", 1e3 * g.openblas_by_shape[i]}};
    if (!g.onednn_by_shape.empty()) j["onednn_ms"] = 1e3 * g.onednn_by_shape[i];
    shapes.push_back(j);
  }
  out["gemm"] = {{"model", preset},
                 {"devices", devices},
                 {"batch", g.batch},
                 {"shapes", shapes},
                 {"flops_per_step", floor.flops_per_step},
                 {"gemm_library", g.library},
                 {"floor_gflops", floor.gflops()},
                 {"floor_ms", 1e3 * floor.seconds},
                 {"openblas_gflops", blas.gflops()},
                 {"openblas_ms", 1e3 * blas.seconds},
                 {"engine_gflops", engine_gflops},
                 {"engine_to_floor", ratio},
                 {"engine_to_openblas", to_openblas}};
  if (g.onednn.seconds > 0) {
    out["gemm"]["onednn_gflops"] = g.onednn.gflops();
    out["gemm"]["onednn_ms"] = 1e3 * g.onednn.seconds;
  }
}

void report_gemm_libraries(const std::vector<int64_t>& chunks, const ModelSpec& spec, nlohmann::json& row) {
  std::vector<GemmShape> shapes;
  std::vector<int64_t> sizes;
  for (int64_t chunk : chunks) {
    if (chunk == 0 || std::find(sizes.begin(), sizes.end(), chunk) != sizes.end()) continue;
    sizes.push_back(chunk);
    for (const GemmShape& s : course::mlp_step_gemms(spec, chunk)) shapes.push_back(s);
  }
  if (shapes.empty()) return;
  const bool float64 = spec.dtype == DType::Float64;
  nlohmann::json counts = nlohmann::json::object();
  for (const auto& [name, count] : course::engine_gemm_libraries(shapes, float64)) counts[name] = count;
  row["gemm_libraries"] = counts;
  std::cout << "           GEMM: " << course::engine_gemm_library(shapes, float64) << "\n";
}

}  // namespace dpv::cli
