// Layout at the window sizes a learner uses (1024x640 up to 1920x1080): nothing of the Iteration
// page's picture runs under the DataParallel | DDP switch; the BatchNorm lab fits 1024x640.
#include <gtest/gtest.h>

#include <QImage>
#include <QPainter>

#include <QGraphicsItem>
#include <QGraphicsScene>
#include <QGraphicsView>
#include <QScrollArea>
#include <QScrollBar>
#include <qcustomplot.h>

#include "gui/common/context.h"
#include "gui/app/main_window.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"
#include "gui/compare/charts.h"
#include "gui/compare/page.h"
#include "gui/common/lesson_panel.h"
#include "gui/ddp/scene.h"
#include "gui/iteration/page.h"
#include "gui/runtime/engine_controller.h"
#include "gui_test_support.h"

namespace gui {
namespace {

// The window rectangle an item of `view`'s scene covers on screen (empty when not shown).
QRect onScreen(const QGraphicsView* view, const QGraphicsItem* item) {
  const QRect inViewport = view->mapFromScene(item->sceneBoundingRect()).boundingRect();
  const QRect shown = inViewport.intersected(view->viewport()->rect());
  if (shown.isEmpty()) return {};
  return QRect(view->viewport()->mapTo(view->window(), shown.topLeft()), shown.size());
}

// Every visible item of the scene on screen that the mode switch covers, described.
QStringList itemsUnderTheSwitch(IterationPage* page) {
  QStringList under;
  const QWidget* sw = page->modeSwitch();
  const QRect switchRect(sw->mapTo(sw->window(), QPoint(0, 0)), sw->size());
  QGraphicsScene* scene = page->showingDdp() ? static_cast<QGraphicsScene*>(page->ddpScene()) : page->scene();
  const QGraphicsView* view = scene->views().value(0);
  if (!view) return {QStringLiteral("no view")};
  for (const QGraphicsItem* item : scene->items()) {
    if (!item->isVisible()) continue;
    const QRect r = onScreen(view, item);
    if (r.isEmpty() || !r.intersects(switchRect)) continue;
    const auto* text = dynamic_cast<const QGraphicsSimpleTextItem*>(item);
    under << (text ? text->text() : QStringLiteral("an item at %1,%2").arg(r.x()).arg(r.y()));
  }
  return under;
}

class ModeSwitchLayout : public ::testing::TestWithParam<QSize> {};

TEST_P(ModeSwitchLayout, NothingOfTheSceneRunsUnderTheModeSwitch) {
  AppSettings settings = settingsFor(QStringLiteral("cpu:4"), QStringLiteral("mlp-bn"), 10);
  settings.strategy = dpv::StrategyKind::DistributedDataParallel;
  SizedWindow w(settings, GetParam());
  w.window->showPage(QStringLiteral("iteration"));
  IterationPage* page = w.iteration();
  ASSERT_NE(page, nullptr);
  page->setSpeed(0);
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && w.engine->info().ddp && !w.engine->busy(); }));
  ASSERT_TRUE(page->showingDdp());
  // Every stage of the DDP iteration: the headlines differ in length (Backward's is the longest).
  bool sawLongHeadline = false;
  for (int i = 0; i < static_cast<int>(w.engine->info().plan.size()); ++i) {
    page->stepForward();
    ASSERT_TRUE(waitUntil([&] { return !page->waitingForEngine() && page->cursor() == i; })) << "stage " << i;
    settleEvents();
    const QStringList under = itemsUnderTheSwitch(page);
    EXPECT_TRUE(under.isEmpty()) << "stage " << i << ": " << under.join(QStringLiteral(" | ")).toStdString();
    QGraphicsSimpleTextItem* headline = page->ddpScene()->headlineText();
    ASSERT_NE(headline, nullptr);
    sawLongHeadline = sawLongHeadline || headline->text().size() > 60;
    // The headline is whole: inside the scene the view fits into the card.
    EXPECT_TRUE(page->ddpScene()->sceneRect().contains(headline->sceneBoundingRect())) << headline->text().toStdString();
  }
  EXPECT_TRUE(sawLongHeadline) << "a stage with a long headline was checked";
  // The DataParallel picture too.
  page->setStrategy(dpv::StrategyKind::DataParallel);
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && !w.engine->info().ddp && !w.engine->busy(); }));
  for (int i = 0; i < 3; ++i) {
    page->stepForward();
    ASSERT_TRUE(waitUntil([&] { return !page->waitingForEngine() && page->cursor() == i; }));
  }
  settleEvents();
  const QStringList under = itemsUnderTheSwitch(page);
  EXPECT_TRUE(under.isEmpty()) << "DataParallel: " << under.join(QStringLiteral(" | ")).toStdString();
}

INSTANTIATE_TEST_SUITE_P(WindowSizes, ModeSwitchLayout, ::testing::Values(QSize(1024, 640), QSize(1920, 1080)),
                         [](const ::testing::TestParamInfo<QSize>& info) {
                           return std::to_string(info.param.width()) + "x" + std::to_string(info.param.height());
                         });

// The BatchNorm lab at 1024x640: its controls wrap instead of widening the page (no sideways
// scrolling), and every legend entry of its charts is whole (not cut by its neighbour or the edge).
TEST(BatchNormLabLayout, FitsTheSmallestWindowWithWholeLegends) {
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), QSize(1024, 640));
  w.window->showPage(QStringLiteral("bnlab"));
  auto* lab = qobject_cast<BatchNormLabPage*>(w.window->page(QStringLiteral("bnlab")));
  ASSERT_NE(lab, nullptr);
  ASSERT_TRUE(waitUntil([&] { return lab->isConfigured(); }));
  lab->setStepsPerSecond(0);
  lab->setStepLimit(3);
  lab->start();
  ASSERT_TRUE(waitUntil([&] { return lab->charts()->stepCount() >= 3 || lab->hasFailed(); })) << "the lab never trained";
  ASSERT_FALSE(lab->hasFailed()) << lab->failure().toStdString();
  settleEvents();
  auto* scroll = qobject_cast<QScrollArea*>(lab->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr);
  EXPECT_EQ(scroll->horizontalScrollBar()->maximum(), 0)
      << "the lab needs " << lab->minimumSizeHint().width() << " px of " << scroll->viewport()->width() << [&] {
           std::string parts;
           for (QWidget* child : lab->findChildren<QWidget*>(Qt::FindDirectChildrenOnly))
             parts += " " + std::string(child->metaObject()->className()) + ":" + child->objectName().toStdString() + "=" +
                      std::to_string(child->minimumSizeHint().width());
           return parts;
         }();
  lab->charts()->replotNow();
  for (int c = 0; c < BnLabCharts::kChartCount; ++c) {
    QCustomPlot* plot = lab->charts()->plot(static_cast<BnLabCharts::Chart>(c));
    int items = 0;
    for (int i = 0; i < plot->legend->itemCount(); ++i) {
      QCPAbstractLegendItem* item = plot->legend->item(i);
      if (!item) continue;
      ++items;
      auto* entry = qobject_cast<QCPPlottableLegendItem*>(item);
      const std::string name = entry ? entry->plottable()->name().toStdString() : std::string("?");
      EXPECT_GE(item->outerRect().width(), item->minimumOuterSizeHint().width())
          << BnLabCharts::chartId(static_cast<BnLabCharts::Chart>(c)).toStdString() << ": \"" << name << "\" is cut: " << item->outerRect().width() << " of " << item->minimumOuterSizeHint().width() << " in a chart " << plot->width() << " wide, legend " << plot->legend->outerRect().width() << " columns " << plot->legend->wrap();
      EXPECT_TRUE(plot->rect().contains(item->outerRect()))
          << BnLabCharts::chartId(static_cast<BnLabCharts::Chart>(c)).toStdString() << ": \"" << name << "\" runs off the chart";
    }
    EXPECT_GE(items, 2);
    EXPECT_FALSE(plot->toolTip().isEmpty()) << "the full meaning of the short legend entries";
  }
}

// The Iteration scene at 1024x640 with 4 and 8 devices: device names, chunk chips, replica and
// memory lines and the stage card are drawn whole (a shorter form or a smaller font, never "…").
class SceneLabels : public ::testing::TestWithParam<int> {};

TEST_P(SceneLabels, ImportantLabelsAreWholeAt1024x640) {
  const int devices = GetParam();
  SizedWindow w(settingsFor(QStringLiteral("cpu:%1").arg(devices), QStringLiteral("simple"), 10), QSize(1024, 640));
  w.window->showPage(QStringLiteral("iteration"));
  IterationPage* page = w.iteration();
  page->setSpeed(0);
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && !w.engine->busy(); }));
  QGraphicsView* view = page->scene()->views().value(0);
  ASSERT_NE(view, nullptr);
  auto cut = [](const QStringList& texts) {
    QStringList out;
    for (const QString& t : texts)
      if (t.contains(QChar(0x2026))) out << t;
    return out;
  };
  for (int i = 0; i < 4; ++i) {  // Scatter, Replicate, Forward, Gather
    page->stepForward();
    ASSERT_TRUE(waitUntil([&] { return !page->waitingForEngine() && page->cursor() == i; }));
    {  // paints every item, also those scrolled out of the view (the labels do not depend on the scale)
      QImage image(page->scene()->sceneRect().size().toSize(), QImage::Format_ARGB32);
      QPainter painter(&image);
      page->scene()->render(&painter);
    }
    const std::string stage = "stage " + std::to_string(i) + ": ";
    EXPECT_TRUE(cut(page->scene()->card()->drawnTexts()).isEmpty()) << stage << cut(page->scene()->card()->drawnTexts()).join(" | ").toStdString();
    for (int d = 0; d < page->scene()->deviceCount(); ++d) {
      DeviceBox* box = page->scene()->deviceBox(d);
      ASSERT_FALSE(box->drawnTexts().isEmpty());
      EXPECT_EQ(box->drawnTexts().front(), QStringLiteral("GPU %1").arg(d));
      EXPECT_TRUE(cut(box->drawnTexts()).isEmpty()) << stage << "GPU " << d << ": " << cut(box->drawnTexts()).join(" | ").toStdString();
      for (ChipItem* chip : page->scene()->chipsOn(d)) {
        EXPECT_TRUE(cut(chip->drawnTexts()).isEmpty()) << stage << "GPU " << d << ": " << chip->view().text.toStdString() << " drawn as "
                                                       << chip->drawnTexts().join(" | ").toStdString();
        // A chunk chip keeps which samples (so how many) the device got.
        if (chip->view().kind == dpv::MemoryKind::Batch && chip->view().text.startsWith(QLatin1String("sample"))) {
          EXPECT_TRUE(chip->drawnTexts().value(0).startsWith(QLatin1String("sample"))) << chip->drawnTexts().join(" | ").toStdString();
        }
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, SceneLabels, ::testing::Values(4, 8));


// The DP vs DDP page at 1024x640: the lesson moves under the charts (beside them it was one word a
// line and squeezed the charts until their titles were cut), the six charts stay three a row, and
// every chart title is whole; at 1920x1080 the lesson reads beside the charts.
class CompareLayout : public ::testing::TestWithParam<QSize> {};

TEST_P(CompareLayout, ChartTitlesAreWholeAndTheLessonHasRoom) {
  const QSize size = GetParam();
  SizedWindow w(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10), size);
  w.window->showPage(QStringLiteral("compare"));
  auto* page = qobject_cast<ComparePage*>(w.window->page(QStringLiteral("compare")));
  ASSERT_NE(page, nullptr);
  settleEvents();
  const bool small = size.width() < 1100;
  EXPECT_EQ(page->lessonBelowCharts(), small);
  EXPECT_EQ(page->charts()->columns(), 3);
  EXPECT_GE(page->lessonPanel()->width(), 240) << "the lesson is a column of single words";
  auto* scroll = qobject_cast<QScrollArea*>(page->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr);
  EXPECT_EQ(scroll->horizontalScrollBar()->maximum(), 0);
  for (int c = 0; c < CompareCharts::kChartCount; ++c) {
    QCustomPlot* plot = page->charts()->plot(static_cast<CompareCharts::Chart>(c));
    plot->replot();
    auto* heading = qobject_cast<QCPTextElement*>(plot->plotLayout()->element(0, 0));
    ASSERT_NE(heading, nullptr);
    const int needed = QFontMetrics(heading->font()).horizontalAdvance(heading->text());
    EXPECT_LE(needed, plot->width()) << heading->text().toStdString() << " is cut in a chart " << plot->width() << " px wide";
  }
}

INSTANTIATE_TEST_SUITE_P(WindowSizes, CompareLayout, ::testing::Values(QSize(1024, 640), QSize(1920, 1080)),
                         [](const ::testing::TestParamInfo<QSize>& info) {
                           return std::to_string(info.param.width()) + "x" + std::to_string(info.param.height());
                         });

}  // namespace
}  // namespace gui
