#pragma once
// `dpv bench`'s GEMM yardstick: the large MLP's step GEMMs timed with each library alone, shape by
// shape, between the engine's timed rounds; the engine's step rate against the faster library per
// shape; and per model the library the engine's CPU backend chose for each product shape.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "course/gemm_reference.h"
#include "engine/model_spec.h"

namespace dpv::cli {

struct BenchGemm {
  bool float64 = false;
  int64_t batch = 0;
  std::vector<course::GemmShape> shapes;  // the step's GEMMs
  std::string library;                    // what the engine's CPU backend runs them with, in words
  course::GemmRate floor;                 // the faster library alone on each shape
  course::GemmRate blas, onednn;          // OpenBLAS alone; oneDNN alone (float32 with oneDNN)
  std::vector<double> openblas_by_shape, onednn_by_shape;  // seconds per shape, each one's best round
};

// The references timed between the engine's rounds: each library alone, shape by shape.
class GemmReferences {
 public:
  // Makes the operands of `spec`'s step GEMMs on `batch` and warms both libraries up.
  GemmReferences(BenchGemm& g, const ModelSpec& spec, int64_t batch);
  // One round of `passes` passes of each library: each shape's mean pass, kept if its best so far.
  void time_round(int passes, BenchGemm& g);
  // The rates once every round is in, and the engine's choices (after its steps chose them).
  void finish(BenchGemm& g) const;

 private:
  std::unique_ptr<course::GemmReference> openblas_, onednn_;
};

// The yardstick's line and out["gemm"]; `seconds_per_step` is the engine's.
void report_gemm(const std::string& preset, const std::string& devices, const BenchGemm& g, double seconds_per_step,
                 nlohmann::json& out);

// "GEMM: oneDNN sgemm for 6 shapes, OpenBLAS sgemm for 2": the libraries the CPU backend ran the
// Linear products of a step on devices holding `chunks` samples with; row["gemm_libraries"] the same.
void report_gemm_libraries(const std::vector<int64_t>& chunks, const ModelSpec& spec, nlohmann::json& row);

}  // namespace dpv::cli
