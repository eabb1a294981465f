// The BatchNorm lab's training core (course/bnlab_session.h) without threads: batches, pooled
// statistics, the five models stepped on the same batches.
#include <algorithm>
#include <cmath>
#include <gtest/gtest.h>
#include <set>

#include "course/batchnorm_stats.h"
#include "course/bnlab_session.h"
#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv::course {

namespace {

BnLabConfig labConfig(int64_t batch, bool sorted) {
  BnLabConfig c;
  c.devices = "cpu:4";
  c.batchSize = batch;
  c.classSorted = sorted;
  c.seed = 3;
  return c;
}

}  // namespace

TEST(BnLabBatch, ReproducibleDistinctRowsAndSortedByClassWhenAsked) {
  const BnLabConfig sorted = labConfig(48, true);
  const dpv::Dataset data = bnlab_dataset(sorted);
  const dpv::Dataset a = bnlab_batch(data, sorted, 5);
  const dpv::Dataset b = bnlab_batch(data, sorted, 5);
  const dpv::Dataset c = bnlab_batch(data, sorted, 6);
  ASSERT_EQ(a.inputs.dim(0), 48);
  EXPECT_EQ(a.inputs.to_doubles(), b.inputs.to_doubles()) << "the same step must give the same batch";
  EXPECT_NE(a.inputs.to_doubles(), c.inputs.to_doubles()) << "another step must give another batch";
  const auto labels = a.targets.to_int64();
  EXPECT_TRUE(std::is_sorted(labels.begin(), labels.end()));
  EXPECT_NE(labels.front(), labels.back()) << "a 48-row batch of a two-class spiral should hold both classes";

  const auto xs = a.inputs.to_doubles();  // [48, 2]
  std::set<std::pair<double, double>> rows;
  for (size_t r = 0; r < 48; ++r) rows.insert({xs[2 * r], xs[2 * r + 1]});
  EXPECT_EQ(rows.size(), 48u) << "rows are drawn without replacement";

  const BnLabConfig shuffled = labConfig(48, false);
  const auto mixed = bnlab_batch(data, shuffled, 5).targets.to_int64();
  EXPECT_FALSE(std::is_sorted(mixed.begin(), mixed.end()));
  EXPECT_THROW(bnlab_batch(data, labConfig(100000, true), 0), dpv::Error);
}

TEST(BnLabPool, PooledStatisticsEqualThoseOfTheConcatenation) {
  // Two channels, chunks of 3, 1 and 2 values per channel.
  const std::vector<std::vector<std::vector<double>>> chunks = {
      {{1, 2, 4}, {0, 0, 3}}, {{10}, {-1}}, {{-2, 5}, {2, 2}}};
  std::vector<dpv::BatchNormStats> stats;
  std::vector<std::vector<double>> all(2);
  for (size_t d = 0; d < chunks.size(); ++d) {
    dpv::BatchNormStats s;
    s.layer = 1;
    s.device = static_cast<int>(d);
    s.count = static_cast<double>(chunks[d][0].size());
    for (const auto& values : chunks[d]) {
      double mean = 0, var = 0;
      for (double v : values) mean += v / static_cast<double>(values.size());
      for (double v : values) var += (v - mean) * (v - mean) / static_cast<double>(values.size());
      s.mean.push_back(mean);
      s.var.push_back(var);
    }
    for (int c = 0; c < 2; ++c) all[static_cast<size_t>(c)].insert(all[c].end(), chunks[d][c].begin(), chunks[d][c].end());
    stats.push_back(s);
  }
  const dpv::BatchNormStats pooled = dpv::course::merge_batchnorm_stats(stats);
  EXPECT_EQ(pooled.device, -1);
  EXPECT_EQ(pooled.count, 6);
  for (int c = 0; c < 2; ++c) {
    const auto& values = all[static_cast<size_t>(c)];
    double mean = 0, var = 0;
    for (double v : values) mean += v / 6;
    for (double v : values) var += (v - mean) * (v - mean) / 6;
    EXPECT_NEAR(pooled.mean[static_cast<size_t>(c)], mean, 1e-12);
    EXPECT_NEAR(pooled.var[static_cast<size_t>(c)], var, 1e-12);
  }
}

TEST(BnLabSession, StepsAllThreeModelsAndProbesOneSampleChunks) {
  BnLabSession good(labConfig(32, true));
  EXPECT_EQ(good.deviceCount(), 4);
  EXPECT_EQ(good.batchnormLayers().size(), 2u);
  EXPECT_TRUE(good.probeFirstStep().second.empty());
  const BnLabStep step = good.step();
  EXPECT_EQ(step.step, 1);
  EXPECT_EQ(step.chunks, (std::vector<int64_t>{8, 8, 8, 8}));
  for (const auto& m : step.models) {
    EXPECT_TRUE(std::isfinite(m.loss));
    ASSERT_EQ(m.layers.size(), 2u);
  }
  EXPECT_EQ(step.models[BnLabPerDevice].layers[0].chunks.size(), 4u);
  EXPECT_EQ(step.models[BnLabReference].layers[0].chunks.size(), 1u);
  EXPECT_TRUE(std::isnan(step.models[BnLabReference].paramDistance));

  BnLabSession bad(labConfig(10, true));  // chunks 3, 3, 3, 1
  const auto [model, error] = bad.probeFirstStep();
  EXPECT_EQ(model, "per-device BatchNorm");
  EXPECT_NE(error.find("Expected more than 1 value per channel when training"), std::string::npos) << error;
  EXPECT_EQ(bad.stepsTaken(), 0) << "the probe must not train the real models";
  // The per-device model stops at the one-sample chunk; SyncBatchNorm and the others train on.
  for (int i = 1; i <= 3; ++i) {
    const BnLabStep step = bad.step();
    EXPECT_EQ(step.step, i);
    EXPECT_TRUE(step.models[BnLabPerDevice].stopped);
    EXPECT_TRUE(std::isnan(step.models[BnLabPerDevice].loss));
    for (BnLabModel m : {BnLabSync, BnLabReference, BnLabDdpPerRank, BnLabDdpSync}) {
      EXPECT_FALSE(step.models[m].stopped) << bnlab_model_name(m);
      EXPECT_TRUE(std::isfinite(step.models[m].loss)) << bnlab_model_name(m);
    }
  }
  EXPECT_FALSE(bad.failed());
  EXPECT_TRUE(bad.modelStopped(BnLabPerDevice));
  EXPECT_EQ(bad.modelStoppedAt(BnLabPerDevice), 1);
  EXPECT_EQ(bad.modelError(BnLabPerDevice), error);
}

TEST(BnLabSession, ClassSortedBatchesKeepPerDeviceNearItsStartWhileSyncBatchNormLearns) {
  // The lab's defaults (4 devices, batch 32, class-sorted): what the callout states, from the engine.
  BnLabSession session{BnLabConfig{}};
  double first = 0, perDevice = 0, sync = 0, reference = 0;
  const int steps = 300, window = 20;
  for (int i = 1; i <= steps; ++i) {
    const BnLabStep step = session.step();
    if (i == 1) first = step.models[BnLabPerDevice].loss;
    if (i > steps - window) {
      perDevice += step.models[BnLabPerDevice].loss / window;
      sync += step.models[BnLabSync].loss / window;
      reference += step.models[BnLabReference].loss / window;
    }
  }
  EXPECT_GT(perDevice, 0.8) << "per-device BatchNorm stays near where it started (" << first << ")";
  EXPECT_LT(sync, 0.5) << "SyncBatchNorm learns";
  EXPECT_NEAR(sync, reference, 1e-3) << "and matches the single device";
}

// What differs between the lab's models is data: the strategy, synchronised BatchNorm and the
// devices; the model, optimizer, seed and batch are the lab's, and the session builds each model as
// its description says.
TEST(BnLabSession, EachModelIsTheRunSpecItDescribes) {
  BnLabConfig config = labConfig(24, true);
  config.sgdMomentum = 0.5;
  config.bnMomentum = 0.2;
  BnLabSession session(config);
  const dpv::RunSpec perDevice = bnlab_run_spec(config, BnLabPerDevice);
  EXPECT_EQ(perDevice.devices, "cpu:4");
  EXPECT_EQ(perDevice.batch, 24);
  EXPECT_EQ(perDevice.optimizer.lr, config.learningRate);
  EXPECT_EQ(perDevice.optimizer.momentum, 0.5);
  EXPECT_EQ(perDevice.seed, 3u);
  ASSERT_TRUE(perDevice.model.has_value());
  EXPECT_EQ(perDevice.model_spec().layers.at(1).momentum, 0.2);
  struct Expected {
    BnLabModel which;
    dpv::StrategyKind strategy;
    bool syncBn;
    const char* devices;
  };
  const dpv::StrategyKind dp = dpv::StrategyKind::DataParallel, ddp = dpv::StrategyKind::DistributedDataParallel;
  for (const Expected& e : {Expected{BnLabPerDevice, dp, false, "cpu:4"}, Expected{BnLabSync, dp, true, "cpu:4"},
                            Expected{BnLabReference, dp, false, "cpu:1"}, Expected{BnLabDdpPerRank, ddp, false, "cpu:4"},
                            Expected{BnLabDdpSync, ddp, true, "cpu:4"}}) {
    dpv::RunSpec spec = bnlab_run_spec(config, e.which);
    EXPECT_EQ(spec.strategy, e.strategy) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.sync_bn, e.syncBn) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.devices, e.devices) << bnlab_model_name(e.which);
    EXPECT_EQ(session.strategy(e.which).kind(), e.strategy) << bnlab_model_name(e.which);
    EXPECT_EQ(session.strategy(e.which).devices().size(), e.which == BnLabReference ? 1 : 4);
    // Everything else is the lab's, the same for every model.
    EXPECT_EQ(spec.batch, perDevice.batch) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.optimizer, perDevice.optimizer) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.seed, perDevice.seed) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.ddp, perDevice.ddp) << bnlab_model_name(e.which);
    ASSERT_TRUE(spec.model.has_value()) << bnlab_model_name(e.which);
    EXPECT_EQ(dpv::Model(*spec.model).describe(), dpv::Model(*perDevice.model).describe()) << bnlab_model_name(e.which);
    EXPECT_EQ(spec.model->layers.at(1).momentum, 0.2) << bnlab_model_name(e.which);
  }
}

// DDP's loss is the mean of every rank's and its accuracy counts every rank's shard, the rows
// DistributedSampler repeats included (30 rows on 4 ranks: shards of 8, 32 rows in all), checked
// against an independent DDP run; DataParallel's accuracy is over the batch's own 30 rows.
TEST(BnLabSession, DdpLossAndAccuracyCoverEveryRanksPaddedShard) {
  const BnLabConfig config = labConfig(30, false);
  BnLabSession session(config);
  const dpv::Model model(bnlab_model_spec(config.bnMomentum));
  dpv::DdpOptions options;
  options.optimizer.lr = config.learningRate;
  dpv::DdpTrainer ddp(dpv::DeviceSet::create(config.devices), dpv::Model(bnlab_model_spec(config.bnMomentum)),
                      model.initial_state(config.seed), options);
  dpv::TrainOptions referenceOptions;
  referenceOptions.optimizer.lr = config.learningRate;
  dpv::Trainer reference(dpv::DeviceSet::create("cpu:1"), dpv::Model(bnlab_model_spec(config.bnMomentum)),
                         model.initial_state(config.seed), referenceOptions);
  for (int64_t t = 0; t < 3; ++t) {
    const BnLabStep step = session.step();
    const dpv::Dataset batch = bnlab_batch(session.dataset(), config, t);
    dpv::DdpIteration iteration(ddp, batch.inputs, batch.targets);
    iteration.run_to_end();
    EXPECT_EQ(step.shards, (std::vector<int64_t>{8, 8, 8, 8}));
    EXPECT_EQ(step.models[BnLabDdpPerRank].loss, iteration.mean_rank_loss()) << "step " << t + 1;

    const std::vector<int64_t> targets = batch.targets.to_int64();
    int64_t right = 0, rows = 0;
    for (int r = 0; r < ddp.world_size(); ++r) {
      const dpv::Tensor& output = ddp.rank(r).output();  // [8, classes]
      const std::vector<double> logits = output.to_doubles();
      const int64_t classes = output.dim(1);
      int64_t k = 0;
      for (int64_t row : iteration.shards()[static_cast<size_t>(r)]) {
        const auto first = logits.begin() + k++ * classes;
        right += std::max_element(first, first + classes) - first == targets[static_cast<size_t>(row)];
        ++rows;
      }
    }
    ASSERT_EQ(rows, 32);
    EXPECT_EQ(step.models[BnLabDdpPerRank].accuracy, static_cast<double>(right) / 32.0) << "step " << t + 1;

    dpv::Iteration one(reference, batch.inputs, batch.targets);
    one.run_to_end();
    EXPECT_EQ(step.models[BnLabReference].loss, one.loss());
    EXPECT_EQ(step.models[BnLabReference].accuracy, accuracy(one.output(), batch.targets));
  }
}

}  // namespace dpv::course
