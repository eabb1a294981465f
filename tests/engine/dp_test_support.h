#pragma once
// Helpers shared by the DataParallel tests: build a model, a batch, run one iteration.
#include <cmath>
#include <string>
#include <vector>

#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"

namespace dpv::testing {

inline LayerSpec linear(int64_t in, int64_t out) {
  LayerSpec s;
  s.kind = LayerKind::Linear;
  s.in_features = in;
  s.out_features = out;
  return s;
}
inline LayerSpec relu() {
  LayerSpec s;
  s.kind = LayerKind::ReLU;
  return s;
}
inline LayerSpec bn1d(int64_t c, double momentum = 0.1) {
  LayerSpec s;
  s.kind = LayerKind::BatchNorm1d;
  s.num_features = c;
  s.momentum = momentum;
  return s;
}

inline ModelSpec mlp_bn(DType dtype = DType::Float64) {
  ModelSpec m;
  m.layers = {linear(4, 6), bn1d(6), relu(), linear(6, 3)};
  m.dtype = dtype;
  return m;
}

struct Batch {
  Tensor input, target;
};

inline Batch random_batch(int64_t n, int64_t features, int classes, uint64_t seed, DType dtype = DType::Float64) {
  Rng rng(seed);
  std::vector<double> x(static_cast<size_t>(n * features));
  for (auto& v : x) v = rng.normal() * 2.0 + 0.5;
  std::vector<int64_t> y(static_cast<size_t>(n));
  for (auto& v : y) v = rng.randint(classes);
  return {Tensor::from_doubles({n, features}, dtype, x), Tensor::from_int64({n}, y)};
}

inline Batch rows(const Batch& b, int64_t begin, int64_t end) {
  return {b.input.slice0(begin, end).clone(), b.target.slice0(begin, end).clone()};
}

struct Result {
  std::vector<double> output;
  double loss = 0;
  TensorMap grads;  // host
  TensorMap state;  // host, after the step
  std::vector<BatchNormStats> bn;
  std::vector<int64_t> chunks;
};

inline Result run_iteration(const std::string& devices, const ModelSpec& spec, const TensorMap& state,
                            const Batch& batch, TrainOptions options = {}) {
  Trainer trainer(DeviceSet::create(devices), Model(spec), state, options);
  Iteration it(trainer, batch.input, batch.target);
  it.run_to_end();
  Result r;
  r.output = it.output().to_doubles();
  r.loss = it.loss();
  for (const auto& [n, t] : trainer.grads().items()) r.grads.set(n, t.to(nullptr));
  r.state = trainer.state_to_host();
  r.bn = it.batchnorm_stats();
  r.chunks = it.chunks();
  return r;
}

inline double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace dpv::testing
