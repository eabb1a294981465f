// The loss strip under the Iteration scene is short: its loss axis carries two or three labels
// whatever the losses (four or five on 0..1 were drawn on top of one another), fits the losses
// (a fall from 1.1251 to 1.1019 on a 0..1.3 scale was a flat line), and its axes have titles that
// say whose loss it is.
#include <gtest/gtest.h>

#include <qcustomplot.h>

#include "gui/iteration/loss_strip.h"

namespace gui {
namespace {

TEST(LossStripTicks, TheLossAxisHasTwoOrThreeLabelsAroundTheLosses) {
  const std::vector<QVector<double>> runs{{}, {0.31}, {0.9, 0.7}, {1.0026, 0.95, 0.9032}, {2.7, 2.1}, {17.0, 12.0, 9.0}, {1.1251, 1.1019}};
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
    for (double tick : plot->yAxis->tickVector()) {
      if (tick < range.lower - 1e-9 || tick > range.upper + 1e-9) continue;
      ++shown;
    }
    const double top = losses.isEmpty() ? 0 : losses.front();
    EXPECT_GE(shown, 2) << "losses from " << top;
    EXPECT_LE(shown, 3) << "losses from " << top;
    for (double loss : losses) EXPECT_TRUE(range.contains(loss)) << loss;
  }
}

TEST(LossStripTicks, ASmallFallFillsTheStripInsteadOfAFixedScale) {
  LossStrip strip;
  strip.setLosses({1.1251, 1.1019});
  const QPointF range = strip.yRange();
  // The fall is at least a third of the axis (on 0..1.3 it was under 2%), with a margin around it.
  EXPECT_GE((1.1251 - 1.1019) / (range.y() - range.x()), 1.0 / 3) << range.x() << ".." << range.y();
  EXPECT_LT(range.x(), 1.1019);
  EXPECT_GT(range.y(), 1.1251);
}

TEST(LossStripTicks, TheAxesHaveTitlesThatSayWhoseLossItIs) {
  LossStrip strip;
  strip.setLosses({0.9, 0.8});
  EXPECT_EQ(strip.xTitle(), QStringLiteral("iteration"));
  EXPECT_EQ(strip.yTitle(), QStringLiteral("loss"));
  EXPECT_TRUE(strip.caption().startsWith(QLatin1String("Loss (whole batch)"))) << strip.caption().toStdString();
  strip.setMeaning(LossMeaning::RankZeroShard);
  EXPECT_EQ(strip.yTitle(), QStringLiteral("rank 0"));
  EXPECT_TRUE(strip.caption().startsWith(QLatin1String("Rank 0's loss (its shard)"))) << strip.caption().toStdString();
  EXPECT_EQ(strip.points().size(), 2) << "the meaning changes the words, not the points";
}

}  // namespace
}  // namespace gui
