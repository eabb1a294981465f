#pragma once
// Helpers shared by the tests of the sharded strategies (zero_strategy_test.cpp,
// zero_stages_test.cpp): a model with uneven parameter sizes, a run of DdpTrainer with a ZeRO stage
// (0 = plain DDP, the reference), and the DDP tensors laid out as FSDP's flat parameter.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "dp_test_support.h"
#include "engine/ddp/ddp.h"
#include "engine/zero/flat_layout.h"

namespace dpv::testing {

// Linear(5,7)-BN(7)-ReLU-Linear(7,3): 35, 7, 7, 7, 21 and 3 elements (80), so no W in 3, 6, 7
// divides the flat parameter and ZeRO-1's greedy partition has ties to break. Without the first
// bias (73 elements) for Adam and AdamW: a bias feeding a BatchNorm has a gradient of pure rounding
// noise, which Adam scales up to a step of about lr, so two correct programs that round differently
// (DDP's and FSDP's averaging) would move it differently.
inline ModelSpec uneven_mlp(DType dtype, bool bias_before_batchnorm = true) {
  ModelSpec m;
  m.layers = {linear(5, 7), bn1d(7), relu(), linear(7, 3)};
  m.layers[0].bias = bias_before_batchnorm;
  m.dtype = dtype;
  return m;
}

struct ZeroRun {
  std::unique_ptr<DdpTrainer> trainer;
  std::vector<DdpRankResult> results;
};

inline DdpOptions zero_options(int zero, const OptimizerSettings& optimizer) {
  DdpOptions o;
  o.optimizer = optimizer;
  o.zero_stage = zero;
  return o;
}

// `steps` iterations of DDP (zero 0) or ZeRO-`zero` on W in-process ranks, straight through.
inline ZeroRun run_zero(int zero, int world, const ModelSpec& spec, const TensorMap& state, const Batch& batch,
                        const OptimizerSettings& optimizer, int steps) {
  ZeroRun run;
  run.trainer = std::make_unique<DdpTrainer>(DeviceSet::create("cpu:" + std::to_string(world)), Model(spec), state,
                                             zero_options(zero, optimizer));
  for (int s = 0; s < steps; ++s) DdpIteration(*run.trainer, batch.input, batch.target).run_to_end();
  run.results = run.trainer->results();
  return run;
}

inline std::vector<ParamExtent> param_extents_of(const ModelSpec& spec) {
  std::vector<ParamExtent> out;
  const Model model(spec);
  for (const auto& d : model.parameter_decls()) out.push_back({d.name, d.shape, shape_numel(d.shape)});
  return out;
}

// Per-parameter tensors (a state dict, gradients, one optimizer state) as FSDP's flat parameter:
// model order, zeros after the last parameter. [L]
inline std::vector<double> flat_of(const TensorMap& per_param, const FlatLayout& layout) {
  std::vector<double> flat(static_cast<size_t>(layout.padded_numel), 0.0);
  for (const FlatEntry& e : layout.entries) {
    const std::vector<double> v = per_param.at(e.name).to(nullptr).to_doubles();
    EXPECT_EQ(static_cast<int64_t>(v.size()), e.numel) << e.name;
    std::copy(v.begin(), v.end(), flat.begin() + e.offset);
  }
  return flat;
}

// Rank r's slice of a flat [L]. [L/W]
inline std::vector<double> slice_of(const std::vector<double>& flat, const FlatLayout& layout, int rank) {
  const auto begin = flat.begin() + layout.shard_begin(rank);
  return {begin, begin + layout.shard_numel()};
}

// Every element within atol + rtol |want|; names the first that is not.
inline void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double rtol, double atol,
                            const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]))) {
      ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i] << " (off by "
                    << std::abs(got[i] - want[i]) << ")";
      return;
    }
}

// The same bits: what the broadcasts and the stage-by-stage driver must give.
inline bool same_values(const Tensor& a, const Tensor& b) {
  return a.defined() == b.defined() && (!a.defined() || (a.shape() == b.shape() && a.dtype() == b.dtype() &&
                                                         a.to(nullptr).to_doubles() == b.to(nullptr).to_doubles()));
}

// The same names, each with the same bits.
inline void expect_same_maps(const TensorMap& got, const TensorMap& want, const std::string& what) {
  EXPECT_EQ(got.names(), want.names()) << what;
  for (const auto& [name, t] : want.items())
    EXPECT_TRUE(got.contains(name) && same_values(got.at(name), t)) << what << " " << name;
}

}  // namespace dpv::testing
