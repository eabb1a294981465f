// The tensor inspector in a short side panel (a 1024x640 or 1280x800 window gives it 150-250 px):
// the reason the device holds the selected tensor, the heat map's title and the heat map never
// paint over one another, and the whole reason stays readable (it scrolls instead of being cut).
#include <gtest/gtest.h>

#include <QLabel>
#include <QScrollArea>
#include <QTest>
#include <algorithm>

#include "gui/iteration/tensor_inspector.h"
#include "gui_test_support.h"

namespace gui {
namespace {

// A bucket's tensor as the DDP view lists it: 99 values, kept whole, so the heat map shows.
dpv::TensorInfo bucketTensor() {
  dpv::TensorInfo t;
  t.name = "rank 2: bucket 0 (done)";
  t.shape = {99};
  t.bytes = 99 * 4;
  for (int i = 0; i < 99; ++i) t.head.push_back(0.01 * (i - 50));
  t.why = "done: the sum over the ranks of gradient/W, i.e. the MEAN of the ranks' gradients, the same on every "
          "rank; Finalize makes it each parameter's .grad, and the optimizer step reads it there.";
  return t;
}

// `widget`'s rectangle in `ancestor`'s coordinates, cut to what its scroll area (if any) shows.
QRect shownIn(const QWidget* widget, const QWidget* ancestor) {
  QRect r(widget->mapTo(ancestor, QPoint(0, 0)), widget->size());
  for (const QWidget* w = widget->parentWidget(); w && w != ancestor; w = w->parentWidget())
    r = r.intersected(QRect(w->mapTo(ancestor, QPoint(0, 0)), w->size()));
  return r;
}

class TensorInspectorLayout : public ::testing::TestWithParam<int> {};

TEST_P(TensorInspectorLayout, ReasonTitleAndHeatMapNeverOverlapAndTheReasonScrolls) {
  TensorInspector inspector;
  inspector.showRows(QStringLiteral("<b>bucket 0: 6.bias, 6.weight</b> · rank 2 · after Backward"), {bucketTensor()}, 0);
  // The side column's splitter never makes the panel shorter than its minimum size hint.
  inspector.resize(260, std::max(GetParam(), inspector.minimumSizeHint().height()));
  inspector.show();
  settleEvents();

  HeatMap* heat = inspector.heatMap();
  ASSERT_TRUE(heat->isVisible()) << "99 values kept: the heat map shows";
  QLabel* why = nullptr;
  QLabel* title = nullptr;
  for (QLabel* label : inspector.findChildren<QLabel*>()) {
    if (label->text() == inspector.whyText()) why = label;
    if (label->text().startsWith(QLatin1String("every value of"))) title = label;
  }
  ASSERT_NE(why, nullptr);
  ASSERT_NE(title, nullptr);

  const QRect heatRect = shownIn(heat, &inspector);
  const QRect whyRect = shownIn(why, &inspector);
  const QRect titleRect = shownIn(title, &inspector);
  EXPECT_GT(heatRect.height(), 0);
  EXPECT_GT(whyRect.height(), 0) << "some of the reason is on screen";
  EXPECT_FALSE(whyRect.intersects(heatRect)) << "the reason runs under the heat map";
  EXPECT_FALSE(titleRect.intersects(heatRect)) << "the heat map's title runs under the heat map";
  EXPECT_FALSE(titleRect.isValid() && whyRect.intersects(titleRect)) << "the reason and the title overlap";
  // The label itself is as tall as its wrapped text: what the panel cannot show scrolls.
  EXPECT_GE(why->height(), why->heightForWidth(why->width()));
  auto* scroll = qobject_cast<QScrollArea*>(why->parentWidget()->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr) << "the reason sits in a scroll area";
}

// 0: as short as the panel gets (its minimum size hint; about its share of the side column in a
// 1024x640 window); 400: a roomy one.
INSTANTIATE_TEST_SUITE_P(PanelHeights, TensorInspectorLayout, ::testing::Values(0, 200, 250, 400));

}  // namespace
}  // namespace gui
