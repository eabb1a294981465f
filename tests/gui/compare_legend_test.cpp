// The DP vs DDP page's two stacked-bar charts (time per step, memory per GPU) carry their legend
// inset at the top: at a small and a large chart size the legend ends above the highest bar
// instead of covering it (a fixed 1.15x or 2.6x headroom left it over the bars in short charts).
#include <gtest/gtest.h>

#include <QTest>
#include <map>
#include <qcustomplot.h>

#include "course/ddp_compare.h"
#include "gui/app/context.h"
#include "gui/compare/charts.h"
#include "gui/compare/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui_test_support.h"

namespace gui {
namespace {

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

class CompareLegend : public ::testing::TestWithParam<QSize> {};

TEST_P(CompareLegend, StackedBarChartsKeepTheirLegendAboveTheBars) {
  AppContext context;
  EngineController engine;
  context.setEngine(&engine);
  ComparePage page(&context);
  page.resize(GetParam());
  page.show();
  dpv::course::CompareConfig config;
  config.preset = "mlp-bn";
  config.world_size = 4;
  config.batch = 32;
  config.iterations = 3;
  config.max_speedup_devices = 2;
  page.setConfig(config);
  page.run();
  ASSERT_TRUE(waitUntil([&] { return page.hasResult() || !page.errorText().isEmpty(); }, 60000));
  ASSERT_TRUE(page.errorText().isEmpty()) << page.errorText().toStdString();
  QTest::qWait(20);
  for (CompareCharts::Chart chart : {CompareCharts::StepTime, CompareCharts::Memory}) {
    QCustomPlot* plot = page.charts()->plot(chart);
    plot->replot();
    ASSERT_TRUE(plot->legend->visible());
    const double legendBottom = plot->legend->outerRect().bottom();
    const double barTop = highestBarTopPixel(plot);
    EXPECT_LE(legendBottom, barTop) << "chart " << chart << " " << plot->width() << "x" << plot->height()
                                    << ": the legend ends at y " << legendBottom << ", the highest bar starts at " << barTop;
    EXPECT_GT(barTop, plot->axisRect()->top() + 0.0) << "the bars are drawn inside the axis";
  }
}

INSTANTIATE_TEST_SUITE_P(PageSizes, CompareLegend, ::testing::Values(QSize(820, 520), QSize(1600, 1000)),
                         [](const ::testing::TestParamInfo<QSize>& info) {
                           return std::to_string(info.param.width()) + "x" + std::to_string(info.param.height());
                         });

}  // namespace
}  // namespace gui
