// What the stage snapshots say each device holds agrees with the devices' own allocation counters
// at every stage: each tensor once (replica 0's parameters are the module's), the memory split by
// kind adds up to the counter, replicas freed after the backward leave their devices empty, and the
// weight element followed through Reduce and Step carries the engine's own numbers.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "dp_test_support.h"

namespace dpv::testing {
namespace {

struct Case {
  std::string name;
  std::string devices;
  int64_t batch;
  bool bn;
  bool sync_bn;
  double momentum;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

ModelSpec model_for(const Case& c) {
  ModelSpec m;
  if (c.bn)
    m.layers = {linear(4, 6), bn1d(6), relu(), linear(6, 3)};
  else
    m.layers = {linear(4, 8), relu(), linear(8, 3)};
  m.dtype = DType::Float64;
  return m;
}

int64_t state_bytes(const TensorMap& state) {
  int64_t b = 0;
  for (const auto& [name, t] : state.items()) b += static_cast<int64_t>(t.nbytes());
  return b;
}

class StageSnapshots : public ::testing::TestWithParam<Case> {};

TEST_P(StageSnapshots, PictureAndMemoryAgreeWithTheEngineAtEveryStage) {
  const Case c = GetParam();
  const ModelSpec spec = model_for(c);
  TrainOptions options;
  options.sync_bn = c.sync_bn;
  options.optimizer.momentum = c.momentum;
  options.optimizer.lr = 0.1;
  Trainer trainer(DeviceSet::create(c.devices), Model(spec), Model(spec).initial_state(5), options);
  const Batch batch = random_batch(c.batch, 4, 3, 9);
  const int64_t params = state_bytes(trainer.state());
  for (int iteration = 0; iteration < 2; ++iteration) {  // the second one runs with .grad and momentum from the first
    Iteration it(trainer, batch.input, batch.target);
    it.set_snapshots(true);
    const int R = it.replicas();
    bool freed = false;
    while (!it.finished()) {
      const StageEvent e = it.step();
      const std::string where = std::string("iteration ") + std::to_string(iteration) + ", " + e.stage.title;
      freed = freed || e.stage.kind == StageKind::ReduceGrads ||
              (R == 1 && trainer.devices().size() == 1 && e.stage.kind == StageKind::Backward && e.stage.layer == 0);
      for (const DeviceState& d : e.devices) {
        const std::string at = where + ", device " + std::to_string(d.device);
        // Every byte the device's counter holds is a tensor the snapshot lists, once.
        EXPECT_EQ(d.memory.other, 0) << at;
        EXPECT_EQ(d.memory.total(), d.memory_bytes) << at;
        // Each tensor counts in one part of the bar, views in none; the parts add up per kind.
        MemoryBreakdown by_kind;
        for (const TensorInfo& t : d.tensors) {
          if (t.view) continue;
          const auto b = static_cast<int64_t>(t.bytes);
          switch (t.memory) {
            case MemoryKind::Batch: by_kind.batch += b; break;
            case MemoryKind::Parameters: by_kind.parameters += b; break;
            case MemoryKind::Gradients: by_kind.gradients += b; break;
            case MemoryKind::Activations: by_kind.activations += b; break;
            case MemoryKind::Optimizer: by_kind.optimizer += b; break;
            case MemoryKind::Output: by_kind.output += b; break;
            case MemoryKind::Buckets: by_kind.buckets += b; break;
            case MemoryKind::Gathered: by_kind.gathered += b; break;
          }
        }
        EXPECT_EQ(by_kind.batch, d.memory.batch) << at;
        EXPECT_EQ(by_kind.parameters, d.memory.parameters) << at;
        EXPECT_EQ(by_kind.gradients, d.memory.gradients) << at;
        EXPECT_EQ(by_kind.activations, d.memory.activations) << at;
        EXPECT_EQ(by_kind.optimizer, d.memory.optimizer) << at;
        EXPECT_EQ(by_kind.output, d.memory.output) << at;
        EXPECT_EQ(d.memory.buckets, 0) << at << ": DataParallel has no DDP buckets";
        if (d.device == 0 && trainer.devices().size() > 1 && it.output().defined()) {
          EXPECT_GE(d.memory.output, static_cast<int64_t>(it.output().nbytes())) << at << ": the gathered output";
        }
        std::set<std::string> names;
        int64_t param_bytes = 0;
        int inputs = 0;
        for (const TensorInfo& t : d.tensors) {
          EXPECT_TRUE(names.insert(t.name).second) << at << ": " << t.name << " listed twice";
          EXPECT_EQ(t.device, d.device) << at << ": " << t.name;
          EXPECT_FALSE(t.why.empty()) << at << ": " << t.name;
          if (t.role == TensorRole::Param || t.role == TensorRole::Buffer) param_bytes += static_cast<int64_t>(t.bytes);
          if (t.role == TensorRole::Input) ++inputs;
          if (t.first_row >= 0) {
            EXPECT_EQ(t.shape[0], t.name == "inputs" ? c.batch : d.chunk_rows) << at;
          }
        }
        if (d.device == 0) {
          // The module's parameters once, whatever the stage (replica 0's are the same tensors).
          EXPECT_EQ(param_bytes, params) << at;
          EXPECT_EQ(d.memory.parameters, params) << at;
          // The batch sits on GPU 0 from the start (`.cuda()`), and the memory says so.
          EXPECT_TRUE(names.count("inputs")) << at;
          EXPECT_GE(d.memory.batch, static_cast<int64_t>(batch.input.nbytes() + batch.target.nbytes())) << at;
          EXPECT_EQ(d.memory.optimizer > 0, c.momentum != 0 && (iteration > 0 || e.stage.kind == StageKind::Step)) << at;
        } else if (d.device < R) {
          EXPECT_LE(inputs, 1) << at << ": one input chunk, no second chip";
          if (freed) {
            EXPECT_FALSE(d.has_replica) << at;
            EXPECT_TRUE(d.replica_discarded) << at;
            EXPECT_TRUE(d.tensors.empty()) << at;
            EXPECT_EQ(d.memory_bytes, 0) << at << ": the discarded replica's memory is free";
          } else if (e.stage.kind != StageKind::Scatter) {
            EXPECT_TRUE(d.has_replica) << at;
            EXPECT_FALSE(d.replica_discarded) << at;
            EXPECT_EQ(param_bytes, params) << at;
          }
        } else {  // idle: nothing ever lands here
          EXPECT_EQ(d.memory_bytes, 0) << at;
          EXPECT_TRUE(d.tensors.empty()) << at;
        }
        if (freed) {
          for (const TensorInfo& t : d.tensors) EXPECT_NE(t.role, TensorRole::Activation) << at << ": " << t.name;
        }
      }
      if (e.stage.kind == StageKind::Replicate) {
        for (int d = 1; d < R; ++d) {
          int inputs = 0;
          for (const TensorInfo& t : e.devices[static_cast<size_t>(d)].tensors)
            inputs += t.role == TensorRole::Input || t.name.find("input chunk") != std::string::npos;
          EXPECT_EQ(inputs, 1) << where << " device " << d;
        }
      }
      if (e.stage.kind == StageKind::ReduceGrads || e.stage.kind == StageKind::Step) {
        ASSERT_TRUE(e.weight.has_value()) << where;
        const WeightElement& w = *e.weight;
        EXPECT_EQ(w.param, "0.weight");
        ASSERT_EQ(static_cast<int>(w.replica_grads.size()), R) << where;
        double sum = 0;
        for (double g : w.replica_grads) sum += g;
        EXPECT_NEAR(sum, w.grad, 1e-12) << where;
        ASSERT_TRUE(w.single_device_grad.has_value()) << where;
        if (!c.bn || c.sync_bn || R == 1) {
          EXPECT_NEAR(*w.single_device_grad, w.grad, 1e-10) << where;
        }
        // Per-device BatchNorm is the exception: its chunks normalised with their own statistics.
        if (c.bn && !c.sync_bn && R > 1) {
          EXPECT_GT(std::abs(*w.single_device_grad - w.grad), 1e-9) << where;
        }
        ASSERT_TRUE(w.difference.has_value()) << where;
        EXPECT_DOUBLE_EQ(*w.difference, w.grad - *w.single_device_grad) << where;
        const double g = trainer.grads().at("0.weight").to_doubles(1)[0];
        EXPECT_DOUBLE_EQ(w.grad, g) << where;
        if (e.stage.kind == StageKind::Step) {
          ASSERT_TRUE(w.weight_before && w.weight_after) << where;
          EXPECT_DOUBLE_EQ(*w.weight_after, trainer.state().at("0.weight").to_doubles(1)[0]) << where;
          if (c.momentum == 0) {
            EXPECT_NEAR(*w.weight_after, *w.weight_before - 0.1 * w.grad, 1e-12) << where;
          }
        }
      }
    }
  }
}

TEST(StageSnapshot, BeforeTheFirstStageTheBatchAndTheModuleAreOnDeviceZero) {
  const ModelSpec spec = mlp_bn();
  Trainer trainer(DeviceSet::create("cpu:4"), Model(spec), Model(spec).initial_state(5), {});
  const Batch batch = random_batch(8, 4, 3, 9);
  Iteration it(trainer, batch.input, batch.target);
  const std::vector<DeviceState> devices = it.devices_now();
  ASSERT_EQ(devices.size(), 4u);
  std::set<std::string> names;
  for (const TensorInfo& t : devices[0].tensors) names.insert(t.name);
  EXPECT_TRUE(names.count("inputs") && names.count("labels") && names.count("0.weight"));
  EXPECT_EQ(devices[0].memory.other, 0);
  EXPECT_EQ(devices[0].memory.batch, static_cast<int64_t>(batch.input.nbytes() + batch.target.nbytes()));
  for (int d = 1; d < 4; ++d) {
    EXPECT_TRUE(devices[static_cast<size_t>(d)].tensors.empty());
    EXPECT_EQ(devices[static_cast<size_t>(d)].memory_bytes, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, StageSnapshots,
    ::testing::Values(Case{"mlp_on_4_devices_batch_10", "cpu:4", 10, false, false, 0.0},
                      Case{"mlp_on_4_devices_batch_6_one_idle", "cpu:4", 6, false, false, 0.0},
                      Case{"batchnorm_on_4_devices_batch_8_momentum", "cpu:4", 8, true, false, 0.9},
                      Case{"sync_batchnorm_on_3_devices_batch_9", "cpu:3", 9, true, true, 0.0},
                      Case{"mlp_on_one_device", "cpu:1", 6, false, false, 0.9},
                      Case{"batchnorm_on_8_devices_batch_10", "cpu:8", 10, true, false, 0.0}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace dpv::testing
