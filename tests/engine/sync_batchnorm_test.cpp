// SyncBatchNorm across replicas equals BatchNorm over the whole batch on one device, even splits
// and uneven ones, and golden values of BatchNorm's forward and backward computed with PyTorch 1.13.
#include <gtest/gtest.h>

#include "engine/backend.h"
#include "engine/backend_registry.h"
#include "engine/layers/batchnorm.h"
#include "tests/engine/dp_test_support.h"

using namespace dpv;
using namespace dpv::testing;

namespace {
void expect_same(const Result& a, const Result& b, double tol, const std::string& what) {
  EXPECT_NEAR(a.loss, b.loss, tol) << what;
  EXPECT_LT(max_abs_diff(a.output, b.output), tol) << what;
  for (const auto& [name, g] : b.grads.items())
    EXPECT_LT(max_abs_diff(a.grads.at(name).to_doubles(), g.to_doubles()), tol) << what << " grad " << name;
  for (const auto& [name, t] : b.state.items())
    EXPECT_LT(max_abs_diff(a.state.at(name).to_doubles(), t.to_doubles()), tol) << what << " state " << name;
}
}  // namespace

TEST(SyncBatchNorm, EqualsSingleDeviceBatchNormForEvenAndUnevenSplits) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(9);
  TrainOptions sync;
  sync.sync_bn = true;
  for (int64_t n : {8, 10, 13, 17}) {
    const Batch batch = random_batch(n, 4, 3, static_cast<uint64_t>(n));
    const Result one = run_iteration("cpu:1", spec, state, batch);
    for (const char* devices : {"cpu:2", "cpu:3", "cpu:4"}) {
      const Result dp = run_iteration(devices, spec, state, batch, sync);
      expect_same(dp, one, 1e-10, std::string(devices) + " N=" + std::to_string(n));
      // Global statistics reported equal the whole batch's.
      const BatchNormStats* global = nullptr;
      for (const auto& s : dp.bn)
        if (s.device == -1) global = &s;
      ASSERT_NE(global, nullptr);
      EXPECT_LT(max_abs_diff(global->mean, one.bn[0].mean), 1e-12);
      EXPECT_LT(max_abs_diff(global->var, one.bn[0].var), 1e-10);
      EXPECT_EQ(global->count, static_cast<double>(n));
    }
  }
}

TEST(SyncBatchNorm, OneDeviceReportsGlobalStatisticsEqualToItsOwn) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(5);
  const Batch batch = random_batch(10, 4, 3, 11);
  TrainOptions sync;
  sync.sync_bn = true;
  const Result one = run_iteration("cpu:1", spec, state, batch, sync);
  const Result plain = run_iteration("cpu:1", spec, state, batch);
  const Result two = run_iteration("cpu:2", spec, state, batch, sync);
  expect_same(one, plain, 1e-15, "sync-bn on one device computes what plain BatchNorm does");

  {
    const int layer = 1;  // mlp_bn's BatchNorm1d
    const BatchNormStats *dev0 = nullptr, *global = nullptr, *global_two = nullptr;
    int globals = 0;
    for (const auto& s : one.bn) {
      if (s.layer != layer) continue;
      if (s.device == 0) dev0 = &s;
      if (s.device == -1) {
        global = &s;
        ++globals;
      }
    }
    for (const auto& s : two.bn)
      if (s.layer == layer && s.device == -1) global_two = &s;
    ASSERT_NE(dev0, nullptr) << "layer " << layer;
    ASSERT_NE(global, nullptr) << "layer " << layer << ": sync_bn on one device must report global statistics";
    EXPECT_EQ(globals, 1) << "layer " << layer;
    EXPECT_EQ(global->mean, dev0->mean) << "layer " << layer;
    EXPECT_EQ(global->var, dev0->var) << "layer " << layer;
    EXPECT_EQ(global->count, 10.0) << "layer " << layer;
    // The same whole-batch statistics a synchronised run on two devices reports.
    ASSERT_NE(global_two, nullptr);
    EXPECT_LT(max_abs_diff(global->mean, global_two->mean), 1e-12) << "layer " << layer;
    EXPECT_LT(max_abs_diff(global->var, global_two->var), 1e-10) << "layer " << layer;
  }
  for (const auto& s : plain.bn) EXPECT_GE(s.device, 0) << "no global statistics without sync_bn";
}

TEST(SyncBatchNorm, FloatModelStaysAtRoundingError) {
  const ModelSpec spec = mlp_bn(DType::Float32);
  const TensorMap state = Model(spec).initial_state(2);
  const Batch batch = random_batch(13, 4, 3, 21, DType::Float32);  // 4,4,4,1: one sample is fine when synced
  TrainOptions sync;
  sync.sync_bn = true;
  const Result one = run_iteration("cpu:1", spec, state, batch);
  const Result dp = run_iteration("cpu:4", spec, state, batch, sync);
  expect_same(dp, one, 1e-5, "float32 cpu:4 N=13");
}

// Golden values computed with PyTorch 1.13: x = 1..10, gamma 2, beta 0.5, a given upstream gradient.
class GoldenBatchNorm : public ::testing::Test {
 protected:
  struct Out {
    std::vector<double> y, dx, dgamma, dbeta, rm, rv;
  };
  // Runs the BatchNorm layer on rows [begin, end) with plain per-device statistics.
  Out run_chunk(int64_t begin, int64_t end) {
    LayerSpec spec = bn1d(1);
    spec.kind = LayerKind::BatchNorm1d;
    BatchNorm bn(spec);
    auto device = DeviceSet::create("cpu:1");
    Replica rep;
    rep.device = device->shared(0);
    rep.caches.resize(1);
    rep.params.set("0.weight", Tensor::from_doubles({1}, DType::Float64, {2.0}));
    rep.params.set("0.bias", Tensor::from_doubles({1}, DType::Float64, {0.5}));
    rep.buffers.set("0.running_mean", Tensor::from_doubles({1}, DType::Float64, {0.0}));
    rep.buffers.set("0.running_var", Tensor::from_doubles({1}, DType::Float64, {1.0}));
    rep.buffers.set("0.num_batches_tracked", Tensor::full({}, DType::Int64, 0));
    auto backend = make_cpu_backend();
    LayerRun run{*backend, rep, rep.caches[0], "0."};
    std::vector<double> x, dy;
    const std::vector<double> all_dy = {0.3, -1.2, 0.5, 2.0, -0.7, 0.1, 1.1, -0.4, 0.9, -1.5};
    for (int64_t i = begin; i < end; ++i) {
      x.push_back(static_cast<double>(i + 1));
      dy.push_back(all_dy[static_cast<size_t>(i)]);
    }
    const int64_t n = end - begin;
    Tensor y = bn.forward(run, Tensor::from_doubles({n, 1}, DType::Float64, x));
    Tensor dx = bn.backward(run, Tensor::from_doubles({n, 1}, DType::Float64, dy));
    return {y.to_doubles(), dx.to_doubles(), rep.grads.at("0.weight").to_doubles(), rep.grads.at("0.bias").to_doubles(),
            rep.buffers.at("0.running_mean").to_doubles(), rep.buffers.at("0.running_var").to_doubles()};
  }
};

TEST_F(GoldenBatchNorm, SingleDeviceMatchesReferenceValues) {
  Out o = run_chunk(0, 10);
  EXPECT_NEAR(o.y[0], -2.6333959, 1e-7);
  EXPECT_NEAR(o.y[9], 3.6333959, 1e-7);
  EXPECT_NEAR(o.rm[0], 0.55, 1e-12);
  EXPECT_NEAR(o.rv[0], 1.8166667, 1e-7);
  EXPECT_NEAR(o.dgamma[0], -1.3752126, 1e-7);
  EXPECT_NEAR(o.dbeta[0], 1.1, 1e-12);
  EXPECT_NEAR(o.dx[0], -0.0177241, 1e-7);
  EXPECT_NEAR(o.dx[9], -0.9710364, 1e-7);
}

TEST_F(GoldenBatchNorm, TwoDevicePerChunkMatchesReferenceValues) {
  Out a = run_chunk(0, 5), b = run_chunk(5, 10);
  EXPECT_NEAR(a.y[0], -2.3284201, 1e-7);
  EXPECT_NEAR(b.y[4], 3.3284201, 1e-7);
  // Replica 0's running statistics are the ones that survive.
  EXPECT_NEAR(a.rm[0], 0.30, 1e-12);
  EXPECT_NEAR(a.rv[0], 1.15, 1e-12);
  EXPECT_NEAR(b.rm[0], 0.80, 1e-12);  // replica 1's, discarded by DataParallel
  EXPECT_NEAR(a.dgamma[0] + b.dgamma[0], -1.5556310, 1e-7);
  EXPECT_NEAR(a.dbeta[0] + b.dbeta[0], 1.1, 1e-12);
  EXPECT_NEAR(a.dx[0], 0.5091139, 1e-7);
  EXPECT_NEAR(b.dx[4], -1.2162254, 1e-7);
}
