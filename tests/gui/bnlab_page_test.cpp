// The BatchNorm lab page, offscreen: what the charts plot is checked against independent engine
// runs (fresh Trainers and Iterations on the same states and batches), and the controls behave.
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QImage>
#include <QTemporaryDir>
#include <QTest>
#include <qcustomplot.h>
#include <cmath>
#include <functional>
#include <gtest/gtest.h>

#include <QLabel>
#include <memory>

#include "course/batchnorm_stats.h"
#include "course/bnlab_session.h"
#include "engine/data_parallel.h"
#include "engine/device.h"
#include "gui/common/context.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"
#include "gui_test_support.h"

namespace gui {

using dpv::course::bnlab_batch;
using dpv::course::bnlab_dataset;
using dpv::course::bnlab_model_spec;

namespace {

BnLabConfig skewedConfig(int64_t batch = 32) {
  BnLabConfig c;
  c.devices = "cpu:4";
  c.batchSize = batch;
  c.learningRate = 0.1;
  c.bnMomentum = 0.1;
  c.classSorted = true;
  c.seed = 7;
  return c;
}

// A trainer for one of the lab's models built straight from the engine, trained `steps` steps on
// the lab's batches: the independent computation the plotted values are compared with.
std::unique_ptr<dpv::Trainer> trainIndependently(const BnLabConfig& c, BnLabModel which, int64_t steps) {
  const dpv::Model model(bnlab_model_spec(c.bnMomentum));
  dpv::TrainOptions options;
  options.optimizer.lr = c.learningRate;
  options.optimizer.momentum = c.sgdMomentum;
  options.sync_bn = which == BnLabSync;
  auto trainer = std::make_unique<dpv::Trainer>(dpv::DeviceSet::create(which == BnLabReference ? "cpu:1" : c.devices),
                                                dpv::Model(bnlab_model_spec(c.bnMomentum)),
                                                model.initial_state(c.seed), options);
  const dpv::Dataset data = bnlab_dataset(c);
  for (int64_t t = 0; t < steps; ++t) {
    const dpv::Dataset batch = bnlab_batch(data, c, t);
    dpv::Iteration(*trainer, batch.inputs, batch.targets).run_to_end();
  }
  return trainer;
}

// The statistics of `layer` in a forward of `batch` on a copy of `trainer`'s state, on `devices`.
std::vector<dpv::BatchNormStats> statsOn(const dpv::Trainer& trainer, const std::string& devices, bool sync,
                                         const dpv::Dataset& batch, int layer) {
  dpv::TrainOptions options = trainer.options();
  options.sync_bn = sync;
  dpv::Trainer copy(dpv::DeviceSet::create(devices), dpv::Model(trainer.model().spec()), trainer.state_to_host(), options);
  dpv::Iteration iteration(copy, batch.inputs, batch.targets);
  iteration.run_to_end();
  std::vector<dpv::BatchNormStats> out;
  for (const auto& s : iteration.batchnorm_stats())
    if (s.layer == layer) out.push_back(s);
  return out;
}

const dpv::BatchNormStats* device(const std::vector<dpv::BatchNormStats>& stats, int d) {
  for (const auto& s : stats)
    if (s.device == d) return &s;
  return nullptr;
}

struct BnLabPageFixture : ::testing::Test {
  void SetUp() override {
    context = std::make_unique<AppContext>();
    page = std::make_unique<BatchNormLabPage>(context.get());
    page->resize(1280, 800);
  }
  void configure(const BnLabConfig& c, qint64 limit) {
    page->setStepsPerSecond(0);
    page->setStepLimit(limit);
    page->setConfig(c);
    ASSERT_TRUE(waitUntil([&] { return page->isConfigured() || page->hasFailed(); })) << "the worker never answered";
  }
  void trainTo(qint64 steps) {
    page->start();
    ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() >= steps && !page->isRunning(); }))
        << "stopped at " << page->charts()->stepCount() << " steps: " << page->failure().toStdString();
  }
  std::unique_ptr<AppContext> context;
  std::unique_ptr<BatchNormLabPage> page;
};

double barAt(const QVector<QPointF>& bars, int device) {
  for (const QPointF& p : bars)
    if (static_cast<int>(std::lround(p.x())) == device) return p.y();
  return std::nan("");
}

}  // namespace

TEST_F(BnLabPageFixture, PlottedBatchStatisticsEqualAnIndependentIteration) {
  const BnLabConfig c = skewedConfig();
  const int64_t steps = 9;
  configure(c, steps);
  trainTo(steps);
  const dpv::Dataset batch = bnlab_batch(bnlab_dataset(c), c, steps - 1);  // the last step's batch

  for (const auto& [slot, channel] : std::vector<std::pair<int, int>>{{0, 0}, {1, 5}}) {
    page->selectLayer(slot, channel);
    const int layer = page->charts()->latestStep()->models[0].layers.at(static_cast<size_t>(slot)).layer;
    SCOPED_TRACE("layer " + std::to_string(layer) + " channel " + std::to_string(channel));
    for (BnLabModel which : {BnLabPerDevice, BnLabSync}) {
      auto before = trainIndependently(c, which, steps - 1);  // the state the last step started from
      const auto chunkStats = statsOn(*before, c.devices, which == BnLabSync, batch, layer);
      const auto wholeStats = statsOn(*before, "cpu:1", false, batch, layer);  // the whole batch at once
      std::vector<dpv::BatchNormStats> perChunk;
      for (const auto& s : chunkStats)
        if (s.device >= 0) perChunk.push_back(s);
      for (auto [chart, isMean] : {std::pair{BnLabCharts::BatchMean, true}, std::pair{BnLabCharts::BatchVar, false}}) {
        const auto bars = page->charts()->seriesData(chart, BnLabCharts::chunkSeries(which));
        ASSERT_EQ(bars.size(), 4) << "one bar per device";
        for (int d = 0; d < 4; ++d) {
          const dpv::BatchNormStats* s = device(chunkStats, d);
          ASSERT_NE(s, nullptr) << "the engine reported no statistics for device " << d;
          const double expected = (isMean ? s->mean : s->var).at(static_cast<size_t>(channel));
          EXPECT_NEAR(barAt(bars, d), expected, 1e-9 + 1e-7 * std::fabs(expected)) << bnlab_model_name(which) << " device " << d;
        }
        const auto whole = page->charts()->seriesData(chart, BnLabCharts::wholeSeries(which));
        ASSERT_EQ(whole.size(), 2);
        // Whole-batch statistics by another route: one device, one pass over the batch. For the
        // per-device model that route only holds for the first BatchNorm layer: deeper layers see
        // activations that depend on how the earlier layer normalised (per chunk), so there the
        // reference is the merge of the independent run's own chunk statistics.
        const bool oneDeviceRoute = which == BnLabSync || slot == 0;
        const dpv::BatchNormStats wholeExpected =
            oneDeviceRoute ? wholeStats.at(0) : dpv::course::merge_batchnorm_stats(perChunk);
        const double expected = (isMean ? wholeExpected.mean : wholeExpected.var).at(static_cast<size_t>(channel));
        EXPECT_NEAR(whole[0].y(), expected, 1e-5 * (1 + std::fabs(expected))) << bnlab_model_name(which) << " whole batch";
        EXPECT_EQ(whole[0].y(), whole[1].y()) << "the whole-batch line is flat";
      }
      if (which == BnLabPerDevice) {
        // Deeper layers: the single-device value differs from the per-device model's own merge,
        // which is why the chart merges the chunks instead of asking the reference.
        auto reference = trainIndependently(c, BnLabReference, steps - 1);
        const auto refStats = statsOn(*reference, "cpu:1", false, batch, layer);
        const auto line = page->charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::wholeSeries(BnLabReference));
        ASSERT_EQ(line.size(), 2);
        EXPECT_NEAR(line[0].y(), refStats.at(0).mean.at(static_cast<size_t>(channel)), 1e-9) << "reference whole batch";
      }
      if (which == BnLabSync) {
        const dpv::BatchNormStats* global = device(chunkStats, -1);
        ASSERT_NE(global, nullptr) << "SyncBatchNorm reported no global statistics";
        const auto line = page->charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::wholeSeries(BnLabSync));
        EXPECT_NEAR(line[0].y(), global->mean.at(static_cast<size_t>(channel)), 1e-9);
      }
    }
  }
  // On class-sorted batches the devices really see different data: their means differ.
  const auto bars = page->charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::chunkSeries(BnLabPerDevice));
  EXPECT_GT(std::fabs(barAt(bars, 0) - barAt(bars, 3)), 1e-3);
}

TEST_F(BnLabPageFixture, SyncStaysAtTheReferenceWhilePerDeviceDrifts) {
  const int64_t steps = 30;
  configure(skewedConfig(), steps);
  trainTo(steps);
  for (const QString& series : {BnLabCharts::paramDistanceSeries(BnLabSync), BnLabCharts::gradDistanceSeries(BnLabSync)}) {
    const auto points = page->charts()->seriesData(BnLabCharts::Distance, series);
    ASSERT_EQ(points.size(), steps) << series.toStdString();
    for (const QPointF& p : points) EXPECT_LT(p.y(), 1e-5) << series.toStdString() << " at step " << p.x();
  }
  const auto perDevice = page->charts()->seriesData(BnLabCharts::Distance, BnLabCharts::paramDistanceSeries(BnLabPerDevice));
  ASSERT_EQ(perDevice.size(), steps);
  EXPECT_GT(perDevice.back().y(), 1e-5) << "per-device BatchNorm should drift from the reference on skewed batches";

  // Running statistics: per-device keeps device 0's only (it equals the rebuild from device 0's
  // chunks), SyncBN keeps the whole batch's (it equals the reference).
  for (auto chart : {BnLabCharts::RunningMean, BnLabCharts::RunningVar}) {
    const auto running = page->charts()->seriesData(chart, BnLabCharts::runningSeries(BnLabPerDevice));
    const auto device0 = page->charts()->seriesData(chart, BnLabCharts::device0EmaSeries());
    const auto sync = page->charts()->seriesData(chart, BnLabCharts::runningSeries(BnLabSync));
    const auto reference = page->charts()->seriesData(chart, BnLabCharts::runningSeries(BnLabReference));
    ASSERT_EQ(running.size(), steps);
    ASSERT_EQ(device0.size(), steps);
    ASSERT_EQ(sync.size(), steps);
    for (int i = 0; i < steps; ++i) {
      EXPECT_NEAR(running[i].y(), device0[i].y(), 1e-5 * (1 + std::fabs(device0[i].y()))) << "step " << i + 1;
      EXPECT_NEAR(sync[i].y(), reference[i].y(), 1e-5 * (1 + std::fabs(reference[i].y()))) << "step " << i + 1;
    }
    EXPECT_GT(std::fabs(running.back().y() - reference.back().y()), 1e-4)
        << "device 0's chunk is one class only, so its running statistic should differ from the whole batch's";
  }
  const auto loss = page->charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(BnLabReference));
  ASSERT_EQ(loss.size(), steps);
  for (const QPointF& p : loss) EXPECT_TRUE(std::isfinite(p.y()) && p.y() > 0);
}

TEST_F(BnLabPageFixture, PauseStopsAndResetStartsOver) {
  configure(skewedConfig(), 10000);
  page->start();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() >= 5; }));
  page->pause();
  // The worker sends its last steps, then that it stopped: the page is not running once both arrived.
  ASSERT_TRUE(waitUntil([&] { return !page->isRunning(); }));
  const int64_t paused = page->charts()->stepCount();
  // One step asked for: its update comes after anything the worker sent before, so the charts then
  // hold exactly one step more, unless the worker went on training after the pause.
  page->stepOnce();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() > paused; }));
  EXPECT_EQ(page->charts()->stepCount(), paused + 1) << "steps arrived after the pause";
  EXPECT_FALSE(page->isRunning());

  page->reset();
  EXPECT_EQ(page->charts()->stepCount(), 0);
  // The fresh session's `configured` comes after every update the old one sent, so those have all
  // arrived (and been dropped) by the time the page is configured.
  ASSERT_TRUE(waitUntil([&] { return page->isConfigured(); }));
  EXPECT_EQ(page->charts()->stepCount(), 0) << "an update from before the reset was drawn";
  page->stepOnce();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() == 1; }));
  const auto loss = page->charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(BnLabSync));
  ASSERT_EQ(loss.size(), 1);
  EXPECT_EQ(loss[0].x(), 1.0);
  // The first step after a reset repeats the first step of any run: same seed, same batch.
  auto fresh = trainIndependently(skewedConfig(), BnLabReference, 0);
  const dpv::Dataset batch = bnlab_batch(bnlab_dataset(skewedConfig()), skewedConfig(), 0);
  dpv::Iteration first(*fresh, batch.inputs, batch.targets);
  first.run_to_end();
  const auto refLoss = page->charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(BnLabReference));
  EXPECT_NEAR(refLoss[0].y(), first.loss(), 1e-9);
}

// As TensorFlow Playground takes its settings: a new batch or learning rate while the lab trains is
// used by the next step, and the models keep their steps (no restart). The status line wraps instead of being
// cut, and the page says whose run it shows.
TEST_F(BnLabPageFixture, ABatchOrLearningRateChangeAppliesAtTheNextStepWithoutARestart) {
  BnLabConfig c;
  c.devices = "cpu:2";
  c.batchSize = 32;
  ASSERT_NO_FATAL_FAILURE(configure(c, 100));
  page->stepOnce();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() == 1; }));
  page->setBatchSize(16);
  page->stepOnce();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() == 2; })) << page->failure().toStdString();
  const BnLabStep* last = page->charts()->latestStep();
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->step, 2) << "the lab went on; it did not start again";
  EXPECT_EQ(last->batchRows, 16);
  EXPECT_TRUE(page->statusText().contains(QLatin1String("batch 16"))) << page->statusText().toStdString();
  EXPECT_TRUE(page->runCaption().contains(QStringLiteral("seed 0 · batch 16"))) << page->runCaption().toStdString();
  EXPECT_TRUE(page->runCaption().contains(QLatin1String("cpu:2"))) << page->runCaption().toStdString();
  // The learning rate is taken the same way: the lab goes on from where it was.
  page->setLearningRate(0.5);
  page->stepOnce();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() == 3; })) << page->failure().toStdString();
  EXPECT_EQ(page->charts()->latestStep()->step, 3) << "a learning-rate change restarted the lab";
  EXPECT_FALSE(page->hasFailed());

  page->resize(1024, 640);
  page->show();
  settleEvents();
  QLabel* status = page->statusLabel();
  EXPECT_TRUE(status->wordWrap());
  EXPECT_GE(status->height(), status->heightForWidth(status->width())) << "the status line is cut off";
}

TEST_F(BnLabPageFixture, OneSampleChunkShowsTheEnginesError) {
  configure(skewedConfig(10), 50);  // chunks 3, 3, 3, 1 on 4 devices
  EXPECT_TRUE(page->calloutVisible());
  const QString before = page->calloutText();
  EXPECT_TRUE(before.contains(QStringLiteral("One-sample chunk"))) << before.toStdString();
  EXPECT_TRUE(before.contains(QStringLiteral("Expected more than 1 value per channel when training"))) << before.toStdString();
  const int64_t channels = bnlab_model_spec(0.1).layers.at(1).num_features;  // the first BatchNorm's C
  EXPECT_TRUE(before.contains(QStringLiteral("torch.Size([1, %1])").arg(channels))) << before.toStdString();
  // Start trains on: the per-device model stops at step 1, SyncBatchNorm and the others continue.
  trainTo(50);
  EXPECT_FALSE(page->hasFailed()) << page->failure().toStdString();
  const QString after = page->calloutText();
  EXPECT_TRUE(after.contains(QStringLiteral("per-device BatchNorm model stopped at step 1; the other models train on")))
      << after.toStdString();
  EXPECT_TRUE(after.contains(QStringLiteral("Expected more than 1 value per channel"))) << after.toStdString();
  EXPECT_TRUE(after.contains(QStringLiteral("per-device BatchNorm has stopped; the loss of SyncBatchNorm is")))
      << after.toStdString();
  const auto sync = page->charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(BnLabSync));
  ASSERT_EQ(sync.size(), 50);
  for (const QPointF& p : sync) EXPECT_TRUE(std::isfinite(p.y())) << "step " << p.x();
  EXPECT_TRUE(page->charts()->latestStep()->models[BnLabPerDevice].stopped);
}

TEST(BnLabPageDefaults, WorksOnFirstUseWhateverTheSettingsBarSays) {
  AppContext context;
  context.setSettings(AppSettings{});  // the app's defaults: a batch of 10 on 4 devices, lr 0.01
  ASSERT_EQ(context.settings().batchSize, 10);
  BatchNormLabPage page(&context);
  EXPECT_FALSE(page.usesSettingsBar());
  EXPECT_EQ(page.config().batchSize, BnLabConfig{}.batchSize) << "the lab's own default, not the settings bar's";
  EXPECT_EQ(page.config().devices, "cpu:4");
  ASSERT_TRUE(waitUntil([&] { return page.isConfigured() || page.hasFailed(); }));
  EXPECT_FALSE(page.hasFailed()) << page.failure().toStdString();
  EXPECT_FALSE(page.calloutVisible()) << page.calloutText().toStdString();
  AppSettings other = context.settings();
  other.batchSize = 7;
  context.setSettings(other);  // the settings bar does not reach the lab
  settleEvents();  // whatever the change queued has run
  EXPECT_EQ(page.config().batchSize, BnLabConfig{}.batchSize);
}

TEST_F(BnLabPageFixture, TheCalloutStatesTheResultWithTheEnginesLosses) {
  configure(BnLabConfig{}, 60);
  EXPECT_FALSE(page->calloutVisible());
  trainTo(60);
  ASSERT_TRUE(page->calloutVisible());
  const QString text = page->calloutText();
  EXPECT_TRUE(text.contains(QStringLiteral("Result after 60 steps (class-sorted batches, batch 32 on 4 devices)"))) << text.toStdString();
  // The mean of the last 20 plotted losses of each model, as the engine reported them.
  for (BnLabModel m : {BnLabPerDevice, BnLabSync, BnLabReference}) {
    const auto points = page->charts()->seriesData(BnLabCharts::Loss, BnLabCharts::lossSeries(m));
    ASSERT_EQ(points.size(), 60);
    double mean = 0;
    for (int i = 40; i < 60; ++i) mean += points[i].y() / 20;
    EXPECT_TRUE(text.contains(QString::number(mean, 'f', 2))) << bnlab_model_name(m) << " " << mean << ": " << text.toStdString();
  }
}

TEST_F(BnLabPageFixture, IdleDevicesAreCalledOutAndGetNoBars) {
  configure(skewedConfig(6), 2);  // ceil(6/4) = 2 rows per chunk: 2, 2, 2 and GPU 3 idle
  EXPECT_TRUE(page->calloutVisible());
  EXPECT_TRUE(page->calloutText().contains(QStringLiteral("Idle devices"))) << page->calloutText().toStdString();
  EXPECT_TRUE(page->calloutText().contains(QStringLiteral("GPU 3 gets no rows"))) << page->calloutText().toStdString();
  EXPECT_FALSE(page->calloutText().contains(QStringLiteral("One-sample")));
  trainTo(2);
  EXPECT_EQ(page->charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::chunkSeries(BnLabPerDevice)).size(), 3);

  configure(skewedConfig(32), 2);
  EXPECT_FALSE(page->calloutVisible()) << page->calloutText().toStdString();
}

TEST_F(BnLabPageFixture, SavesEveryChartAsPngAndCsv) {
  const int64_t steps = 4;
  configure(skewedConfig(), steps);
  trainTo(steps);
  QTemporaryDir dir;
  ASSERT_TRUE(dir.isValid());
  const QStringList problems = page->saveCharts(dir.path(), true, true);
  EXPECT_TRUE(problems.isEmpty()) << problems.join("; ").toStdString();
  for (int c = 0; c < BnLabCharts::kChartCount; ++c) {
    const QString stem = dir.filePath("bnlab-" + BnLabCharts::chartId(static_cast<BnLabCharts::Chart>(c)));
    QImage image(stem + ".png");
    EXPECT_FALSE(image.isNull()) << stem.toStdString();
    QFile csv(stem + ".csv");
    ASSERT_TRUE(csv.open(QIODevice::ReadOnly)) << stem.toStdString();
    const QStringList lines = QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts);
    ASSERT_FALSE(lines.isEmpty());
    if (c == BnLabCharts::Loss) {
      EXPECT_EQ(lines.size(), steps + 1) << "a header and one row per step";
      EXPECT_TRUE(lines[0].contains(BnLabCharts::lossSeries(BnLabSync)));
      EXPECT_FALSE(lines[0].contains(BnLabCharts::accuracySeries(BnLabSync))) << "accuracy has a chart of its own";
    }
    if (c == BnLabCharts::Accuracy) {
      EXPECT_EQ(lines.size(), steps + 1) << "a header and one row per step";
      EXPECT_TRUE(lines[0].contains(BnLabCharts::accuracySeries(BnLabSync)));
    }
    if (c == BnLabCharts::BatchMean) {
      EXPECT_EQ(lines.size(), 4 + 1) << "a header and one row per device";
    }
  }
  // No temporary files are left behind by the atomic writes.
  EXPECT_EQ(QDir(dir.path()).entryList(QDir::Files).size(), 2 * BnLabCharts::kChartCount);
  EXPECT_FALSE(page->saveCharts("/proc/no-such-dir/x", true, false).isEmpty());
}

TEST_F(BnLabPageFixture, ChartsUseThePaletteAndTheLessonIsShown) {
  EXPECT_TRUE(page->explanationText().contains(QStringLiteral("SyncBatchNorm"))) << page->explanationText().toStdString();
  for (const QColor base : {QColor(30, 30, 34), QColor(250, 250, 250)}) {
    QPalette palette = page->palette();
    palette.setColor(QPalette::Base, base);
    palette.setColor(QPalette::Text, base.lightness() < 128 ? Qt::white : Qt::black);
    page->setPalette(palette);
    const QImage image = page->charts()->plot(BnLabCharts::Distance)->toPixmap(300, 200).toImage();
    const QColor corner = image.pixelColor(1, 1);
    EXPECT_LE(std::abs(corner.red() - base.red()) + std::abs(corner.green() - base.green()), 6)
        << "chart background " << corner.name().toStdString() << " instead of the palette's " << base.name().toStdString();
  }
}

TEST(BnLabPageLesson, MissingLessonIsSaidVisibly) {
  QTemporaryDir empty;
  qputenv("DPVIZ_LESSONS", empty.path().toUtf8());
  AppContext context;
  BatchNormLabPage page(&context);
  qunsetenv("DPVIZ_LESSONS");
  EXPECT_TRUE(page.explanationText().contains(QStringLiteral("Explanation missing"))) << page.explanationText().toStdString();
}

TEST(BnLabPageLifetime, ClosingWhileTrainingStopsCleanly) {
  AppContext context;
  auto page = std::make_unique<BatchNormLabPage>(&context);
  page->setStepsPerSecond(0);
  page->setStepLimit(10000);
  page->setConfig(skewedConfig());
  ASSERT_TRUE(waitUntil([&] { return page->isConfigured(); }));
  page->start();
  ASSERT_TRUE(waitUntil([&] { return page->charts()->stepCount() >= 3; }));
  ASSERT_TRUE(page->isRunning());
  QElapsedTimer clock;
  clock.start();
  page.reset();  // destructor: stop the worker, quit and wait for its thread
  EXPECT_LT(clock.elapsed(), 5000);
}

TEST(BnLabPageShots, ScreenshotTrainsThenCallsDone) {
  AppContext context;
  BatchNormLabPage page(&context);
  page.resize(1280, 800);
  const auto shots = page.screenshots();
  ASSERT_GE(shots.size(), 1);
  bool done = false;
  shots[0].prepare([&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  EXPECT_GE(page.charts()->stepCount(), 10);
  EXPECT_FALSE(page.charts()->seriesData(BnLabCharts::BatchMean, BnLabCharts::chunkSeries(BnLabPerDevice)).isEmpty());
}

}  // namespace gui
