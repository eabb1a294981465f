#include "gui/iteration/page.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QLabel>
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
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/iteration/loss_strip.h"
#include "gui/iteration/scene.h"
#include "gui/iteration/stepper_bar.h"
#include "gui/iteration/tensor_inspector.h"
#include "gui/runtime/engine_controller.h"

namespace gui {

namespace {

constexpr int kBaseDurationMs = 700;
constexpr int kShotIterations = 8;  // iterations run for the screenshot of the loss strip
constexpr int kBaseDwellMs = 450;
constexpr int kModeBoxTop = 6;  // the DataParallel | DDP switch's distance from the scene card's top

// The chip worth opening in the inspector for a stage (used for screenshots).
dpv::TensorRole roleShownFor(dpv::StageKind kind) {
  switch (kind) {
    case dpv::StageKind::Scatter: return dpv::TensorRole::Input;
    case dpv::StageKind::Replicate: return dpv::TensorRole::Param;
    case dpv::StageKind::Forward: return dpv::TensorRole::Activation;
    case dpv::StageKind::Gather: return dpv::TensorRole::Output;
    case dpv::StageKind::Loss: return dpv::TensorRole::Output;
    case dpv::StageKind::GradScatter:
    case dpv::StageKind::Backward:
    case dpv::StageKind::ReduceGrads:
    case dpv::StageKind::Finalize: return dpv::TensorRole::Grad;
    case dpv::StageKind::Step:
    case dpv::StageKind::Construct:
    case dpv::StageKind::BroadcastBuffers: return dpv::TensorRole::Param;
    case dpv::StageKind::Sample: return dpv::TensorRole::Input;
  }
  return dpv::TensorRole::Input;
}

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

void IterationPage::buildUi() {
  // Top: the stage strip across the page. Below, left: error banner, the scene, the transport
  // controls; right: explanation, code, inspector.
  auto* page = new QVBoxLayout(this);
  page->setContentsMargins(12, 12, 12, 12);
  page->setSpacing(10);
  auto* stripCard = makeCard(this);
  stageStrip_ = stripCard;
  auto* stripRow = new QHBoxLayout(stripCard);
  stripRow->setContentsMargins(10, 5, 10, 5);
  stageStripLayout_ = new QHBoxLayout();  // the pills; rebuilt for every plan
  stageStripLayout_->setSpacing(2);
  stripRow->addLayout(stageStripLayout_, 1);
  page->addWidget(stripCard);
  // The picture and the side panels share the width through a splitter the learner can drag.
  outer_ = new QSplitter(Qt::Horizontal, this);
  outer_->setObjectName(QStringLiteral("iterationSplitter"));
  outer_->setChildrenCollapsible(false);
  outer_->setHandleWidth(8);
  page->addWidget(outer_, 1);

  auto* leftWidget = new QWidget(outer_);
  auto* left = new QVBoxLayout(leftWidget);
  left->setContentsMargins(0, 0, 0, 0);
  left->setSpacing(10);

  errorBanner_ = new QLabel(this);
  errorBanner_->setObjectName(QStringLiteral("errorBanner"));
  errorBanner_->setWordWrap(true);
  errorBanner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  errorBanner_->setVisible(false);
  left->addWidget(errorBanner_);

  scene_ = new IterationScene(this);
  auto* sceneCard = makeCard(this);
  auto* sceneLayout = new QVBoxLayout(sceneCard);
  sceneLayout->setContentsMargins(4, 4, 4, 4);
  sceneStack_ = new QStackedWidget(sceneCard);
  view_ = new SceneView(scene_, sceneStack_);
  ddpScene_ = new DdpScene(this);
  ddpView_ = new SceneView(ddpScene_, sceneStack_);
  sceneStack_->addWidget(view_);
  sceneStack_->addWidget(ddpView_);
  sceneLayout->addWidget(sceneStack_);
  left->addWidget(sceneCard, 1);
  // The mode: the same controls over DataParallel's plan or DistributedDataParallel's. It floats
  // in the scene card's top-right corner (outside any layout), so it never widens the page.
  modeBox_ = new QWidget(sceneCard);
  auto* modeRow = new QHBoxLayout(modeBox_);
  modeRow->setContentsMargins(0, 0, 0, 0);
  modeRow->setSpacing(2);
  auto mode = [this](const QString& text, const QString& tip, bool ddp) {
    auto* b = new QToolButton(modeBox_);
    b->setObjectName(QStringLiteral("stagePill"));
    b->setText(text);
    b->setToolTip(tip);
    b->setCheckable(true);
    b->setFocusPolicy(Qt::NoFocus);
    connect(b, &QToolButton::clicked, this, [this, ddp] { setDdpMode(ddp); });
    return b;
  };
  dpButton_ = mode(tr("DataParallel"), tr("One process: scatter, replicate, gather, reduce on GPU 0"), false);
  ddpButton_ = mode(tr("DDP"),
                    tr("DistributedDataParallel: one process per device, strided shards, buckets all-reduced "
                       "during the backward"), true);
  modeRow->addWidget(dpButton_);
  modeRow->addWidget(ddpButton_);
  modeBox_->adjustSize();
  modeBox_->raise();
  // The scene starts below the switch: a long DDP headline or a wide DataParallel picture would
  // otherwise run under it (the scene is scaled to the card's width, so it reaches the corner).
  sceneLayout->setContentsMargins(4, kModeBoxTop + modeBox_->height() + 2, 4, 4);
  sceneCard->installEventFilter(this);

  // The loss of every iteration so far: the fixed batch's loss falls as the model trains.
  auto* lossCard = makeCard(this);
  auto* lossLayout = new QVBoxLayout(lossCard);
  lossLayout->setContentsMargins(10, 4, 10, 4);
  lossStrip_ = new LossStrip(lossCard);
  lossLayout->addWidget(lossStrip_);
  left->addWidget(lossCard);

  auto* controls = makeCard(this);
  auto* controlsLayout = new QVBoxLayout(controls);
  controlsLayout->setContentsMargins(0, 0, 0, 0);
  stepper_ = new StepperBar(controls);
  controlsLayout->addWidget(stepper_);
  connect(stepper_, &StepperBar::restartClicked, this, &IterationPage::restart);
  connect(stepper_, &StepperBar::backClicked, this, &IterationPage::stepBack);
  connect(stepper_, &StepperBar::playClicked, this, &IterationPage::togglePlay);
  connect(stepper_, &StepperBar::stepClicked, this, &IterationPage::stepForward);
  connect(stepper_, &StepperBar::speedChosen, this, &IterationPage::setSpeed);
  left->addWidget(controls);
  outer_->addWidget(leftWidget);

  // Right: what happens now, the code, the inspector, in a splitter of their own.
  auto* right = new QSplitter(Qt::Vertical, outer_);
  right->setObjectName(QStringLiteral("sidePanels"));
  right->setChildrenCollapsible(false);
  right->setHandleWidth(8);
  right->setMinimumWidth(280);  // with the scene and its controls, fits a 1024-pixel window
  sidePanels_ = right;
  lesson_ = new LessonPanel();
  lesson_->setLessonsDir(context()->lessonsDir());
  right->addWidget(wrapInCard(tr("What happens now"), lesson_, this));
  code_ = new CodeView();
  right->addWidget(wrapInCard(tr("The PyTorch code"), code_, this));
  inspector_ = new TensorInspector();
  right->addWidget(wrapInCard(tr("Tensor inspector"), inspector_, this));
  right->setStretchFactor(0, 4);
  right->setStretchFactor(1, 3);
  right->setStretchFactor(2, 5);
  outer_->addWidget(right);
  // A third of the width on a large screen (the code reads better wide); the learner can drag it.
  outer_->setStretchFactor(0, 2);
  outer_->setStretchFactor(1, 1);
  connect(lesson_, &LessonPanel::chipsHovered, scene_, &IterationScene::setHighlightedRoles);
}

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

bool IterationPage::ddpMode() const { return context()->settings().ddp; }

bool IterationPage::showingDdp() const { return sceneStack_->currentWidget() == ddpView_; }

void IterationPage::setDdpMode(bool ddp) {
  AppSettings s = context()->settings();
  s.ddp = ddp;
  context()->setSettings(s);  // the engine starts afresh in the new mode (settingsApplied, then iterationStarted)
  updateModeButtons();
}

void IterationPage::updateModeButtons() {
  const bool ddp = ddpMode();
  dpButton_->setChecked(!ddp);
  ddpButton_->setChecked(ddp);
}

void IterationPage::updateCode() {
  const AppSettings& s = context()->settings();
  if (!s.ddp) {
    code_->setCode(tr("Your code"), userCodeLines(s.preset, s.syncBatchNorm, s.batchSize, s.learningRate, s.devices),
                   tr("DataParallel.forward"), dataParallelCodeLines());
    return;
  }
  // The run's own numbers once the engine announced it; until then the device count of the last one.
  const bool known = haveInfo_ && info_.ddp;
  const int ranks = static_cast<int>(info_.deviceLabels.size());
  code_->setCode(tr("Your DDP script"),
                 ddpScriptLines(s, ranks > 0 ? ranks : 1, known ? info_.batchRows : s.batchSize,
                                known ? info_.firstBucketBytes : 0),
                 tr("DistributedDataParallel"), ddpSourceLines());
}

bool IterationPage::atEnd() const {
  return haveInfo_ && cursor_ >= 0 && cursor_ == static_cast<int>(info_.plan.size()) - 1;
}

QString IterationPage::errorText() const { return errorBanner_->isVisible() ? errorBanner_->text() : QString(); }

QString IterationPage::positionText() const { return stepper_->position(); }

void IterationPage::onSettingsApplied() {
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
  scene_->setFailure(-1, QString());
  scene_->setMemoryScale(1);
  scene_->setInfo(info);
  if (info.ddp) ddpScene_->setInfo(info);
  sceneStack_->setCurrentWidget(info.ddp ? ddpView_ : view_);
  updateCode();
  inspector_->clear();
  rebuildStageStrip();
  showStage(-1, false);
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
  if (event.loss) {
    if (EngineController* e = engine()) lossStrip_->setLosses(e->losses());
  }
  if (!waiting_) {  // recorded for someone else (e.g. the Timeline page): just show it is available
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

void IterationPage::onEngineError(const QString& message) {
  waiting_ = false;
  pause();
  const EngineFailure failure = engine() ? engine()->lastFailure() : EngineFailure{};
  const bool batchNormSingleValue = failure.reason == dpv::ErrorReason::BatchNormSingleValue;
  QString advice = tr("Change the settings above and step again.");
  if (batchNormSingleValue) {
    // nn.DataParallel has no synchronised BatchNorm (each replica normalises its own chunk), so the
    // only fix inside DataParallel is a batch that gives every device at least 2 samples.
    advice = tr("One device got a chunk of a single sample, and BatchNorm cannot normalise one value per channel "
                "in training. Pick a batch size that leaves at least 2 samples per chunk.");
  }
  // Only errors raised while a stage of the program ran are PyTorch's; the app's own (preparing
  // devices, model or data) are said to be the app's.
  const bool pytorchError = failure.inProgram;
  const QString headline = pytorchError ? tr("The engine stopped with an error (PyTorch raises the same):")
                                        : tr("The app could not prepare this iteration (this error is the app's own, not one PyTorch raises):");
  errorBanner_->setText(QStringLiteral("%1\n%2\n%3").arg(headline, message, advice));
  errorBanner_->setVisible(true);
  if (failure.site.replica >= 0)
    scene_->setFailure(failure.site.replica, batchNormSingleValue ? tr("1 sample: BatchNorm refuses") : tr("this replica failed"));
  showStatus(tr("Engine error: %1").arg(message.section(QLatin1Char('\n'), 0, 0)));
  if (seekTarget_ >= -1) {
    seekTarget_ = -2;
    if (auto done = std::exchange(seekDone_, {})) done();
  }
  updateControls();
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
  if (info_.ddp)
    ddpScene_->showState(ddpSceneStateFor(info_, event), animate);
  else {
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

QList<Page::Shot> IterationPage::screenshots() {
  const QList<dpv::StageKind> kinds = {dpv::StageKind::Scatter, dpv::StageKind::Replicate, dpv::StageKind::Forward,
                                       dpv::StageKind::Gather,  dpv::StageKind::Loss,      dpv::StageKind::Backward,
                                       dpv::StageKind::ReduceGrads, dpv::StageKind::Step};
  // The DDP view first (on mlp-bn, so there are buffers and several buckets); the first DataParallel
  // shot puts the settings back.
  QList<Shot> shots = ddpScreenshots();
  const AppSettings original = context()->settings();
  shots.append(Shot{QStringLiteral("stage-00-start"), [this, original](std::function<void()> done) {
                      if (context()->settings() != original) {
                        applyAndWait(original, [this, done] { seekTo(-1, done); });
                        return;
                      }
                      seekTo(-1, std::move(done));
                    }});
  int n = 1;
  for (dpv::StageKind kind : kinds) {
    const QString suffix = QStringLiteral("stage-%1-%2").arg(n++, 2, 10, QLatin1Char('0')).arg(stageLessonId(kind));
    shots.append(Shot{suffix, [this, kind](std::function<void()> done) {
                        // The stage's first occurrence; for Forward the middle layer (BatchNorm in mlp-bn).
                        QList<int> matches;
                        for (int i = 0; i < static_cast<int>(info_.plan.size()); ++i) {
                          if (info_.plan[static_cast<size_t>(i)].kind == kind) matches.append(i);
                        }
                        if (matches.isEmpty()) return done();
                        const int index = kind == dpv::StageKind::Forward ? matches[matches.size() / 2] : matches.first();
                        seekTo(index, [this, kind, done] {
                          const int last = scene_->deviceCount() - 1;
                          const dpv::TensorRole role = roleShownFor(kind);
                          for (int d = std::max(0, last); d >= 0; --d) {
                            if (inspectChip(d, role)) break;
                          }
                          done();
                        });
                      }});
  }
  // Several iterations on the same batch, so the loss strip shows training.
  shots.append(Shot{QStringLiteral("stage-09-after-iterations"), [this](std::function<void()> done) {
                      EngineController* e = engine();
                      if (!e) return done();
                      auto more = std::make_shared<QMetaObject::Connection>();
                      auto finish = [this, more, done] {
                        disconnect(*more);
                        seekTo(static_cast<int>(info_.plan.size()) - 1, done);
                      };
                      *more = connect(e, &EngineController::iterationCompleted, this, [e, finish] {
                        if (e->losses().size() >= kShotIterations) finish();
                        else e->requestIteration();
                      });
                      connect(e, &EngineController::engineError, this, finish, Qt::SingleShotConnection);
                      if (e->losses().size() >= kShotIterations) finish();
                      else e->requestIteration();
                    }});
  return shots;
}

void IterationPage::applyAndWait(const AppSettings& settings, std::function<void()> done) {
  EngineController* e = engine();
  if (!e || context()->settings() == settings) {
    done();
    return;
  }
  auto conn = std::make_shared<QMetaObject::Connection>();
  auto fail = std::make_shared<QMetaObject::Connection>();
  auto finish = [conn, fail, done] {
    QObject::disconnect(*conn);
    QObject::disconnect(*fail);
    done();
  };
  *conn = connect(e, &EngineController::iterationStarted, this, finish);
  *fail = connect(e, &EngineController::engineError, this, finish);
  context()->setSettings(settings);
}

void IterationPage::seekInIteration(int iteration, std::function<int()> pick, std::function<void()> done) {
  if (!haveInfo_ || !errorText().isEmpty()) return done();
  if (info_.iteration >= iteration) return seekTo(pick(), std::move(done));
  // Run to the end of this iteration, then one step into the next.
  seekTo(static_cast<int>(info_.plan.size()) - 1, [this, iteration, pick, done] {
    EngineController* e = engine();
    if (!e || !atEnd()) return done();
    auto shown = std::make_shared<QMetaObject::Connection>();
    auto fail = std::make_shared<QMetaObject::Connection>();
    auto again = [this, shown, fail, iteration, pick, done](bool ok) {
      QObject::disconnect(*shown);
      QObject::disconnect(*fail);
      if (!ok) return done();
      seekInIteration(iteration, pick, done);
    };
    *shown = connect(this, &IterationPage::stageShown, this, [again](int) { again(true); });
    *fail = connect(e, &EngineController::engineError, this, [again](const QString&) { again(false); });
    stepForward();
  });
}

void IterationPage::freezeNextStage(double fraction, std::function<void()> done) {
  setSpeed(1.0);
  connect(
      this, &IterationPage::stageShown, this,
      [this, fraction, done](int) {
        if (ddpScene_->animating()) ddpScene_->pauseAnimationsAt(static_cast<int>(fraction * ddpScene_->totalAnimationMs()));
        else if (scene_->animating()) scene_->pauseAnimationsAt(static_cast<int>(fraction * scene_->duration()));
        done();
      },
      Qt::SingleShotConnection);
  stepForward();
}

QList<Page::Shot> IterationPage::ddpScreenshots() {
  using K = dpv::StageKind;
  // (iteration, stage kind, which of its layers: 0 first, 1 middle, 2 last);
  // frozen > 0: the stage's flights, stopped at that share of their animation (at 1x).
  struct Flying {
    const char* name;
    int iteration;
    K kind;
    int which;
    double frozen;
  };
  const Flying picks[] = {{"construct", 1, K::Construct, 0, 0},
                          {"sample-flying", 1, K::Sample, 0, 0.45},
                          {"sample", 1, K::Sample, 0, 0},
                          {"forward", 1, K::Forward, 1, 0},
                          {"loss", 1, K::Loss, 0, 0},
                          {"backward-one-bucket", 1, K::Backward, 2, 0},
                          {"finalize", 1, K::Finalize, 0, 0},
                          {"step", 1, K::Step, 0, 0},
                          {"broadcast-buffers-flying", 2, K::BroadcastBuffers, 0, 0.5},
                          {"broadcast-buffers", 2, K::BroadcastBuffers, 0, 0},
                          {"backward-first-ring", 2, K::Backward, 0, 0.7},
                          {"backward-first", 2, K::Backward, 0, 0},
                          {"backward-middle", 2, K::Backward, 1, 0},
                          {"backward-last", 2, K::Backward, 2, 0},
                          {"finalize-averaged-landing", 2, K::Finalize, 0, 0.55},
                          {"finalize-averaged", 2, K::Finalize, 0, 0}};
  QList<Shot> shots;
  shots.append(Shot{QStringLiteral("ddp-00-start"), [this](std::function<void()> done) {
                      AppSettings s = context()->settings();
                      s.ddp = true;
                      s.preset = QStringLiteral("mlp-bn");
                      applyAndWait(s, [this, done] { seekTo(-1, done); });
                    }});
  int n = 1;
  for (const Flying& p : picks) {
    const QString name = QStringLiteral("ddp-%1-%2").arg(n++, 2, 10, QLatin1Char('0')).arg(QLatin1String(p.name));
    shots.append(Shot{name, [this, p](std::function<void()> done) {
                        auto pick = [this, p] {
                          QList<int> matches;
                          for (int i = 0; i < static_cast<int>(info_.plan.size()); ++i)
                            if (info_.plan[static_cast<size_t>(i)].kind == p.kind) matches.append(i);
                          if (matches.isEmpty()) return cursor_;
                          return p.which == 0 ? matches.first() : p.which == 1 ? matches[matches.size() / 2] : matches.last();
                        };
                        if (p.frozen <= 0) {
                          // The inspector opened on what the stage is about (rank 2: it has a padding repeat).
                          return seekInIteration(p.iteration, pick, [this, p, done] {
                            switch (p.kind) {
                              case K::Sample: inspectDdpPart(DdpPart::Shard, 2); break;
                              case K::BroadcastBuffers: inspectDdpPart(DdpPart::Buffers, 2); break;
                              case K::Backward: inspectDdpPart(DdpPart::Bucket, 2, 0); break;
                              case K::Finalize: inspectDdpPart(DdpPart::Grad, 2); break;
                              case K::Step:
                              case K::Construct: inspectDdpPart(DdpPart::Params, 2); break;
                              default: break;
                            }
                            done();
                          });
                        }
                        // The stage before, then this one animated and frozen mid-flight.
                        seekInIteration(p.iteration, [pick] { return std::max(0, pick() - 1); },
                                        [this, p, done] { freezeNextStage(p.frozen, done); });
                      }});
  }
  return shots;
}

}  // namespace gui
