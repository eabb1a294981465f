// The loss strip under the Iteration scene is about 60 px tall: its loss axis carries two or three
// labels whatever the losses (four or five on 0..1 were drawn on top of one another), and always
// the zero it starts from.
#include <gtest/gtest.h>

#include <qcustomplot.h>

#include "gui/iteration/loss_strip.h"

namespace gui {
namespace {

TEST(LossStripTicks, TheLossAxisHasTwoOrThreeLabelsFromZero) {
  const std::vector<QVector<double>> runs{{}, {0.31}, {0.9, 0.7}, {1.0026, 0.95, 0.9032}, {2.7, 2.1}, {17.0, 12.0, 9.0}};
  for (const QVector<double>& losses : runs) {
    LossStrip strip;
    strip.resize(700, 110);
    strip.show();
    strip.setLosses(losses);
    auto* plot = strip.findChild<QCustomPlot*>();
    ASSERT_NE(plot, nullptr);
    plot->replot();
    const QCPRange range = plot->yAxis->range();
    int shown = 0;
    bool zero = false;
    for (double tick : plot->yAxis->tickVector()) {
      if (tick < range.lower - 1e-9 || tick > range.upper + 1e-9) continue;
      ++shown;
      zero = zero || std::abs(tick) < 1e-12;
    }
    const double top = losses.isEmpty() ? 0 : losses.front();
    EXPECT_GE(shown, 2) << "losses from " << top;
    EXPECT_LE(shown, 3) << "losses from " << top;
    EXPECT_TRUE(zero) << "losses from " << top;
  }
}

}  // namespace
}  // namespace gui
