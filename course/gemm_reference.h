#pragma once
// The GEMMs of one training step of an MLP, and the rate of the GEMM library alone on exactly those
// shapes, single-threaded: the yardstick for "how close does the engine get to its BLAS". The floor
// is the faster of OpenBLAS and oneDNN on each shape alone (the engine's CPU backend times both per
// shape and keeps the faster: engine/core_backends.h); each library alone is timed beside it.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/core_backends.h"
#include "engine/model_spec.h"

namespace dpv::course {

struct GemmShape {
  std::string what;  // "2.forward", "2.grad_weight", "2.grad_input"
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
};

// Per Linear layer (in -> out) on a batch of B: forward  y = x w^T      [B,out] <- [B,in] [out,in]^T
//                                              weight  dw = dy^T x    [out,in] <- [B,out]^T [B,in]
//                                              input   dx = dy w      [B,in]   <- [B,out] [out,in]
// (w is the layer's weight [out, in].)
// The model's first layer's input gradient is left out (PyTorch does not compute it: the input needs
// no grad); a Linear layer after others (a CNN's classifier) has one.
std::vector<GemmShape> mlp_step_gemms(const ModelSpec& spec, int64_t batch);

struct GemmRate {
  double flops_per_step = 0;  // one pass over every shape
  double seconds = 0;         // measured time for one pass
  double gflops() const { return seconds > 0 ? flops_per_step / seconds / 1e9 : 0; }
};

// Which GEMM a reference times: the engine CPU backend's own `gemm` (the library it picks per
// product, called with beta = 0 as a fresh gradient is), cblas_sgemm / cblas_dgemm directly, or
// oneDNN's sgemm alone (float32, in a build with oneDNN: cpu_has_onednn()).
enum class GemmLibrary { EngineCpu, OpenBlas, Onednn };

// The named GEMMs with one thread, as inside each engine device worker, over fixed random operands
// of `shapes`. Timing one pass at a time lets a caller interleave it with the engine's steps, so
// both see the same load on a shared machine.
class GemmReference {
 public:
  GemmReference(std::vector<GemmShape> shapes, bool float64, GemmLibrary library);
  ~GemmReference();
  GemmReference(const GemmReference&) = delete;
  GemmReference& operator=(const GemmReference&) = delete;
  double flops_per_pass() const { return flops_; }
  double time_one_pass();  // seconds
  // Each shape's seconds in the last pass, in the order of `shapes`.
  const std::vector<double>& last_pass_by_shape() const { return by_shape_; }

 private:
  struct Buffers;
  void run_shape(size_t i);
  std::vector<GemmShape> shapes_;
  bool float64_;
  GemmLibrary library_;
  double flops_ = 0;
  std::vector<double> by_shape_;
  std::unique_ptr<Buffers> buffers_;
};

// The engine CPU backend's product shape for a step's GEMM (beta 0, as a fresh gradient is computed).
CpuGemmShape cpu_gemm_shape(const GemmShape& s);
// How many of `shapes` the engine's CPU backend runs with each library, in first-seen order:
// {"oneDNN sgemm", 6}, {"OpenBLAS sgemm", 2}; float64: {"OpenBLAS dgemm", n}.
std::vector<std::pair<std::string, int>> engine_gemm_libraries(const std::vector<GemmShape>& shapes, bool float64);
// The same as words: "oneDNN sgemm for 6 shapes, OpenBLAS sgemm for 2".
std::string engine_gemm_library(const std::vector<GemmShape>& shapes, bool float64);

}  // namespace dpv::course
