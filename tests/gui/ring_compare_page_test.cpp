// The Ring and DP-vs-DDP pages against fresh engine runs: every cell of the ring view at every step
// holds the engine's partial sum, and the comparison page charts the numbers a fresh
// course::run_comparison produces (the runs are deterministic: same model, seed, batches, order),
// and its stacked-bar charts keep their legends above the bars.
#include <cmath>
#include <gtest/gtest.h>

#include <QKeyEvent>
#include <QTest>
#include <map>
#include <memory>
#include <qcustomplot.h>

#include "course/ddp_compare.h"
#include "course/ring_demo.h"
#include "gui/common/context.h"
#include "gui/compare/charts.h"
#include "gui/compare/page.h"
#include "gui/ring/page.h"
#include "gui/ring/ring_view.h"
#include "gui/runtime/run_spec_from_settings.h"
#include "gui/runtime/engine_controller.h"
#include "gui_test_support.h"

namespace gui {
namespace {

struct Engine {
  Engine() { context.setEngine(&engine); }
  AppContext context;
  EngineController engine;
};

// Shows `page` at `size` and runs the ring on SimpleModel with `world` ranks.
void runSimpleRing(RingPage& page, QSize size, int world) {
  page.resize(size);
  page.show();
  page.setPreset(QStringLiteral("simple"));
  page.setWorldSize(world);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return page.demo() != nullptr || !page.errorText().isEmpty(); }));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
}

TEST(RingPage, EveryCellAtEveryStepIsTheEnginesPartialSum) {
  Engine e;
  RingPage page(&e.context);
  ASSERT_NO_FATAL_FAILURE(runSimpleRing(page, QSize(1100, 700), 3));

  // The Iteration page's run (its batch and seed) on the page's model and ranks.
  dpv::course::RingDemoConfig config;
  config.run = runSpecFromSettings(e.context.settings());
  config.run.preset = "simple";
  config.run.devices = "cpu:3";
  EXPECT_EQ(page.ringRun().batch, config.run.batch);
  EXPECT_EQ(page.ringRun().seed, config.run.seed);
  EXPECT_EQ(page.ringRun().preset, config.run.preset);
  EXPECT_EQ(page.ringRun().devices, config.run.devices);
  const dpv::course::RingDemo fresh = dpv::course::run_ring_demo(config);
  ASSERT_EQ(page.frameCount(), static_cast<int>(fresh.frames.size()));
  ASSERT_EQ(page.frameCount(), 1 + 2 * 2);
  for (int f = 0; f < page.frameCount(); ++f) {
    page.setFrame(f);
    ASSERT_EQ(page.frame(), f);
    for (int r = 0; r < 3; ++r)
      for (int c = 0; c < 3; ++c) {
        const auto first = static_cast<size_t>(fresh.chunk_offsets[static_cast<size_t>(c)]);
        EXPECT_DOUBLE_EQ(page.view()->cellValue(r, c), fresh.frames[static_cast<size_t>(f)].values[static_cast<size_t>(r)][first])
            << "frame " << f << " rank " << r << " chunk " << c;
        EXPECT_EQ(page.view()->cellContributors(r, c),
                  static_cast<int>(fresh.frames[static_cast<size_t>(f)].contributors[static_cast<size_t>(r)][static_cast<size_t>(c)].size()));
      }
  }
  // The first reduce-scatter step, written out: rank 1 received chunk 0 from rank 0 and added it.
  page.setFrame(1);
  const auto& before = fresh.frames[0].values;
  const auto& after = fresh.frames[1].values;
  const size_t c0 = static_cast<size_t>(fresh.chunk_offsets[0]);
  const QString sum = QStringLiteral("%1 + %2 = %3").arg(shortValue(before[1][c0]), shortValue(before[0][c0]), shortValue(after[1][c0]));
  EXPECT_TRUE(page.stepText().contains(sum)) << page.stepText().toStdString() << "\nwanted: " << sum.toStdString();
  EXPECT_TRUE(page.costText().contains(QStringLiteral("2(W−1)/W"))) << page.costText().toStdString();

  // Scrubbing with the keys.
  page.setFrame(0);
  QTest::keyClick(&page, Qt::Key_Right);
  EXPECT_EQ(page.frame(), 1);
  QTest::keyClick(&page, Qt::Key_End);
  EXPECT_EQ(page.frame(), page.frameCount() - 1);
  QTest::keyClick(&page, Qt::Key_Left);
  EXPECT_EQ(page.frame(), page.frameCount() - 2);
  QTest::keyClick(&page, Qt::Key_Home);
  EXPECT_EQ(page.frame(), 0);
}

std::vector<double> graphValues(QCustomPlot* plot, int graph) {
  std::vector<double> out;
  for (auto it = plot->graph(graph)->data()->constBegin(); it != plot->graph(graph)->data()->constEnd(); ++it) out.push_back(it->value);
  return out;
}

// Runs a short mlp-bn comparison (3 iterations, speed-up up to 2 devices) on `page` and waits for it.
void runComparison(ComparePage& page, int worldSize, int batch) {
  dpv::course::CompareConfig config;
  config.run.preset = "mlp-bn";
  config.run.devices = "cpu:" + std::to_string(worldSize);
  config.run.batch = batch;
  config.iterations = 3;
  config.max_speedup_devices = 2;
  page.setConfig(config);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return page.hasResult() || !page.errorText().isEmpty(); }, 60000));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
}

// Eight ranks in the ring page's share of a 1024x640 window: every cell's value fits its cell and
// nothing is drawn under 9 pt (fewer digits first, then a smaller font).
TEST(RingPage, EightRanksStayReadableInASmallWindow) {
  Engine e;
  RingPage page(&e.context);
  ASSERT_NO_FATAL_FAILURE(runSimpleRing(page, QSize(940, 580), 8));  // the page's area in a 1024x640 window
  // SimpleModel's parameters as its program names them, as on the Iteration page.
  EXPECT_TRUE(page.costText().contains(QLatin1String("linear.weight"))) << page.costText().toStdString();
  EXPECT_FALSE(page.costText().contains(QLatin1String("0.weight"))) << page.costText().toStdString();
  for (int f = 0; f < page.frameCount(); ++f) {
    page.setFrame(f);
    page.view()->grab();  // paints the view, which records what it drew
    EXPECT_GE(page.view()->smallestDrawnPt(), 9.0 - 1e-9) << "frame " << f;
    EXPECT_EQ(page.view()->cutCells(), 0) << "frame " << f;
  }
}

TEST(ComparePage, ShowsTheNumbersOfAFreshEngineRun) {
  Engine e;
  ComparePage page(&e.context);
  page.resize(1100, 760);
  page.show();
  ASSERT_NO_FATAL_FAILURE(runComparison(page, 2, 16));

  const dpv::course::CompareConfig config = page.config();
  const dpv::course::CompareResult fresh = dpv::course::run_comparison(config);
  CompareCharts* charts = page.charts();
  QCustomPlot* loss = charts->plot(CompareCharts::Loss);
  EXPECT_EQ(graphValues(loss, 0), fresh.one.loss);
  EXPECT_EQ(graphValues(loss, 1), fresh.dp.loss);
  EXPECT_EQ(graphValues(loss, 2), fresh.ddp.loss);
  EXPECT_EQ(graphValues(loss, 3), fresh.ddp.rank0_loss);
  QCustomPlot* diff = charts->plot(CompareCharts::ParamDiff);
  EXPECT_EQ(graphValues(diff, 0), fresh.dp.max_param_diff);
  EXPECT_EQ(graphValues(diff, 1), fresh.ddp.max_param_diff);
  // Per-device BatchNorm: DP and DDP drift from one device, and the page says why.
  EXPECT_GT(fresh.dp.max_param_diff.back(), 0);
  EXPECT_TRUE(page.noteText().contains(QStringLiteral("BatchNorm")));
  // Sum versus mean: the page shows the engine's values.
  const auto& s = fresh.sum_mean;
  EXPECT_TRUE(page.sumMeanText().contains(shortValue(s.dp_reduced))) << page.sumMeanText().toStdString();
  EXPECT_TRUE(page.sumMeanText().contains(shortValue(s.ddp_reduced)));
  for (double g : s.dp_replicas) EXPECT_TRUE(page.sumMeanText().contains(shortValue(g)));
  for (double g : s.ddp_bucket) EXPECT_TRUE(page.sumMeanText().contains(shortValue(g)));
  // Memory by kind per GPU: each stacked part is the engine's (the listed tensors at a stage
  // boundary do not depend on thread timing, so a fresh run gives the same bytes); GPU 0's DP bar
  // holds the gathered output, DDP's bars hold buckets and no output.
  QCustomPlot* memory = charts->plot(CompareCharts::Memory);
  const dpv::course::ModeRun* runs[2] = {&fresh.dp, &fresh.ddp};
  int drawn = 0;
  for (const MemoryChartPart& part : memoryChartParts()) {
    for (int m = 0; m < 2; ++m) {
      auto* bars = memory->findChild<QCPBars*>(memoryBarsName(m == 1, part.name));
      if (!part.kind) {  // inside a stage: timing-dependent, so the page's own result
        if (!bars) continue;
        const dpv::course::ModeRun& shown = m == 0 ? page.result().dp : page.result().ddp;
        for (int d = 0; d < 2; ++d)
          EXPECT_DOUBLE_EQ(bars->data()->at(d)->value, shown.stage_temporaries[static_cast<size_t>(d)] / 1e3);
        continue;
      }
      const bool held = part.bytes(*runs[0], 0) + part.bytes(*runs[0], 1) + part.bytes(*runs[1], 0) + part.bytes(*runs[1], 1) > 0;
      ASSERT_EQ(bars != nullptr, held) << part.name.toStdString();
      if (!bars) continue;
      ++drawn;
      ASSERT_EQ(bars->data()->size(), 2);
      for (int d = 0; d < 2; ++d)
        EXPECT_DOUBLE_EQ(bars->data()->at(d)->value, part.bytes(*runs[m], static_cast<size_t>(d)) / 1e3)
            << (m ? "DDP " : "DP ") << part.name.toStdString() << " GPU " << d;
    }
  }
  EXPECT_GE(drawn, 2 * 5);  // parameters, gradients, batch, activations in both; output (DP), buckets (DDP)
  EXPECT_GT(fresh.dp.peak_parts[0].output, 0);
  EXPECT_GT(fresh.ddp.peak_parts[0].buckets, 0);
  EXPECT_GT(fresh.dp.peak_parts[0].total(), fresh.dp.peak_parts[1].total()) << "GPU 0's hump under DP";
  EXPECT_EQ(fresh.ddp.peak_parts[0].total(), fresh.ddp.peak_parts[1].total()) << "flat under DDP";
  // Bytes per transfer, and one speed-up point per device count.
  QCustomPlot* bytes = charts->plot(CompareCharts::Bytes);
  auto* ddpBytes = qobject_cast<QCPBars*>(bytes->plottable(1));
  ASSERT_NE(ddpBytes, nullptr);
  ASSERT_EQ(ddpBytes->data()->size(), static_cast<int>(fresh.ddp.bytes.size()));
  for (int i = 0; i < ddpBytes->data()->size(); ++i)
    EXPECT_DOUBLE_EQ(ddpBytes->data()->at(i)->value, fresh.ddp.bytes[static_cast<size_t>(i)].bytes / 1e3);
  QCustomPlot* speedup = charts->plot(CompareCharts::Speedup);
  EXPECT_EQ(speedup->graph(1)->data()->size(), 2);
  // The machine's limit beside the speed-ups, and each two-device point labelled with the
  // engine's efficiency (speed-up over that limit), in percent: timings, so the page's own result.
  ASSERT_EQ(page.result().speedup.size(), 2u);
  const dpv::course::SpeedupPoint& two = page.result().speedup[1];
  ASSERT_GT(two.machine_speedup, 0);
  QStringList labels;
  for (int i = 0; i < speedup->itemCount(); ++i)
    if (auto* text = qobject_cast<QCPItemText*>(speedup->item(i)); text && text->objectName() == QLatin1String("efficiency"))
      labels << text->text();
  const auto percent = [](double e) { return QStringLiteral("%1%").arg(std::lround(100 * e)); };
  EXPECT_EQ(labels, QStringList({percent(two.dp_efficiency), percent(two.ddp_efficiency)}));
  bool limit = false;
  for (int g = 0; g < speedup->graphCount(); ++g)
    if (speedup->graph(g)->objectName() == QLatin1String("machine-limit")) {
      limit = true;
      EXPECT_DOUBLE_EQ(speedup->graph(g)->data()->at(1)->value, two.machine_speedup);
    }
  EXPECT_TRUE(limit) << "the machine's limit is drawn";
}

// The pixel row of the highest stacked bar top in `plot` (bars with the same key stack).
double highestBarTopPixel(QCustomPlot* plot) {
  std::map<double, double> stackTop;  // key -> sum of the values stacked there
  for (int i = 0; i < plot->plottableCount(); ++i) {
    auto* bars = qobject_cast<QCPBars*>(plot->plottable(i));
    if (!bars) continue;
    for (auto it = bars->data()->constBegin(); it != bars->data()->constEnd(); ++it) stackTop[it->key] += it->value;
  }
  double top = 0;
  for (const auto& [key, value] : stackTop) top = std::max(top, value);
  return plot->yAxis->coordToPixel(top);
}

// Every chart with a legend keeps it out of the axis rect (a row under the axes), so at a small and
// a large page size no legend covers a curve or a bar (inset, they covered the loss curves).
class CompareLegend : public ::testing::TestWithParam<QSize> {};

TEST_P(CompareLegend, LegendsStayOutsideThePlotArea) {
  Engine e;
  ComparePage page(&e.context);
  page.resize(GetParam());
  page.show();
  ASSERT_NO_FATAL_FAILURE(runComparison(page, 4, 32));
  settleEvents();
  for (int chart = 0; chart < CompareCharts::kChartCount; ++chart) {
    QCustomPlot* plot = page.charts()->plot(static_cast<CompareCharts::Chart>(chart));
    plot->replot();
    if (!plot->legend->visible()) continue;
    const QRect legend = plot->legend->outerRect();
    const QRect axes = plot->axisRect()->rect();
    EXPECT_FALSE(legend.intersects(axes)) << "chart " << chart << " " << plot->width() << "x" << plot->height()
                                          << ": legend y " << legend.top() << ".." << legend.bottom() << ", axes y "
                                          << axes.top() << ".." << axes.bottom();
    EXPECT_GE(highestBarTopPixel(plot), axes.top() - 1.0) << "the bars are drawn inside the axis";
  }
}

INSTANTIATE_TEST_SUITE_P(PageSizes, CompareLegend, ::testing::Values(QSize(820, 520), QSize(1600, 1000)),
                         [](const ::testing::TestParamInfo<QSize>& info) {
                           return std::to_string(info.param.width()) + "x" + std::to_string(info.param.height());
                         });

// The comparison takes only the seed from the app's settings: model, devices, batch and iteration
// counts are the page's controls, and lr, BatchNorm mode and strategy the comparison's own
// (compare_run_defaults), whatever the settings bar says.
TEST(ComparePage, ConfigTakesTheSeedFromTheSettingsAndTheRestFromThePage) {
  Engine e;
  AppSettings settings;
  settings.devices = QStringLiteral("cpu:8");
  settings.preset = QStringLiteral("simple");
  settings.batchSize = 10;
  settings.learningRate = 0.3;
  settings.syncBatchNorm = true;
  settings.strategy = dpv::StrategyKind::DistributedDataParallel;
  settings.seed = 42;
  e.context.setSettings(settings);
  ComparePage page(&e.context);
  dpv::course::CompareConfig choices;
  choices.run.preset = "mnist-mlp";
  choices.run.devices = "cpu:3";
  choices.run.batch = 30;
  choices.iterations = 5;
  choices.max_speedup_devices = 4;
  page.setConfig(choices);

  const dpv::RunSpec defaults = dpv::course::compare_run_defaults();
  const dpv::course::CompareConfig config = page.config();
  EXPECT_EQ(config.run.preset, "mnist-mlp");
  EXPECT_EQ(config.run.devices, "cpu:3");
  EXPECT_EQ(config.run.batch, 30);
  EXPECT_EQ(config.run.seed, 42u);
  EXPECT_EQ(config.run.optimizer, defaults.optimizer);
  EXPECT_EQ(config.run.sync_bn, defaults.sync_bn);
  EXPECT_EQ(config.run.strategy, defaults.strategy);
  EXPECT_EQ(config.run.ddp, defaults.ddp);
  EXPECT_FALSE(config.run.model.has_value());
  const dpv::course::CompareConfig expected = choices;
  EXPECT_EQ(config.iterations, expected.iterations);
  EXPECT_EQ(config.max_speedup_devices, expected.max_speedup_devices);
  EXPECT_EQ(config.speedup_iters, expected.speedup_iters);
}

// The page says whose run it shows, why the loss jumps (a new random batch each step, from the
// run's seeds), and, when the simulated devices outnumber the hardware threads, in a banner of its
// own that the times are threads sharing cores, not GPUs.
TEST(ComparePage, SaysWhoseRunWhyTheLossJumpsAndWhenThreadsShareCores) {
  Engine e;
  ComparePage page(&e.context);
  page.resize(1100, 760);
  page.show();
  ASSERT_NO_FATAL_FAILURE(runComparison(page, 2, 16));
  const dpv::course::CompareResult& r = page.result();
  EXPECT_EQ(r.batches, 3);
  EXPECT_EQ(r.first_batch_seed, r.config.run.seed + 1);
  EXPECT_LE(r.loss_low, r.loss_high);
  EXPECT_TRUE(page.runCaption().contains(QStringLiteral("model mlp-bn · seed 0 · batch 16"))) << page.runCaption().toStdString();
  EXPECT_TRUE(page.runCaption().contains(QLatin1String("cpu:2")));
  const QString note = page.noteText();
  EXPECT_TRUE(note.contains(QLatin1String("new random batch"))) << note.toStdString();
  EXPECT_TRUE(note.contains(QStringLiteral("seeds %1 to %2").arg(r.first_batch_seed).arg(r.first_batch_seed + 2))) << note.toStdString();
  EXPECT_EQ(r.most_devices, 2);  // the sweep went to 2 devices
  EXPECT_EQ(page.coresBannerText().isEmpty(), !r.threads_share_cores());
  if (r.threads_share_cores()) {
    EXPECT_TRUE(page.coresBannerText().contains(QStringLiteral("speed-up beyond %1×").arg(r.cores_for_devices())))
        << page.coresBannerText().toStdString();
  }
}

TEST(ComparePage, AnEngineErrorIsShownNotThrown) {
  Engine e;
  ComparePage page(&e.context);
  dpv::course::CompareConfig config;
  config.run.devices = "cpu:4";
  config.run.batch = 2;  // fewer samples than devices
  page.setConfig(config);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return !page.running(); }));
  EXPECT_FALSE(page.hasResult());
  EXPECT_TRUE(page.errorText().contains(QStringLiteral("global batch"))) << page.errorText().toStdString();
}

}  // namespace
}  // namespace gui
