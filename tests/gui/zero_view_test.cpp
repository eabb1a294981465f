// The Iteration page under ZeRO-1, -2 and -3: the strategy switch offers all five strategies and
// runs the one picked; the rank view's flat parameter bars (ZeRO-2/3) and owned parameters (ZeRO-1)
// follow the engine's ShardState stage by stage; the padding label, the memory bars' gathered part,
// the code panel's line and the stage lessons' ids.
#include "ddp_test_support.h"

#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QScrollArea>
#include <QScrollBar>
#include <QTemporaryDir>
#include <QToolButton>
#include <algorithm>
#include <set>

#include "gui/app/main_window.h"
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/common/scene_model.h"
#include "gui/common/theme.h"
#include "gui/ddp/scene.h"
#include "gui/runtime/settings_store.h"

namespace gui {

namespace {

AppSettings zeroSettings(dpv::StrategyKind kind, const QString& devices) {
  AppSettings s = settingsFor(devices, QStringLiteral("mlp-bn"), 12);
  s.strategy = kind;
  return s;
}

// The slices a rank's flat parameter and gradient bars should show, from the engine's ShardState.
QStringList expectedParamSlices(const dpv::RankState& rs, int world) {
  QStringList words;
  for (int s = 0; s < world; ++s)
    words << QStringLiteral("slice %1: %2").arg(s).arg(s == rs.rank ? QStringLiteral("own")
                                                                     : rs.shard.full_params ? QStringLiteral("gathered")
                                                                                            : QStringLiteral("freed"));
  return words;
}

QStringList expectedGradSlices(const dpv::RankState& rs, int world) {
  QStringList words;
  for (int s = 0; s < world; ++s) {
    QString word = QStringLiteral("none");
    if (rs.shard.full_grads) word = QStringLiteral("local");
    else if (rs.shard.grad_shard_averaged && s == rs.rank) word = QStringLiteral("averaged");
    words << QStringLiteral("slice %1: %2").arg(s).arg(word);
  }
  return words;
}

QStringList descriptions(const QList<QGraphicsRectItem*>& items) {
  QStringList out;
  for (const QGraphicsRectItem* item : items) out << describe(item);
  return out;
}

}  // namespace

TEST_F(IterationPageTest, TheStrategySwitchOffersFiveStrategiesAndRunsThePickedOne) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  const QList<QToolButton*> buttons = page_->strategyButtons();
  ASSERT_EQ(buttons.size(), 5);
  for (int i = 0; i < buttons.size(); ++i) {
    const dpv::StrategyKind kind = kAllStrategies[i];
    if (kind != dpv::StrategyKind::DataParallel) {
      EXPECT_EQ(buttons[i]->text().toStdString(), dpv::strategy_short_name(kind));
    }
    EXPECT_TRUE(buttons[i]->toolTip().contains(QLatin1String(dpv::strategy_name(kind)))) << buttons[i]->toolTip().toStdString();
    EXPECT_EQ(buttons[i]->isChecked(), kind == dpv::StrategyKind::DataParallel);
  }
  for (int i : {3, 2, 4, 1, 0}) {  // ZeRO-2, ZeRO-1, ZeRO-3, DDP, DataParallel
    const dpv::StrategyKind kind = kAllStrategies[i];
    buttons[i]->click();
    ASSERT_TRUE(waitUntil([&] { return engine_->hasIteration() && engine_->info().strategy == kind && !engine_->busy(); }))
        << dpv::strategy_short_name(kind);
    EXPECT_EQ(context_->settings().strategy, kind);
    EXPECT_TRUE(buttons[i]->isChecked());
    EXPECT_EQ(page_->showingDdp(), dpv::runs_ranks(kind));
    EXPECT_EQ(engine_->info().flatLayout.has_value(), dpv::zero_stage(kind) >= 2);
    EXPECT_EQ(engine_->info().zeroPartition.empty(), dpv::zero_stage(kind) != 1);
    const bool gathers = std::any_of(engine_->info().plan.begin(), engine_->info().plan.end(),
                                     [](const dpv::Stage& s) { return s.kind == dpv::StageKind::GatherParams; });
    EXPECT_EQ(gathers, dpv::zero_stage(kind) >= 2) << dpv::strategy_short_name(kind);
  }
}

TEST_F(IterationPageTest, Zero3GathersFullBarsOnEveryRankAndFreesThemBackToSlices) {
  const int world = 3;
  start(zeroSettings(dpv::StrategyKind::Zero3, QStringLiteral("cpu:3")));
  ASSERT_TRUE(engine_->info().ddp);
  EXPECT_TRUE(page_->codeView()->tabText(1).contains(QLatin1String("FSDP")));
  bool sawGathered = false, sawFreed = false, sawReduceScatter = false, sawPadding = false;
  for (int i = 0; i < static_cast<int>(engine_->info().plan.size()); ++i) {
    ASSERT_TRUE(stepTo(i)) << "stage " << i;
    ASSERT_TRUE(page_->errorText().isEmpty()) << page_->errorText().toStdString();
    const dpv::StageEvent& ev = engine_->events().at(i);
    ASSERT_EQ(ev.ranks.size(), static_cast<size_t>(world));
    const DdpScene* scene = page_->ddpScene();
    int64_t padding = 0;
    for (const dpv::RankState& rs : ev.ranks) {
      SCOPED_TRACE(ev.stage.title + ", rank " + std::to_string(rs.rank));
      ASSERT_EQ(rs.shard.stage, 3);
      padding += rs.shard.padding_in_shard;
      EXPECT_EQ(descriptions(scene->flatSliceItems(rs.rank)), expectedParamSlices(rs, world));
      EXPECT_EQ(descriptions(scene->gradSliceItems(rs.rank)), expectedGradSlices(rs, world));
      EXPECT_TRUE(scene->bucketItem(rs.rank, 0) == nullptr) << "FSDP has no buckets";
      const dpv::MemoryBreakdown& memory = ev.devices.at(static_cast<size_t>(rs.rank)).memory;
      if (memory.total() > 0) {
        ASSERT_NE(scene->memoryItem(rs.rank), nullptr);
        EXPECT_EQ(scene->memoryItem(rs.rank)->toolTip().contains(QLatin1String("gathered parameters")), memory.gathered > 0);
      }
    }
    // The padding label shows what the engine's ranks hold as padding, summed over their slices.
    sawPadding = sawPadding || padding > 0;
    for (int r = 0; r < world; ++r) {
      const QGraphicsSimpleTextItem* label = scene->paddingText(r);
      if (padding == 0) {
        EXPECT_EQ(label, nullptr);
        continue;
      }
      ASSERT_NE(label, nullptr);
      EXPECT_EQ(label->text(), QStringLiteral("padding (%1)").arg(padding));
    }
    const auto all = [&](auto pred) { return std::all_of(ev.ranks.begin(), ev.ranks.end(), pred); };
    const QString script = page_->codeView()->lineText(0, page_->codeView()->highlightedLine(0));
    switch (ev.stage.kind) {
      case dpv::StageKind::GatherParams:
        sawGathered = true;
        EXPECT_TRUE(all([](const dpv::RankState& rs) { return rs.shard.full_params; })) << "the engine gathers on every rank";
        for (int r = 0; r < world; ++r)
          for (const QString& d : descriptions(scene->flatSliceItems(r))) EXPECT_FALSE(d.endsWith(QLatin1String("freed"))) << d.toStdString();
        EXPECT_TRUE(script.contains(QLatin1String("model(inputs)")) || script.contains(QLatin1String("backward"))) << script.toStdString();
        break;
      case dpv::StageKind::FreeParams:
        sawFreed = true;
        EXPECT_TRUE(all([](const dpv::RankState& rs) { return !rs.shard.full_params; }));
        for (int r = 0; r < world; ++r)
          EXPECT_EQ(descriptions(scene->flatSliceItems(r)).filter(QStringLiteral("freed")).size(), world - 1);
        break;
      case dpv::StageKind::ReduceScatter:
        sawReduceScatter = true;
        EXPECT_TRUE(script.contains(QLatin1String("loss.backward()"))) << script.toStdString();
        for (int r = 0; r < world; ++r)
          EXPECT_EQ(describe(scene->gradSliceItems(r).value(r)), QStringLiteral("slice %1: averaged").arg(r));
        break;
      default: break;
    }
  }
  EXPECT_TRUE(sawGathered && sawFreed && sawReduceScatter);
  EXPECT_TRUE(sawPadding) << "mlp-bn's parameters do not divide into 3 slices: the label was checked";
}

TEST_F(IterationPageTest, Zero1HighlightsEachRanksOwnedParametersAsTheEnginePartitionsThem) {
  start(zeroSettings(dpv::StrategyKind::Zero1, QStringLiteral("cpu:3")));
  ASSERT_EQ(engine_->info().zeroPartition.size(), 3u);
  EXPECT_TRUE(page_->codeView()->tabText(1).contains(QLatin1String("ZeRO")));
  bool sawBroadcast = false;
  for (int i = 0; i < static_cast<int>(engine_->info().plan.size()); ++i) {
    ASSERT_TRUE(stepTo(i)) << "stage " << i;
    const dpv::StageEvent& ev = engine_->events().at(i);
    for (const dpv::RankState& rs : ev.ranks) {
      SCOPED_TRACE(ev.stage.title + ", rank " + std::to_string(rs.rank));
      ASSERT_EQ(rs.shard.stage, 1);
      std::set<QString> want, shown;
      for (const auto& name : rs.shard.owned_params) want.insert(programParameterName(engine_->info(), name) + QStringLiteral(": owned"));
      for (const QString& d : descriptions(page_->ddpScene()->paramChipItems(rs.rank)))
        if (d.endsWith(QLatin1String(": owned"))) shown.insert(d);
      EXPECT_EQ(shown, want);
      EXPECT_EQ(page_->ddpScene()->paramChipItems(rs.rank).size(), static_cast<int>(engine_->info().parameterNames.size()));
    }
    if (ev.stage.kind == dpv::StageKind::BroadcastParams) {
      sawBroadcast = true;
      const QString source = page_->codeView()->lineText(1, page_->codeView()->highlightedLine(1));
      EXPECT_TRUE(source.contains(QLatin1String("_sync_params"))) << source.toStdString();
    }
  }
  EXPECT_TRUE(sawBroadcast);
}

TEST(ZeroLayout, Zero3sLongPlanFitsA1024x640WindowWithTheCurrentStageInSight) {
  SizedWindow w(zeroSettings(dpv::StrategyKind::Zero3, QStringLiteral("cpu:4")), QSize(1024, 640));
  w.window->showPage(QStringLiteral("iteration"));
  auto* page = qobject_cast<IterationPage*>(w.window->page(QStringLiteral("iteration")));
  ASSERT_NE(page, nullptr);
  page->setSpeed(0);
  ASSERT_TRUE(waitUntil([&] { return w.engine->hasIteration() && w.engine->info().strategy == dpv::StrategyKind::Zero3 && !w.engine->busy(); }));
  const int last = static_cast<int>(w.engine->info().plan.size()) - 1;
  bool done = false;
  page->seekTo(last, [&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  settleEvents();
  auto* scroll = qobject_cast<QScrollArea*>(page->parentWidget()->parentWidget());
  ASSERT_NE(scroll, nullptr);
  EXPECT_EQ(scroll->horizontalScrollBar()->maximum(), 0) << "the plan's pills widen the page";
  EXPECT_EQ(scroll->verticalScrollBar()->maximum(), 0);
  // The last stage's pill is checked and inside the strip's visible part.
  auto* strip = page->findChild<QScrollArea*>(QStringLiteral("stageStripScroll"));
  ASSERT_NE(strip, nullptr);
  const QToolButton* active = nullptr;
  for (const QToolButton* pill : strip->widget()->findChildren<QToolButton*>())
    if (pill->isChecked()) active = pill;
  ASSERT_NE(active, nullptr);
  const QRect shown(active->mapTo(strip->viewport(), QPoint(0, 0)), active->size());
  EXPECT_GE(strip->viewport()->height(), active->height()) << "the strip shows its pills whole";
  EXPECT_GE(shown.top(), 0);
  EXPECT_TRUE(shown.left() >= 0 && shown.right() < strip->viewport()->width())
      << "the current stage's pill is scrolled into sight: x " << shown.x() << ", width " << shown.width() << " in "
      << strip->viewport()->width();
  EXPECT_GT(strip->horizontalScrollBar()->value(), 0) << "at 1024 px ZeRO-3's pills do not all fit: the strip scrolled";
}

TEST(ZeroMemory, GatheredParametersHaveAColourOfTheirOwnInBothThemes) {
  using K = dpv::MemoryKind;
  for (const QString& theme : {QStringLiteral("light"), QStringLiteral("dark")}) {
    const SceneColors& c = sceneColors(theme);
    const QColor gathered = c.memoryFor(K::Gathered);
    for (K other : {K::Batch, K::Parameters, K::Gradients, K::Activations, K::Optimizer, K::Output, K::Buckets})
      EXPECT_NE(gathered, c.memoryFor(other)) << theme.toStdString() << " " << dpv::memory_kind_name(other);
    EXPECT_NE(gathered, c.memoryFill) << theme.toStdString() << ": not the colour of an unknown kind";
    // Visible on the memory bar's track.
    EXPECT_GT(std::abs(gathered.lightness() - c.memoryTrack.lightness()), 40) << theme.toStdString();
  }
}

TEST(ZeroLessons, TheShardedStagesReadZerosLessonsAndTheOthersKeepDdps) {
  using K = dpv::StageKind;
  for (K kind : {K::GatherParams, K::FreeParams, K::ReduceScatter, K::BroadcastParams, K::Step})
    EXPECT_EQ(stageLessonPath(dpv::StrategyKind::Zero2, kind), QStringLiteral("zero/stages/") + QLatin1String(dpv::stage_kind_name(kind)));
  EXPECT_EQ(stageLessonPath(dpv::StrategyKind::Zero3, K::Forward), QStringLiteral("ddp/stages/forward"));
  EXPECT_EQ(stageLessonPath(dpv::StrategyKind::DistributedDataParallel, K::Step), QStringLiteral("ddp/stages/step"));
  EXPECT_EQ(stageLessonPath(dpv::StrategyKind::DataParallel, K::Step), QStringLiteral("stages/step"));
}

TEST_F(IterationPageTest, AMissingZeroLessonSaysSoAndThePageKeepsWorking) {
  QTemporaryDir empty;
  ASSERT_TRUE(empty.isValid());
  qputenv("DPVIZ_LESSONS", empty.path().toUtf8());
  start(zeroSettings(dpv::StrategyKind::Zero2, QStringLiteral("cpu:2")));
  qunsetenv("DPVIZ_LESSONS");
  int gather = -1;
  for (int i = 0; i < static_cast<int>(engine_->info().plan.size()) && gather < 0; ++i)
    if (engine_->info().plan[static_cast<size_t>(i)].kind == dpv::StageKind::GatherParams) gather = i;
  ASSERT_GE(gather, 0);
  bool done = false;
  page_->seekTo(gather, [&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  EXPECT_EQ(page_->cursor(), gather);
  EXPECT_TRUE(page_->lessonPanel()->lessonMissing());
  EXPECT_TRUE(page_->errorText().isEmpty());
  EXPECT_EQ(page_->ddpScene()->flatSliceItems(0).size(), 2);
}

}  // namespace gui
