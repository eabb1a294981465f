// The BatchNorm lab's chart titles are broken into lines that fit their charts (at 1024x640 the
// charts are about 300 px wide and a one-line title was cut at both ends).
#include <gtest/gtest.h>

#include <QFontMetrics>
#include <qcustomplot.h>

#include "gui/bnlab/charts.h"
#include "gui_test_support.h"

namespace gui {
namespace {

TEST(BnLabChartTitles, EveryLineFitsItsChart) {
  BnLabCharts charts;
  charts.setSelection(0, 0, QStringLiteral("layer 1: BatchNorm1d(32)"));
  charts.resize(620, 700);
  charts.show();
  ASSERT_TRUE(waitUntil([&] { return charts.isVisible(); }, 2000));
  settleEvents();
  int checked = 0;
  for (int c = 0; c < BnLabCharts::kChartCount; ++c) {
    QCustomPlot* plot = charts.plot(static_cast<BnLabCharts::Chart>(c));
    ASSERT_NE(plot, nullptr);
    auto* title = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
    if (!title) continue;
    const QFontMetrics metrics(title->font());
    for (const QString& line : title->text().split(QLatin1Char('\n')))
      EXPECT_LE(metrics.horizontalAdvance(line), plot->width()) << c << ": " << line.toStdString();
    if (title->text().contains(QLatin1String("layer 1"))) {
      EXPECT_TRUE(title->text().contains(QLatin1String("channel 0"))) << "nothing of the title is lost";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 4) << "the four statistics charts name the layer";
}

}  // namespace
}  // namespace gui
