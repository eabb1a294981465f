// The Iteration page's widgets: the stage strip, the picture (the DataParallel and DDP scenes with
// the mode switch), the loss strip and the transport controls, and the side panels.
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollArea>
#include <QSplitter>
#include <QStackedWidget>
#include <QToolButton>
#include <QVBoxLayout>

#include "gui/common/ui_helpers.h"
#include "gui/ddp/scene.h"
#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/iteration/loss_strip.h"
#include "gui/iteration/page.h"
#include "gui/iteration/scene.h"
#include "gui/iteration/stepper_bar.h"
#include "gui/iteration/tensor_inspector.h"
#include "gui/runtime/settings_store.h"

namespace gui {

namespace {

// What each strategy does, after its PyTorch class (dpv::strategy_name).
QString strategyToolTip(dpv::StrategyKind kind) {
  const QString name = QString::fromLatin1(dpv::strategy_name(kind));
  switch (kind) {
    case dpv::StrategyKind::DataParallel:
      return QObject::tr("%1: one process; scatter, replicate, gather, reduce on GPU 0").arg(name);
    case dpv::StrategyKind::DistributedDataParallel:
      return QObject::tr("%1: one process per device, strided shards, buckets all-reduced during the backward").arg(name);
    case dpv::StrategyKind::Zero1:
      return QObject::tr("%1 over DDP (ZeRO-1): each rank keeps and steps the optimizer state of its own "
                         "parameters, then broadcasts them to the others").arg(name);
    case dpv::StrategyKind::Zero2:
      return QObject::tr("%1 (ZeRO-2): one flat parameter cut into a slice per rank; gradients reduce-scattered, "
                         "each rank steps only its slice").arg(name);
    case dpv::StrategyKind::Zero3:
      return QObject::tr("%1 (ZeRO-3): as ZeRO-2, and the full parameters are gathered only for the forward and "
                         "the backward, freed after each").arg(name);
  }
  return name;
}

}  // namespace

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
  // The pills, rebuilt for every plan, in a strip that never widens the page: a plan longer than
  // the window (ZeRO-3's gathers, frees and reduce-scatter at 1024 px) scrolls so the current
  // stage's pill is in sight (updateControls).
  auto* stripScroll = new QScrollArea(stripCard);
  stripScroll->setObjectName(QStringLiteral("stageStripScroll"));
  stripScroll->setFrameShape(QFrame::NoFrame);
  stripScroll->setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  stripScroll->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  stripScroll->setWidgetResizable(true);
  stripScroll->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  stripScroll->setStyleSheet(QStringLiteral("QScrollArea, QScrollArea > QWidget > QWidget { background: transparent; }"));
  auto* pills = new QWidget();
  stageStripLayout_ = new QHBoxLayout(pills);
  stageStripLayout_->setContentsMargins(0, 0, 0, 0);
  stageStripLayout_->setSpacing(2);
  stripScroll->setWidget(pills);
  stripRow->addWidget(stripScroll, 1);
  page->addWidget(stripCard);
  // The picture and the side panels share the width through a splitter the learner can drag.
  outer_ = new QSplitter(Qt::Horizontal, this);
  outer_->setObjectName(QStringLiteral("iterationSplitter"));
  outer_->setChildrenCollapsible(false);
  outer_->setHandleWidth(8);
  page->addWidget(outer_, 1);
  outer_->addWidget(buildPicturePanel());
  outer_->addWidget(buildSidePanels());
  // A third of the width on a large screen (the code reads better wide); the learner can drag it.
  outer_->setStretchFactor(0, 2);
  outer_->setStretchFactor(1, 1);
  connect(lesson_, &LessonPanel::chipsHovered, scene_, &IterationScene::setHighlightedRoles);
}

QWidget* IterationPage::buildPicturePanel() {
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
  left->addWidget(buildSceneCard(), 1);

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
  return leftWidget;
}

QWidget* IterationPage::buildSceneCard() {
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
  // The mode: the same controls over DataParallel's plan or DistributedDataParallel's. It floats
  // in the scene card's top-right corner (outside any layout), so it never widens the page.
  modeBox_ = new QWidget(sceneCard);
  auto* modeRow = new QHBoxLayout(modeBox_);
  modeRow->setContentsMargins(0, 0, 0, 0);
  modeRow->setSpacing(2);
  // One pill per strategy, named as the CLI names it, the PyTorch class in the tooltip.
  for (dpv::StrategyKind kind : kAllStrategies) {
    auto* b = new QToolButton(modeBox_);
    b->setObjectName(QStringLiteral("stagePill"));
    b->setText(kind == dpv::StrategyKind::DataParallel ? tr("DataParallel") : QString::fromLatin1(dpv::strategy_short_name(kind)));
    b->setToolTip(strategyToolTip(kind));
    b->setCheckable(true);
    b->setFocusPolicy(Qt::NoFocus);
    connect(b, &QToolButton::clicked, this, [this, kind] { setStrategy(kind); });
    modeRow->addWidget(b);
    strategyButtons_.append(b);
  }
  modeBox_->adjustSize();
  modeBox_->raise();
  // The scene starts below the switch: a long DDP headline or a wide DataParallel picture would
  // otherwise run under it (the scene is scaled to the card's width, so it reaches the corner).
  sceneLayout->setContentsMargins(4, kModeBoxTop + modeBox_->height() + 2, 4, 4);
  sceneCard->installEventFilter(this);
  return sceneCard;
}

QWidget* IterationPage::buildSidePanels() {
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
  return right;
}

}  // namespace gui
