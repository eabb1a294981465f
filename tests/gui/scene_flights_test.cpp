// Gather and Reduce at 1x: the chips converging on device 0 leave one device after the other, so
// near the end of the first flight they are still apart (not one blur on top of device 0).
#include <gtest/gtest.h>

#include <QLineF>

#include "gui/iteration/scene.h"
#include "gui_test_support.h"

namespace gui {
namespace {

class SceneFlightsTest : public IterationPageTest {
 protected:
  // Shows stage `before` without animation, then animates the next one at 1x and freezes it at
  // 90% of one flight; returns the chips in flight.
  QList<ChipItem*> frozenFlights(int before) {
    page_->setSpeed(0);
    for (int i = page_->cursor() + 1; i <= before; ++i)
      if (!stepTo(i)) return {};
    page_->setSpeed(1.0);
    page_->stepForward();
    if (!waitUntil([&] { return page_->scene()->animating() || !page_->errorText().isEmpty(); })) return {};
    page_->scene()->pauseAnimationsAt(page_->scene()->duration() * 9 / 10);
    return page_->scene()->flyingChips();
  }
  static qreal closest(const QList<ChipItem*>& chips) {
    qreal best = 1e9;
    for (int i = 0; i < chips.size(); ++i)
      for (int j = i + 1; j < chips.size(); ++j) best = std::min(best, QLineF(chips[i]->pos(), chips[j]->pos()).length());
    return best;
  }
};

TEST_F(SceneFlightsTest, GatheredOutputsArriveOneAfterTheOther) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  const QList<ChipItem*> flights = frozenFlights(2);  // Scatter, Replicate, Forward 0; then Gather
  ASSERT_EQ(flights.size(), 3) << "GPU 1, 2 and 3 send their outputs to GPU 0";
  EXPECT_GT(closest(flights), 24.0) << "the flying outputs overlap";
}

TEST_F(SceneFlightsTest, ReducedGradientsArriveOneDeviceAfterTheOther) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  const QList<ChipItem*> flights = frozenFlights(6);  // ... Backward 0; then Reduce grads
  ASSERT_GE(flights.size(), 3) << "GPU 1, 2 and 3 send their gradients to GPU 0";
  EXPECT_GT(closest(flights), 20.0) << "the flying gradients overlap";
}

}  // namespace
}  // namespace gui
