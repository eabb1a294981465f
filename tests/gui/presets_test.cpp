// Every preset works as the learner picks it: a readable name, a batch that works on the chosen
// devices, one fixed batch per run built as the code panel shows (torch.randn, torch.randint), and
// errors labelled by whose they are (PyTorch's while a stage runs, the app's while preparing).
#include <QComboBox>
#include <QSpinBox>

#include "course/sample_program.h"
#include "engine/data_parallel.h"
#include "engine/model_spec.h"
#include "gui/app/settings_bar.h"
#include "gui_test_support.h"

namespace gui {

namespace {

struct Bar {
  AppContext context;
  EngineController engine;
  SettingsBar bar{&context};
  QComboBox* presets = bar.findChild<QComboBox*>(QStringLiteral("presetBox"));
  QSpinBox* batch = bar.findChild<QSpinBox*>(QStringLiteral("batchBox"));
  Bar() {
    context.setEngine(&engine);
  }
};

}  // namespace

TEST(Presets, EveryPresetHasAReadableName) {
  Bar b;
  ASSERT_NE(b.presets, nullptr);
  ASSERT_EQ(b.presets->count(), static_cast<int>(dpv::preset_names().size()));
  for (int i = 0; i < b.presets->count(); ++i) {
    const QString name = b.presets->itemData(i).toString();
    const QString label = b.presets->itemText(i);
    EXPECT_NE(label, name) << "preset " << name.toStdString() << " is shown by its file name";
    EXPECT_TRUE(label.contains(QLatin1Char(' '))) << label.toStdString();
  }
}

TEST(Presets, EveryPresetRunsAnIterationWithTheSettingsItStartsWith) {
  // The app's defaults (batch 10 on 4 simulated GPUs) leave one device 1 sample (3, 3, 3, 1), which
  // BatchNorm refuses; picking a BatchNorm preset raises the batch so every device gets 2 or more.
  Bar b;
  ASSERT_NE(b.presets, nullptr);
  ASSERT_EQ(b.context.settings().batchSize, 10);
  ASSERT_EQ(b.context.settings().devices, QStringLiteral("cpu:4"));
  for (int i = b.presets->count() - 1; i >= 0; --i) {  // from the last, so every preset is a change
    const QString name = b.presets->itemData(i).toString();
    b.presets->setCurrentIndex(i);
    const AppSettings s = b.context.settings();
    ASSERT_EQ(s.preset, name);
    EXPECT_EQ(b.batch->value(), s.batchSize) << "the bar shows the batch in effect";
    for (int64_t rows : dpv::chunk_sizes(s.batchSize, 4)) {
      EXPECT_NE(rows, 1) << name.toStdString() << " batch " << s.batchSize;
    }
    b.engine.requestIteration();
    ASSERT_TRUE(waitUntil([&] { return !b.engine.busy(); }, 120000)) << name.toStdString();
    EXPECT_TRUE(b.engine.lastError().isEmpty()) << name.toStdString() << ": " << b.engine.lastError().toStdString();
    EXPECT_EQ(b.engine.losses().size(), 1) << name.toStdString();
  }
}

TEST(Presets, TheBatchIsLeftAloneWhenItWorks) {
  EXPECT_EQ(dpv::course::batch_that_works("mlp-bn", 10, 4), 16) << "4 per device";
  EXPECT_EQ(dpv::course::batch_that_works("mlp-bn", 17, 4), 17) << "5, 5, 5, 2";
  EXPECT_EQ(dpv::course::batch_that_works("mlp-bn", 13, 4), 16) << "13 gives 4, 4, 4, 1";
  EXPECT_EQ(dpv::course::batch_that_works("simple", 10, 4), 10) << "no BatchNorm, nothing to refuse";
  EXPECT_EQ(dpv::course::batch_that_works("cnn", 10, 8), 10) << "2 on each of 5 devices";
  EXPECT_EQ(dpv::course::batch_that_works("cnn", 9, 8), 32) << "9 gives 2, 2, 2, 2, 1";
}

TEST(Presets, EveryPresetTrainsOnTheCodePanelsDataTheSameBatchEachIteration) {
  for (const std::string& preset : {std::string("mlp-bn"), std::string("cnn")}) {
    EngineController engine;
    AppSettings settings = settingsFor(QStringLiteral("cpu:2"), QString::fromStdString(preset), 8);
    settings.seed = 5;
    engine.applySettings(settings);
    std::vector<std::vector<double>> heads;
    for (int i = 1; i <= 2; ++i) {
      engine.requestIteration();
      ASSERT_TRUE(waitUntil([&] { return !engine.busy() && engine.lastCompletedInfo().iteration == i; }))
          << engine.lastError().toStdString();
      heads.push_back(engine.lastCompletedInfo().inputHead);
    }
    const dpv::Dataset program = dpv::course::program_data(preset, 8, 5);
    EXPECT_EQ(heads[0], program.inputs.to_doubles(6)) << preset << ": the code panel's torch.randn inputs";
    EXPECT_EQ(heads[1], heads[0]) << preset << ": one batch for the whole run";
  }
}

TEST(Presets, ProgramDataIsRandnAndRandintOverTheModelsClasses) {
  const dpv::Dataset gpu = dpv::course::program_data("gpu-mlp", 10, 0);  // 10 samples, 1000 classes
  EXPECT_EQ(gpu.inputs.shape(), (dpv::Shape{10, 1024}));
  for (int64_t label : gpu.targets.to_int64()) {
    EXPECT_GE(label, 0);
    EXPECT_LT(label, 1000);
  }
  EXPECT_EQ(dpv::course::program_data("cnn", 3, 0).inputs.shape(), (dpv::Shape{3, 3, 32, 32}));
  const dpv::Dataset simple = dpv::course::program_data("simple", 12, 4);
  const dpv::Dataset sample = dpv::course::sample_data(12, 4);
  EXPECT_EQ(simple.inputs.to_doubles(), sample.inputs.to_doubles()) << "SimpleModel's data is the seed program's";
  EXPECT_EQ(simple.targets.to_int64(), sample.targets.to_int64());
}

TEST(Presets, TheLossFallsOverIterationsOnTheFixedBatch) {
  EngineController engine;
  AppSettings settings = settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10);
  settings.learningRate = 0.5;
  engine.applySettings(settings);
  for (int i = 1; i <= 6; ++i) {
    engine.requestIteration();
    ASSERT_TRUE(waitUntil([&] { return !engine.busy() && engine.losses().size() == i; })) << engine.lastError().toStdString();
  }
  const QVector<double>& losses = engine.losses();
  for (int i = 1; i < losses.size(); ++i) EXPECT_LT(losses[i], losses[i - 1]) << "iteration " << i + 1;
}

}  // namespace gui
