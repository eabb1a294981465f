// The app's settings as the engine's run description: every field the settings bar sets arrives
// in the dpv::RunSpec, DDP (and ZeRO-1 over it) gets the teaching bucket size of the preset, and the
// settings file keeps the strategy (an old file's ddp=true loads as DDP).
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/model_spec.h"
#include <QSettings>
#include <QTemporaryDir>

#include "engine/run/run_spec.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "gui/runtime/settings_store.h"

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
  settings.strategy = dpv::StrategyKind::DistributedDataParallel;
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
  settings.strategy = dpv::StrategyKind::DistributedDataParallel;
  EXPECT_THROW(runSpecFromSettings(settings), dpv::Error);
}

TEST(RunSpecFromSettings, EachStrategyRunsAsItself) {
  // ZeRO-1 is ZeroRedundancyOptimizer over DDP (DDP's teaching buckets); FSDP (ZeRO-2/3) has no buckets.
  for (dpv::StrategyKind kind : kAllStrategies) {
    AppSettings settings = sampleSettings();
    settings.strategy = kind;
    const dpv::RunSpec spec = runSpecFromSettings(settings);
    EXPECT_EQ(spec.strategy, kind) << dpv::strategy_short_name(kind);
    EXPECT_EQ(dpv::ddp_options(spec).zero_stage, dpv::zero_stage(kind));
    const bool buckets = kind == dpv::StrategyKind::DistributedDataParallel || kind == dpv::StrategyKind::Zero1;
    EXPECT_EQ(spec.ddp, buckets ? dpv::teaching_ddp_settings(dpv::preset_model("mlp-bn")) : dpv::DdpSettings{})
        << dpv::strategy_short_name(kind);
  }
}

TEST(SettingsStore, AnOldSettingsFileWithDdpLoadsAsDdp) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QString path = dir.filePath(QStringLiteral("old.ini"));
  {
    QSettings old(path, QSettings::IniFormat);
    old.setValue(QStringLiteral("engine/devices"), QStringLiteral("cpu:2"));
    old.setValue(QStringLiteral("engine/ddp"), true);  // what the app stored before the strategy switch
  }
  QSettings store(path, QSettings::IniFormat);
  const AppSettings loaded = readSettings(store, AppSettings{});
  EXPECT_EQ(loaded.strategy, dpv::StrategyKind::DistributedDataParallel);
  EXPECT_EQ(loaded.devices, QStringLiteral("cpu:2"));
  store.setValue(QStringLiteral("engine/ddp"), false);
  EXPECT_EQ(readSettings(store, AppSettings{}).strategy, dpv::StrategyKind::DataParallel);
}

TEST(SettingsStore, EveryStrategyRoundTrips) {
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  QSettings store(dir.filePath(QStringLiteral("s.ini")), QSettings::IniFormat);
  store.setValue(QStringLiteral("engine/ddp"), true);
  for (dpv::StrategyKind kind : kAllStrategies) {
    AppSettings settings = sampleSettings();
    settings.strategy = kind;
    writeSettings(store, settings);
    EXPECT_FALSE(store.contains(QStringLiteral("engine/ddp"))) << "the old key would contradict the new one";
    EXPECT_EQ(readSettings(store, AppSettings{}), settings) << dpv::strategy_short_name(kind);
  }
  store.setValue(QStringLiteral("engine/strategy"), QStringLiteral("no such strategy"));
  EXPECT_EQ(readSettings(store, AppSettings{}).strategy, AppSettings{}.strategy) << "an unknown name keeps the default";
}

}  // namespace
}  // namespace gui
