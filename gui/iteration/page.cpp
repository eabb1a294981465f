#include "gui/iteration/page.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QShortcut>
#include <QStyle>
#include <QSplitter>
#include <QStackedWidget>
#include <QToolButton>
#include <QVBoxLayout>
#include <memory>

#include "gui/common/context.h"
#include "gui/common/theme.h"
#include "gui/common/ui_helpers.h"
#include "gui/ddp/code.h"
#include "gui/ddp/scene.h"
#include "gui/ddp/scene_model.h"
#include "gui/ddp/zero_code.h"
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/iteration/loss_strip.h"
#include "gui/iteration/scene.h"
#include "gui/iteration/stepper_bar.h"
#include "gui/iteration/tensor_inspector.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/settings_store.h"

namespace gui {

namespace {

constexpr int kBaseDurationMs = 700;
constexpr int kBaseDwellMs = 450;

}  // namespace

IterationPage::IterationPage(AppContext* context, QWidget* parent) : Page(context, parent) {
  buildUi();
  dwell_.setSingleShot(true);
  connect(&dwell_, &QTimer::timeout, this, &IterationPage::stepForward);
  connect(scene_, &IterationScene::animationFinished, this, &IterationPage::onAnimationFinished);
  connect(ddpScene_, &DdpScene::animationFinished, this, &IterationPage::onAnimationFinished);
  connect(scene_, &IterationScene::chipClicked, this, [this](const ChipView& chip, int device) {
    DeviceBox* box = scene_->deviceBox(device);
    inspector_->showChip(chip, box ? box->view().title : tr("device %1").arg(device));
  });
  connect(ddpScene_, &DdpScene::partClicked, this, &IterationPage::inspectDdpPart);
  connect(context, &AppContext::settingsChanged, this, [this](const AppSettings&) {
    updateCode();
    updateModeButtons();
  });
  connect(context, &AppContext::themeChanged, this, [this](const QString& theme) {
    scene_->setTheme(theme);
    ddpScene_->setTheme(theme);
    code_->setDark(theme == QLatin1String("dark"));
  });
  scene_->setTheme(context->theme());
  ddpScene_->setTheme(context->theme());
  updateCode();
  updateModeButtons();

  if (EngineController* e = engine()) {
    connect(e, &EngineController::settingsApplied, this, &IterationPage::onSettingsApplied);
    connect(e, &EngineController::iterationStarted, this, &IterationPage::onIterationStarted);
    connect(e, &EngineController::stageRecorded, this, &IterationPage::onStageRecorded);
    connect(e, &EngineController::engineError, this, &IterationPage::onEngineError);
    connect(e, &EngineController::busyChanged, this, &IterationPage::updateControls);
    lossStrip_->setLosses(e->losses());
    if (e->hasIteration()) {
      onIterationStarted(e->info());
    } else {
      e->requestPrepare();
    }
  }

  // Keyboard: active while the page is visible.
  // (Help > Keyboard shortcuts lists them with their whatsThis.)
  auto shortcut = [this](QKeySequence key, void (IterationPage::*slot)(), const QString& what) {
    auto* s = new QShortcut(key, this);
    s->setWhatsThis(what);
    connect(s, &QShortcut::activated, this, slot);
  };
  shortcut(QKeySequence(Qt::Key_Space), &IterationPage::togglePlay, tr("play / pause the iteration"));
  shortcut(QKeySequence(Qt::Key_Right), &IterationPage::stepForward, tr("next stage"));
  shortcut(QKeySequence(Qt::Key_Left), &IterationPage::stepBack, tr("previous stage (from the recording)"));
  shortcut(QKeySequence(Qt::Key_Home), &IterationPage::restart, tr("back to the start of the iteration"));
  updateControls();
}

IterationPage::~IterationPage() { dwell_.stop(); }

EngineController* IterationPage::engine() const { return context()->engine(); }

void IterationPage::setSpeed(double factor) {
  durationMs_ = factor > 0 ? static_cast<int>(kBaseDurationMs / factor) : 0;
  scene_->setDuration(durationMs_);
  ddpScene_->setDuration(durationMs_);
  dwell_.setInterval(factor > 0 ? static_cast<int>(kBaseDwellMs / factor) : 0);
  stepper_->showSpeed(factor);
}

bool IterationPage::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Resize && modeBox_ && watched == modeBox_->parentWidget()) {
    const QWidget* card = modeBox_->parentWidget();
    modeBox_->move(card->width() - modeBox_->width() - 8, kModeBoxTop);
  }
  return Page::eventFilter(watched, event);
}

dpv::StrategyKind IterationPage::strategy() const { return context()->settings().strategy; }

bool IterationPage::showingDdp() const { return sceneStack_->currentWidget() == ddpView_; }

void IterationPage::setStrategy(dpv::StrategyKind kind) {
  AppSettings s = context()->settings();
  s.strategy = kind;
  context()->setSettings(s);  // the engine starts afresh in the new mode (settingsApplied, then iterationStarted)
  updateModeButtons();
}

void IterationPage::updateModeButtons() {
  for (int i = 0; i < strategyButtons_.size(); ++i) strategyButtons_[i]->setChecked(kAllStrategies[i] == strategy());
}

void IterationPage::updateCode() {
  const AppSettings& s = context()->settings();
  if (!dpv::runs_ranks(s.strategy)) {
    code_->setCode(tr("Your code"), userCodeLines(s.preset, s.syncBatchNorm, s.batchSize, s.learningRate, s.devices),
                   tr("DataParallel.forward"), dataParallelCodeLines());
    return;
  }
  // The run's own numbers once the engine announced it; until then the device count of the last one.
  const bool known = haveInfo_ && info_.ddp;
  const int ranks = static_cast<int>(info_.deviceLabels.size());
  if (dpv::zero_stage(s.strategy) > 0) {
    code_->setCode(tr("Your %1 code").arg(QString::fromLatin1(dpv::strategy_short_name(s.strategy))),
                   zeroScriptLines(s, ranks > 0 ? ranks : 1, known ? info_.batchRows : s.batchSize),
                   dpv::zero_stage(s.strategy) == 1 ? tr("ZeRO source") : tr("FSDP source"), zeroSourceLines(s.strategy));
    return;
  }
  // Short tab titles: both stay whole in the code panel's width at 1024x640.
  code_->setCode(tr("Your DDP code"),
                 ddpScriptLines(s, ranks > 0 ? ranks : 1, known ? info_.batchRows : s.batchSize,
                                known ? info_.firstBucketBytes : 0),
                 tr("DDP source"), ddpSourceLines());
}

bool IterationPage::atEnd() const {
  return haveInfo_ && cursor_ >= 0 && cursor_ == static_cast<int>(info_.plan.size()) - 1;
}

QString IterationPage::errorText() const { return errorBanner_->isVisible() ? errorBanner_->text() : QString(); }

QString IterationPage::positionText() const { return stepper_->position(); }

void IterationPage::onSettingsApplied() {
  // The learner keeps their place: the new run steps to the stage shown now (onIterationStarted).
  if (haveInfo_ && cursor_ >= 0) {
    resumeStage_ = info_.plan[static_cast<size_t>(cursor_)];
    resumeIndex_ = cursor_;
  }
  clearFailure();
  pause();
  waiting_ = false;
  newIterationWanted_ = false;
  haveInfo_ = false;
  cursor_ = -1;
  errorBanner_->setVisible(false);
  inspector_->clear();
  lossStrip_->setLosses({});  // a new run: the new settings' iterations start again at 1
  if (seekTarget_ >= -1) {  // a pending seek ends here; its caller is not left waiting
    seekTarget_ = -2;
    if (auto done = std::exchange(seekDone_, {})) done();
  }
  if (EngineController* e = engine()) e->requestPrepare();
  updateControls();
}

void IterationPage::onIterationStarted(const IterationInfo& info) {
  info_ = info;
  haveInfo_ = true;
  cursor_ = -1;
  clearFailure();
  scene_->setMemoryScale(1);
  scene_->setInfo(info);
  if (info.ddp) ddpScene_->setInfo(info);
  sceneStack_->setCurrentWidget(info.ddp ? ddpView_ : view_);
  lossStrip_->setMeaning(info.ddp ? LossMeaning::RankZeroShard : LossMeaning::WholeBatch);
  updateCode();
  inspector_->clear();
  rebuildStageStrip();
  showStage(-1, false);
  if (const std::optional<dpv::Stage> resume = std::exchange(resumeStage_, std::nullopt)) seekTo(stageLike(info_.plan, *resume, resumeIndex_));
}

void IterationPage::requestNext() {
  EngineController* e = engine();
  if (!e || waiting_) return;
  waiting_ = true;
  e->requestStage();
  updateControls();
}

void IterationPage::onStageRecorded(const dpv::StageEvent& event) {
  errorBanner_->setVisible(false);
  clearFailure();
  if (event.loss) {
    if (EngineController* e = engine()) lossStrip_->setLosses(e->losses());
  }
  if (!waiting_) {
    // Recorded for someone else (the Timeline page's "Run one iteration"): while the page is out of
    // sight it follows the engine, so it shows the state the engine really has when it comes back.
    if (!isVisible() && seekTarget_ < -1) showStage(event.index, false);
    updateControls();
    return;
  }
  waiting_ = false;
  if (seekTarget_ >= -1) {
    if (event.index >= seekTarget_) {
      showStage(seekTarget_, false);
      seekTarget_ = -2;
      if (auto done = std::exchange(seekDone_, {})) done();
    } else {
      requestNext();
    }
    return;
  }
  showStage(event.index, true);
}

void IterationPage::showStage(int index, bool animate) {
  EngineController* e = engine();
  if (!e || !haveInfo_) return;
  const auto& events = e->events();
  index = std::clamp(index, -1, static_cast<int>(events.size()) - 1);
  cursor_ = index;
  const dpv::StageEvent* event = index >= 0 ? &events[index] : nullptr;
  qint64 scale = 1;
  for (const auto& ev : events) {
    for (const auto& d : ev.devices) scale = std::max<qint64>(scale, d.memory_peak);
  }
  scene_->setMemoryScale(scale);
  if (!event) scene_->setFailure(-1, QString());
  if (info_.ddp) {
    DdpSceneState ddpState = ddpSceneStateFor(info_, event);
    ddpState.memoryScale = scale;
    markFailedRank(ddpState);
    ddpScene_->showState(ddpState, animate);
  } else {
    scene_->setHighlightedRoles({});
    scene_->showState(sceneStateFor(info_, event), animate);
  }
  code_->highlight(event != nullptr, event ? event->stage.kind : dpv::StageKind::Scatter, event ? event->stage.layer : -1);
  lesson_->showStage(info_, event);
  inspector_->clear();
  updateControls();
  emit stageShown(index);
  if (!sceneAnimating()) afterShown();
}

void IterationPage::onAnimationFinished() { afterShown(); }

bool IterationPage::sceneAnimating() const { return scene_->animating() || ddpScene_->animating(); }

void IterationPage::finishSceneAnimations() {
  scene_->finishAnimations();
  ddpScene_->finishAnimations();
}

void IterationPage::afterShown() {
  if (!playing_) return;
  if (atEnd()) {
    pause();
    return;
  }
  dwell_.start();
}

void IterationPage::stepForward() {
  EngineController* e = engine();
  if (!e || !haveInfo_ || waiting_) return;
  finishSceneAnimations();
  if (cursor_ + 1 < static_cast<int>(e->events().size())) {
    showStage(cursor_ + 1, true);
    return;
  }
  // Past the last recorded stage: ask the engine (after the last stage that starts the next iteration).
  newIterationWanted_ = atEnd();
  requestNext();
}

void IterationPage::stepBack() {
  pause();
  finishSceneAnimations();
  if (cursor_ >= 0) showStage(cursor_ - 1, false);
}

void IterationPage::restart() {
  pause();
  finishSceneAnimations();
  showStage(-1, false);
}

void IterationPage::play() {
  if (playing_ || !haveInfo_) return;
  playing_ = true;
  updateControls();
  stepForward();
}

void IterationPage::pause() {
  if (!playing_) return;
  playing_ = false;
  dwell_.stop();
  updateControls();
}

void IterationPage::togglePlay() { playing_ ? pause() : play(); }

void IterationPage::seekTo(int index, std::function<void()> done) {
  pause();
  finishSceneAnimations();
  EngineController* e = engine();
  seekDone_ = std::move(done);
  auto finish = [this] {
    seekTarget_ = -2;
    if (auto d = std::exchange(seekDone_, {})) d();
  };
  if (!e || !haveInfo_) return finish();
  index = std::clamp(index, -1, static_cast<int>(info_.plan.size()) - 1);
  if (index < static_cast<int>(e->events().size())) {
    showStage(index, false);
    return finish();
  }
  seekTarget_ = index;
  if (!waiting_) requestNext();
}

bool IterationPage::inspectChip(int device, dpv::TensorRole role) {
  for (ChipItem* chip : scene_->chipsOn(device)) {
    if (chip->view().role == role) {
      emit chip->clicked(chip);
      return true;
    }
  }
  return false;
}

bool IterationPage::inspectDdpPart(DdpPart part, int rank, int bucket) {
  EngineController* e = engine();
  if (!e || !haveInfo_ || !info_.ddp) return false;
  if (cursor_ < 0) {
    inspector_->showRows(tr("Nothing has run yet: step to a stage, then click a shard, a bucket or a rank's values."), {}, 0);
    return false;
  }
  const DdpInspection d = ddpInspection(info_, e->events(), cursor_, part, rank, bucket);
  const QString after = QString::fromStdString(e->events()[cursor_].stage.title);
  inspector_->setToolTip(tr("Values from the engine's snapshot after %1").arg(after));
  if (d.chip.tensors.isEmpty()) {
    inspector_->showRows(tr("<b>%1</b> on %2: the engine's snapshot after %3 has no values for it yet.")
                             .arg(d.chip.text.toHtmlEscaped(), d.where, after.toHtmlEscaped()), {}, 0);
    return false;
  }
  // Short: the panel is small; the stage's full title is in the tooltip.
  inspector_->showRows(tr("<b>%1</b> · %2 · after %3")
                           .arg(d.chip.text.toHtmlEscaped(), d.where, stageShortTitle(e->events()[cursor_].stage.kind)),
                       d.chip.tensors, d.selectedRow);
  return true;
}

void IterationPage::rebuildStageStrip() {
  qDeleteAll(stagePills_);
  stagePills_.clear();
  pillFirstIndex_.clear();
  while (QLayoutItem* item = stageStripLayout_->takeAt(0)) {
    delete item->widget();
    delete item;
  }
  for (int i = 0; i < static_cast<int>(info_.plan.size()); ++i) {
    const auto kind = info_.plan[static_cast<size_t>(i)].kind;
    if (i > 0 && info_.plan[static_cast<size_t>(i - 1)].kind == kind) continue;  // one pill per run of layers
    if (!stagePills_.isEmpty()) {
      auto* sep = new QLabel(QStringLiteral("›"), stageStrip_);
      sep->setObjectName(QStringLiteral("hintLabel"));
      stageStripLayout_->addWidget(sep);
    }
    auto* pill = new QToolButton(stageStrip_);
    pill->setObjectName(QStringLiteral("stagePill"));
    pill->setCheckable(true);
    pill->setFocusPolicy(Qt::NoFocus);
    pill->setText(stageShortTitle(kind));
    pill->setToolTip(tr("Jump to %1").arg(stageShortTitle(kind)));
    const int first = i;
    connect(pill, &QToolButton::clicked, this, [this, first] { seekTo(first); });
    stageStripLayout_->addWidget(pill);
    stagePills_.append(pill);
    pillFirstIndex_.append(first);
  }
  stageStripLayout_->addStretch(1);
  // The strip as tall as its pills (styled: polished first, so their size is the one drawn).
  if (auto* scroll = stageStrip_->findChild<QScrollArea*>()) {
    int height = 0;
    for (QToolButton* pill : std::as_const(stagePills_)) {
      pill->ensurePolished();
      height = std::max(height, pill->sizeHint().height());
    }
    stageStripLayout_->invalidate();
    scroll->setFixedHeight(std::max(height, stageStripLayout_->sizeHint().height()));
  }
}

void IterationPage::updateControls() {
  EngineController* e = engine();
  const int recorded = e ? static_cast<int>(e->events().size()) : 0;
  const int total = static_cast<int>(info_.plan.size());
  // Pills: the active group is checked; its layer shown for Forward/Backward.
  for (int p = 0; p < stagePills_.size(); ++p) {
    const int first = pillFirstIndex_[p];
    const int next = p + 1 < pillFirstIndex_.size() ? pillFirstIndex_[p + 1] : total;
    const bool active = cursor_ >= first && cursor_ < next;
    const auto kind = info_.plan[static_cast<size_t>(first)].kind;
    QString text = stageShortTitle(kind);
    if (active && next - first > 1) text += QStringLiteral(" %1/%2").arg(cursor_ - first + 1).arg(next - first);
    stagePills_[p]->setText(text);
    stagePills_[p]->setChecked(active);
    stagePills_[p]->setProperty("done", first < recorded);
    stagePills_[p]->style()->unpolish(stagePills_[p]);
    stagePills_[p]->style()->polish(stagePills_[p]);
    if (active)
      if (auto* scroll = stageStrip_->findChild<QScrollArea*>()) scroll->ensureWidgetVisible(stagePills_[p], 24, 0);
  }
  stepper_->setState(playing_, cursor_ >= 0, haveInfo_ && !waiting_, haveInfo_);
  if (!haveInfo_) {
    stepper_->setPosition({e && e->busy() ? tr("preparing the engine…") : tr("no iteration")});
    return;
  }
  QString where = tr("before the first stage");
  QString shortWhere = tr("start");
  QString toolTip;
  if (cursor_ >= 0) {
    const dpv::Stage& stage = info_.plan[static_cast<size_t>(cursor_)];
    QString name = stageShortTitle(stage.kind);
    if (stage.layer >= 0) name += tr(" (layer %1)").arg(stage.layer);
    where = tr("stage %1 of %2").arg(cursor_ + 1).arg(total);  // the stage's name is on the strip above
    shortWhere = tr("%1/%2").arg(cursor_ + 1).arg(total);
    toolTip = tr("%1 — %2").arg(name, QString::fromStdString(stage.title));
  }
  if (waiting_) {
    where += tr(" · running…");
    shortWhere += QStringLiteral(" …");
  }
  stepper_->setPosition({tr("%1 · iteration %2").arg(where).arg(info_.iteration),
                         tr("%1 · iteration %2").arg(shortWhere).arg(info_.iteration),
                         tr("%1 · it. %2").arg(shortWhere).arg(info_.iteration), shortWhere},
                        toolTip);
}

}  // namespace gui
