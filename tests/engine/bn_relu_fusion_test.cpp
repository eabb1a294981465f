// BatchNorm + ReLU in one pass: the backend's fused ops give the unfused ops' numbers bit for bit
// (CPU loops and Backend's composed defaults, float32 and float64, [N, C] and [N, C, S], NaN and
// values at zero), a training step with the fusion (nobody looks) matches one without it (an
// observer that wants snapshots) exactly over several steps, and a snapshot taken on demand after
// a fused stage still shows the BatchNorm's own output and the ReLU's masked gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "dp_test_support.h"
#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_output.h"

namespace dpv::testing {
namespace {

struct OpCase {
  DType dtype;
  int64_t N, C, S;
};

void PrintTo(const OpCase& c, std::ostream* os) {
  *os << dtype_name(c.dtype) << " [" << c.N << ", " << c.C << ", " << c.S << "]";
}

// Values that exercise the mask: exact zeros after normalisation, negatives, a NaN.
std::vector<double> values(int64_t n, uint64_t seed, bool with_nan) {
  Rng rng(seed);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = rng.normal() * 1.5;
  if (n > 3) v[3] = 0.0;
  if (with_nan && n > 7) v[7] = std::numeric_limits<double>::quiet_NaN();
  return v;
}

bool same_bits(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) && std::isnan(b[i])) continue;
    if (a[i] != b[i] || std::signbit(a[i]) != std::signbit(b[i])) return false;
  }
  return true;
}

class FusedOps : public ::testing::TestWithParam<OpCase> {};

TEST_P(FusedOps, MatchTheUnfusedOpsBitForBit) {
  const OpCase c = GetParam();
  auto be = make_cpu_backend();
  const Shape shape{c.N, c.C, c.S};
  const int64_t n = c.N * c.C * c.S;
  for (bool with_nan : {false, true}) {
    const Tensor x = Tensor::from_doubles(shape, c.dtype, values(n, 1, with_nan));
    const Tensor dy = Tensor::from_doubles(shape, c.dtype, values(n, 2, false));
    Tensor mean = Tensor::empty({c.C}, c.dtype), var = Tensor::empty({c.C}, c.dtype), inv = Tensor::empty({c.C}, c.dtype);
    be->bn_stats(x, mean, var, c.N, c.C, c.S);
    be->bn_invstd(var, 1e-5, inv);
    const Tensor gamma = Tensor::from_doubles({c.C}, c.dtype, values(c.C, 3, false));
    const Tensor beta = Tensor::from_doubles({c.C}, c.dtype, values(c.C, 4, false));
    const double count = static_cast<double>(c.N * c.S);

    // Unfused reference: normalize, relu, relu_backward, reduce, elemt.
    Tensor z = Tensor::empty(shape, c.dtype), y_ref = Tensor::empty(shape, c.dtype);
    be->bn_normalize(x, mean, inv, gamma, beta, z, c.N, c.C, c.S);
    be->relu_forward(z, y_ref);
    Tensor dz = Tensor::empty(shape, c.dtype), dx_ref = Tensor::empty(shape, c.dtype);
    be->relu_backward(y_ref, dy, dz);
    Tensor s1_ref = Tensor::empty({c.C}, c.dtype), s2_ref = Tensor::empty({c.C}, c.dtype);
    be->bn_backward_reduce(dz, x, mean, s1_ref, s2_ref, c.N, c.C, c.S);
    be->bn_backward_elemt(dz, x, mean, inv, gamma, s1_ref, s2_ref, count, dx_ref, c.N, c.C, c.S);

    // The CPU backend's fused loops, then Backend's composed defaults (what CUDA runs).
    for (bool defaults : {false, true}) {
      SCOPED_TRACE(std::string(defaults ? "Backend defaults" : "CPU fused loops") + (with_nan ? ", with a NaN" : ""));
      Tensor y = Tensor::empty(shape, c.dtype), dx = Tensor::empty(shape, c.dtype);
      Tensor s1 = Tensor::empty({c.C}, c.dtype), s2 = Tensor::empty({c.C}, c.dtype);
      if (defaults) {
        be->Backend::bn_normalize_relu(x, mean, inv, gamma, beta, y, c.N, c.C, c.S);
        be->Backend::bn_relu_backward(dy, y, x, mean, inv, gamma, s1, s2, count, dx, c.N, c.C, c.S);
      } else {
        be->bn_normalize_relu(x, mean, inv, gamma, beta, y, c.N, c.C, c.S);
        be->bn_relu_backward(dy, y, x, mean, inv, gamma, s1, s2, count, dx, c.N, c.C, c.S);
      }
      EXPECT_TRUE(same_bits(y.to_doubles(), y_ref.to_doubles()));
      EXPECT_TRUE(same_bits(s1.to_doubles(), s1_ref.to_doubles()));
      EXPECT_TRUE(same_bits(s2.to_doubles(), s2_ref.to_doubles()));
      EXPECT_TRUE(same_bits(dx.to_doubles(), dx_ref.to_doubles()));
    }
    // The mask really bites: some outputs are clamped, so a fusion that skipped the ReLU would differ.
    int clamped = 0;
    for (double v : z.to_doubles()) clamped += v < 0;
    EXPECT_GT(clamped, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FusedOps,
                         ::testing::Values(OpCase{DType::Float32, 16, 7, 1}, OpCase{DType::Float64, 16, 7, 1},
                                           OpCase{DType::Float32, 4, 3, 10}, OpCase{DType::Float64, 4, 3, 10},
                                           OpCase{DType::Float32, 3, 5, 17}));

LayerSpec conv(int64_t in, int64_t out) {
  LayerSpec s;
  s.kind = LayerKind::Conv2d;
  s.in_channels = in;
  s.out_channels = out;
  s.kernel_size = 3;
  s.padding = 1;
  return s;
}
LayerSpec bn2d(int64_t c) {
  LayerSpec s;
  s.kind = LayerKind::BatchNorm2d;
  s.num_features = c;
  return s;
}
LayerSpec flatten() {
  LayerSpec s;
  s.kind = LayerKind::Flatten;
  return s;
}

ModelSpec mlp(DType dtype) {
  ModelSpec m;
  m.layers = {linear(4, 6), bn1d(6), relu(), linear(6, 5), bn1d(5), relu(), linear(5, 3)};
  m.dtype = dtype;
  return m;
}
ModelSpec cnn(DType dtype) {
  ModelSpec m;
  m.layers = {conv(2, 3), bn2d(3), relu(), flatten(), linear(3 * 5 * 5, 3)};
  m.dtype = dtype;
  return m;
}

Batch batch_for(const ModelSpec& spec, int64_t n) {
  if (spec.layers[0].kind == LayerKind::Conv2d) {
    const Batch flat = random_batch(n, 2 * 5 * 5, 3, 11, spec.dtype);
    return {flat.input.reshape({n, 2, 5, 5}), flat.target};
  }
  return random_batch(n, 4, 3, 11, spec.dtype);
}

struct Looker : Observer {
  void on_stage(const StageEvent&) override {}
};

struct StepCase {
  std::string model;
  DType dtype;
  int devices;
};

void PrintTo(const StepCase& c, std::ostream* os) {
  *os << c.model << " " << dtype_name(c.dtype) << " on cpu:" << c.devices;
}

class FusedSteps : public ::testing::TestWithParam<StepCase> {};

// Three SGD steps with momentum: the plain run (fused: nobody looks) and the watched run (unfused:
// an observer wants every stage's snapshot) end with the same parameters, buffers, gradients and loss.
TEST_P(FusedSteps, TrainExactlyLikeTheUnfusedLayers) {
  const StepCase c = GetParam();
  const ModelSpec spec = c.model == "cnn" ? cnn(c.dtype) : mlp(c.dtype);
  const TensorMap state = Model(spec).initial_state(5);
  const Batch b = batch_for(spec, 12);
  TrainOptions options;
  options.optimizer.momentum = 0.9;
  const std::string devices = "cpu:" + std::to_string(c.devices);
  Trainer plain(DeviceSet::create(devices), Model(spec), state, options);
  Trainer watched(DeviceSet::create(devices), Model(spec), state, options);
  Looker looker;
  for (int step = 0; step < 3; ++step) {
    Iteration a(plain, b.input, b.target);
    Iteration w(watched, b.input, b.target, &looker);
    ASSERT_FALSE(a.snapshots());
    ASSERT_TRUE(w.snapshots());
    a.run_to_end();
    w.run_to_end();
    EXPECT_EQ(a.loss(), w.loss()) << "step " << step;
    EXPECT_TRUE(same_bits(a.output().to_doubles(), w.output().to_doubles())) << "step " << step;
  }
  for (const auto& [name, g] : plain.grads().items())
    EXPECT_TRUE(same_bits(g.to_doubles(), watched.grads().at(name).to_doubles())) << name;
  for (const auto& [name, t] : plain.state().items())
    EXPECT_TRUE(same_bits(t.to_doubles(), watched.state().at(name).to_doubles())) << name;
}

INSTANTIATE_TEST_SUITE_P(Models, FusedSteps,
                         ::testing::Values(StepCase{"mlp", DType::Float32, 1}, StepCase{"mlp", DType::Float64, 1},
                                           StepCase{"mlp", DType::Float32, 2}, StepCase{"cnn", DType::Float32, 1},
                                           StepCase{"cnn", DType::Float64, 2}));

// DDP's ranks the same way: run through (fused: nobody looks; checked in the caches) and stepped
// stage by stage (unfused: snapshots show each BatchNorm's own output) train to the same bits.
TEST_P(FusedSteps, DdpRanksTrainExactlyLikeTheUnfusedLayers) {
  const StepCase c = GetParam();
  const ModelSpec spec = c.model == "cnn" ? cnn(c.dtype) : mlp(c.dtype);
  const TensorMap state = Model(spec).initial_state(5);
  const Batch b = batch_for(spec, 12);
  DdpOptions options;
  options.optimizer.momentum = 0.9;
  const std::string devices = "cpu:" + std::to_string(std::max(c.devices, 2));  // ranks that meet
  DdpTrainer through(DeviceSet::create(devices), Model(spec), state, options);
  DdpTrainer stepped(DeviceSet::create(devices), Model(spec), state, options);
  for (int step = 0; step < 3; ++step) {
    DdpIteration a(through, b.input, b.target);
    DdpIteration w(stepped, b.input, b.target);
    a.run_to_end();
    while (!w.finished()) w.step();
    EXPECT_TRUE(through.rank(0).caches()[1].relu_fused) << "step " << step << ": the run-through did not fuse";
    EXPECT_FALSE(stepped.rank(0).caches()[1].relu_fused) << "step " << step << ": the stepped run fused";
  }
  const DdpStepOutput x = ddp_step_output(through.results(), c.dtype);
  const DdpStepOutput y = ddp_step_output(stepped.results(), c.dtype);
  ASSERT_EQ(x.tensors.names(), y.tensors.names());
  for (const auto& [name, t] : x.tensors.items())
    EXPECT_TRUE(same_bits(t.to_doubles(), y.tensors.at(name).to_doubles())) << name;
}

const TensorInfo* find_tensor(const std::vector<DeviceState>& devices, const std::string& name) {
  for (const auto& t : devices.at(0).tensors)
    if (t.name == name) return &t;
  return nullptr;
}

// Stepping stage by stage with snapshots off, then looking (devices_now): right after the fused
// BatchNorm's forward the flow is shown as the BatchNorm's own output (negative values and all,
// rebuilt on demand), and right after the ReLU's pass-through backward as ReLU's masked gradient;
// both equal what an unfused run holds at the same point.
TEST(FusedSnapshots, OnDemandShowsEachLayersOwnTensor) {
  const ModelSpec spec = mlp(DType::Float64);
  const TensorMap state = Model(spec).initial_state(5);
  const Batch b = batch_for(spec, 12);
  Trainer plain(DeviceSet::create("cpu:1"), Model(spec), state, {});
  Trainer watched(DeviceSet::create("cpu:1"), Model(spec), state, {});
  Iteration a(plain, b.input, b.target);
  Iteration w(watched, b.input, b.target);
  w.set_snapshots(true);
  int checked = 0;
  while (!a.finished()) {
    const StageEvent ea = a.step();
    const StageEvent ew = w.step();
    const Stage& s = ea.stage;
    const bool after_bn_forward = s.kind == StageKind::Forward && s.layer == 1;
    const bool after_relu_backward = s.kind == StageKind::Backward && s.layer == 2;
    if (!after_bn_forward && !after_relu_backward) continue;
    const std::string name = after_bn_forward ? "activation 1" : "grad of activation 1";
    const std::vector<DeviceState> now = a.devices_now();
    const TensorInfo* seen = find_tensor(now, name);
    const TensorInfo* truth = find_tensor(ew.devices, name);
    ASSERT_NE(seen, nullptr) << name;
    ASSERT_NE(truth, nullptr) << name;
    EXPECT_EQ(seen->shape, truth->shape);
    EXPECT_TRUE(same_bits(seen->head, truth->head)) << name;
    if (after_bn_forward) {
      bool negative = false;
      for (double v : seen->head) negative = negative || v < 0;
      EXPECT_TRUE(negative) << "BatchNorm's own output has negative values; the ReLU's has none";
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

}  // namespace
}  // namespace dpv::testing
