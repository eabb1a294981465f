#pragma once
// The GEMMs of one training step of an MLP, and OpenBLAS's own single-threaded sgemm/dgemm rate
// on exactly those shapes: the yardstick for "how close does the engine get to its BLAS".
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model_spec.h"

namespace dpv::cli {

struct GemmShape {
  std::string what;  // "2.forward", "2.grad_weight", "2.grad_input"
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0;
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K); }
};

// Per Linear layer (in -> out) on a batch of B: forward  y = x W^T      [B,out] <- [B,in] [out,in]^T
//                                              weight  dW = dy^T x    [out,in] <- [B,out]^T [B,in]
//                                              input   dx = dy W      [B,in]   <- [B,out] [out,in]
// The first layer's input gradient is left out (PyTorch does not compute it: the input needs no grad).
std::vector<GemmShape> mlp_step_gemms(const ModelSpec& spec, int64_t batch);

struct GemmRate {
  double flops_per_step = 0;  // one pass over every shape
  double seconds = 0;         // measured time for one pass
  double gflops() const { return seconds > 0 ? flops_per_step / seconds / 1e9 : 0; }
};

// cblas_sgemm (float32) or cblas_dgemm (float64) with one OpenBLAS thread, as inside each engine
// device worker, over fixed random operands of `shapes`. Timing one pass at a time lets a caller
// interleave it with the engine's steps, so both see the same load on a shared machine.
class GemmReference {
 public:
  GemmReference(std::vector<GemmShape> shapes, bool float64);
  ~GemmReference();
  GemmReference(const GemmReference&) = delete;
  GemmReference& operator=(const GemmReference&) = delete;
  double flops_per_pass() const { return flops_; }
  double time_one_pass();  // seconds

 private:
  struct Buffers;
  std::vector<GemmShape> shapes_;
  bool float64_;
  double flops_ = 0;
  std::unique_ptr<Buffers> buffers_;
};

// Best of several passes, repeated for at least `min_seconds`.
GemmRate measure_openblas(const std::vector<GemmShape>& shapes, bool float64, double min_seconds = 0.3);

}  // namespace dpv::cli
