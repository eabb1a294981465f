// The app's settings as the engine's run description: every field the settings bar sets arrives
// in the dpv::RunSpec, and DDP gets the teaching bucket size of the preset.
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/model_spec.h"
#include "gui/runtime/run_spec_from_settings.h"

namespace gui {
namespace {

AppSettings sampleSettings() {
  AppSettings s;
  s.devices = QStringLiteral("cpu:3");
  s.preset = QStringLiteral("mlp-bn");
  s.batchSize = 24;
  s.syncBatchNorm = true;
  s.learningRate = 0.125;
  s.seed = 11;
  return s;
}

TEST(RunSpecFromSettings, CarriesEverySetting) {
  const dpv::RunSpec spec = runSpecFromSettings(sampleSettings());
  EXPECT_EQ(spec.devices, "cpu:3");
  EXPECT_EQ(spec.preset, "mlp-bn");
  EXPECT_FALSE(spec.model.has_value());
  EXPECT_EQ(spec.batch, 24);
  EXPECT_EQ(spec.optimizer.lr, 0.125);
  EXPECT_EQ(spec.optimizer.momentum, 0.0);
  EXPECT_EQ(spec.optimizer.weight_decay, 0.0);
  EXPECT_TRUE(spec.sync_bn);
  EXPECT_EQ(spec.seed, 11u);
  EXPECT_EQ(spec.strategy, dpv::StrategyKind::DataParallel);
  EXPECT_EQ(spec.ddp, dpv::DdpSettings{});  // DataParallel: PyTorch's DDP defaults, unread
}

TEST(RunSpecFromSettings, DdpRunsWithTheTeachingBucketSize) {
  AppSettings settings = sampleSettings();
  settings.ddp = true;
  const dpv::RunSpec spec = runSpecFromSettings(settings);
  EXPECT_EQ(spec.strategy, dpv::StrategyKind::DistributedDataParallel);
  EXPECT_EQ(spec.ddp, dpv::teaching_ddp_settings(dpv::preset_model("mlp-bn")));
  EXPECT_EQ(spec.ddp.first_bucket_bytes, static_cast<size_t>(dpv::teaching_bucket_bytes(dpv::preset_model("mlp-bn"))));
  EXPECT_LT(spec.ddp.first_bucket_bytes, dpv::DdpSettings{}.first_bucket_bytes);
}

TEST(RunSpecFromSettings, AnUnknownPresetUnderDdpIsTheEnginesError) {
  AppSettings settings = sampleSettings();
  settings.preset = QStringLiteral("no-such-preset");
  EXPECT_EQ(runSpecFromSettings(settings).preset, "no-such-preset");  // DataParallel: found out when built
  settings.ddp = true;
  EXPECT_THROW(runSpecFromSettings(settings), dpv::Error);
}

}  // namespace
}  // namespace gui
