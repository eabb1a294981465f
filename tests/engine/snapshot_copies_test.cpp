// Snapshots only when someone looks: a plain iteration copies nothing from its devices to the
// host between stages, and a snapshot copies only the values it keeps (six head values, a
// BatchNorm layer's [C] statistics), never a whole activation.
#include <gtest/gtest.h>

#include "counting_backend.h"
#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/model_spec.h"

namespace dpv::testing {
namespace {

struct Case {
  std::string preset;
  int devices;
  bool sync_bn;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.preset << " on cpu:" << c.devices << (c.sync_bn ? " with SyncBatchNorm" : "");
}

Dataset batch_for(const std::string& preset) {
  if (preset == "cnn") return make_images(10, 10, 3, 32, 32, 5);
  return make_spiral(32, 3, 5);
}

struct Looker : Observer {
  int stages = 0;
  void on_stage(const StageEvent&) override { ++stages; }
};

class SnapshotCopies : public ::testing::TestWithParam<Case> {};

TEST_P(SnapshotCopies, PlainIterationCopiesNothingToTheHost) {
  const Case c = GetParam();
  auto counter = std::make_shared<HostCopyCounter>();
  const ModelSpec spec = preset_model(c.preset);
  TrainOptions options;
  options.sync_bn = c.sync_bn;
  Trainer trainer(counting_devices(c.devices, counter), Model(spec), Model(spec).initial_state(3), options);
  const Dataset data = batch_for(c.preset);
  for (int step = 0; step < 2; ++step) {  // the second step runs on updated weights and momentum-free SGD state
    Iteration it(trainer, data.inputs, data.targets);
    counter->reset();
    it.run_to_end();
    EXPECT_EQ(counter->copies.load(), 0) << c.preset << " on cpu:" << c.devices << ": " << counter->bytes.load()
                                         << " bytes copied to the host between stages";
    // Asking for the loss is loss.item(): one value crosses, nothing more.
    (void)it.loss();
    EXPECT_EQ(counter->copies.load(), 1);
    EXPECT_EQ(counter->bytes.load(), static_cast<int64_t>(dtype_size(spec.dtype)));
  }
}

TEST_P(SnapshotCopies, SnapshotsCopyOnlyTheValuesTheyKeep) {
  const Case c = GetParam();
  auto counter = std::make_shared<HostCopyCounter>();
  const ModelSpec spec = preset_model(c.preset);
  TrainOptions options;
  options.sync_bn = c.sync_bn;
  Trainer trainer(counting_devices(c.devices, counter), Model(spec), Model(spec).initial_state(3), options);
  const Dataset data = batch_for(c.preset);
  Looker looker;
  Iteration it(trainer, data.inputs, data.targets, &looker);
  counter->reset();
  it.run_to_end();
  EXPECT_EQ(looker.stages, static_cast<int>(it.plan().size()));
  EXPECT_GT(counter->copies.load(), 0);
  // The widest thing a snapshot keeps is a tensor small enough to keep whole (kSnapshotAllValues,
  // for the app's heat map) or one BatchNorm layer's statistics (six head values otherwise), while
  // an activation of these models is a whole chunk of rows, far more.
  const int64_t widest = std::max<int64_t>(c.preset == "cnn" ? 16 : 32, static_cast<int64_t>(kSnapshotAllValues));
  EXPECT_LE(counter->largest.load(), widest * static_cast<int64_t>(dtype_size(spec.dtype)));
}

TEST_P(SnapshotCopies, ResultsDoNotDependOnWhetherSomeoneLooks) {
  const Case c = GetParam();
  const ModelSpec spec = preset_model(c.preset);
  const TensorMap state = Model(spec).initial_state(3);
  const Dataset data = batch_for(c.preset);
  TrainOptions options;
  options.sync_bn = c.sync_bn;
  Trainer plain(DeviceSet::create("cpu:" + std::to_string(c.devices)), Model(spec), state, options);
  Trainer watched(DeviceSet::create("cpu:" + std::to_string(c.devices)), Model(spec), state, options);
  Iteration a(plain, data.inputs, data.targets);
  Looker looker;
  Iteration b(watched, data.inputs, data.targets, &looker);
  a.run_to_end();
  b.run_to_end();
  EXPECT_EQ(a.loss(), b.loss());
  EXPECT_EQ(a.output().to_doubles(), b.output().to_doubles());
  for (const auto& [name, g] : plain.grads().items())
    EXPECT_EQ(g.to_doubles(), watched.grads().at(name).to_doubles()) << name;
  for (const auto& [name, t] : plain.state().items())
    EXPECT_EQ(t.to_doubles(), watched.state().at(name).to_doubles()) << name;
  ASSERT_EQ(a.batchnorm_stats().size(), b.batchnorm_stats().size());
  for (size_t i = 0; i < a.batchnorm_stats().size(); ++i) {
    EXPECT_EQ(a.batchnorm_stats()[i].mean, b.batchnorm_stats()[i].mean);
    EXPECT_EQ(a.batchnorm_stats()[i].var, b.batchnorm_stats()[i].var);
    EXPECT_EQ(a.batchnorm_stats()[i].count, b.batchnorm_stats()[i].count);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, SnapshotCopies,
                         ::testing::Values(Case{"mlp-bn", 1, false}, Case{"mlp-bn", 2, false},
                                           Case{"mlp-bn", 4, false}, Case{"mlp-bn", 4, true},
                                           Case{"mlp-bn", 1, true}, Case{"cnn", 2, false}, Case{"cnn", 2, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           std::string name = info.param.preset + "_cpu" + std::to_string(info.param.devices) +
                                              (info.param.sync_bn ? "_syncbn" : "");
                           for (char& ch : name)
                             if (ch == '-') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace dpv::testing
