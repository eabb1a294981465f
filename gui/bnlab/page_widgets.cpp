// The BatchNorm lab page's widgets: the controls, the charts' toolbar, the side panel with the
// callout and the lesson text, their styling, and what they show of the state the worker reported
// (the callout, the status line, the buttons). page.cpp holds what the page does.
#include <QCheckBox>
#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFrame>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTextBlock>
#include <QTextBrowser>
#include <QTextCursor>
#include <QTextDocument>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

#include "course/bnlab_session.h"
#include "course/lessons.h"
#include "course/run_caption.h"
#include "engine/error.h"
#include "gui/common/flow_layout.h"
#include "gui/bnlab/callout.h"
#include "gui/common/chart_style.h"
#include "gui/bnlab/charts.h"
#include "gui/bnlab/page.h"

namespace gui {

namespace {

struct Speed {
  const char* label;
  int stepsPerSecond;  // 0: as fast as the devices go
};
constexpr Speed kSpeeds[] = {{"2 steps/s", 2}, {"10 steps/s", 10}, {"50 steps/s", 50}, {"200 steps/s", 200},
                             {"as fast as possible", 0}};
constexpr int kDefaultSpeed = 2;

QLabel* caption(const QString& text, QWidget* buddy, QWidget* parent) {
  auto* label = new QLabel(text, parent);
  label->setBuddy(buddy);
  return label;
}

}  // namespace

QWidget* BatchNormLabPage::buildControls() {
  // The controls flow into as many rows as the width needs (two on a wide window, three or four
  // at 1024x640): the page never scrolls sideways. Each caption stays with its control.
  auto* box = new QWidget(this);
  box->setObjectName(QStringLiteral("labControls"));
  auto* flow = new FlowLayout(box, 14, 4);
  auto group = [box, flow](std::initializer_list<QWidget*> widgets) {
    auto* g = new QWidget(box);
    auto* row = new QHBoxLayout(g);
    row->setContentsMargins(0, 0, 0, 0);
    row->setSpacing(6);
    for (QWidget* w : widgets) {
      w->setParent(g);
      row->addWidget(w);
    }
    flow->addWidget(g);
  };

  startButton_ = new QPushButton(tr("Start"), box);
  startButton_->setToolTip(tr("Train all three models (Space)"));
  startButton_->setShortcut(QKeySequence(Qt::Key_Space));
  pauseButton_ = new QPushButton(tr("Pause"), box);
  stepButton_ = new QPushButton(tr("One step"), box);
  stepButton_->setToolTip(tr("Train one step of all three models"));
  resetButton_ = new QPushButton(tr("Reset"), box);
  resetButton_->setToolTip(tr("Back to the initial weights (same seed); the charts start again"));
  connect(startButton_, &QPushButton::clicked, this, &BatchNormLabPage::start);
  connect(pauseButton_, &QPushButton::clicked, this, &BatchNormLabPage::pause);
  connect(stepButton_, &QPushButton::clicked, this, &BatchNormLabPage::stepOnce);
  connect(resetButton_, &QPushButton::clicked, this, &BatchNormLabPage::reset);

  speedBox_ = new QComboBox(box);
  for (const Speed& s : kSpeeds) speedBox_->addItem(tr(s.label), s.stepsPerSecond);
  speedBox_->setCurrentIndex(kDefaultSpeed);
  connect(speedBox_, &QComboBox::currentIndexChanged, this,
          [this](int) { emit stepsPerSecondRequested(speedBox_->currentData().toInt()); });
  limitSpin_ = new QSpinBox(box);
  limitSpin_->setRange(1, 10000);  // about 4 KB of chart data per step
  limitSpin_->setValue(static_cast<int>(stepLimit_));
  limitSpin_->setSuffix(tr(" steps"));
  limitSpin_->setToolTip(tr("Training pauses after this many steps"));
  connect(limitSpin_, &QSpinBox::valueChanged, this, [this](int v) { setStepLimit(v); });

  sortedBox_ = new QCheckBox(tr("Class-sorted batches"), box);
  sortedBox_->setChecked(true);
  sortedBox_->setToolTip(tr("Sort every batch by class, so each device's chunk holds other classes (skewed chunks)"));

  group({startButton_, pauseButton_, stepButton_, resetButton_});
  group({caption(tr("Speed"), speedBox_, box), speedBox_});
  group({caption(tr("Stop after"), limitSpin_, box), limitSpin_});
  group({sortedBox_});

  devicesSpin_ = new QSpinBox(box);
  devicesSpin_->setRange(1, 16);
  devicesSpin_->setToolTip(tr("Devices of the two DataParallel models (the reference always uses one)"));
  devicesKind_ = new QLabel(box);
  batchSpin_ = new QSpinBox(box);
  batchSpin_->setRange(1, 1024);
  batchSpin_->setToolTip(tr("Rows per training step; each device gets a torch.chunk of them. Changed while the lab "
                            "trains, the next step uses it: no restart"));
  lrSpin_ = new QDoubleSpinBox(box);
  lrSpin_->setDecimals(4);
  lrSpin_->setRange(0.0001, 10.0);
  lrSpin_->setSingleStep(0.01);
  lrSpin_->setToolTip(tr("torch.optim.SGD's learning rate. Changed while the lab trains, the next step of every "
                         "model uses it (as setting param_groups' lr does): no restart"));
  sgdMomentumSpin_ = new QDoubleSpinBox(box);
  sgdMomentumSpin_->setRange(0.0, 0.99);
  sgdMomentumSpin_->setSingleStep(0.1);
  sgdMomentumSpin_->setToolTip(tr("torch.optim.SGD momentum"));
  bnMomentumSpin_ = new QDoubleSpinBox(box);
  bnMomentumSpin_->setDecimals(3);
  bnMomentumSpin_->setRange(0.001, 1.0);
  bnMomentumSpin_->setSingleStep(0.05);
  bnMomentumSpin_->setValue(0.1);
  bnMomentumSpin_->setToolTip(tr("BatchNorm momentum: how much of each batch's statistic enters the running one"));

  group({caption(tr("Devices"), devicesSpin_, box), devicesSpin_, devicesKind_});
  group({caption(tr("Batch"), batchSpin_, box), batchSpin_});
  group({caption(tr("Learning rate"), lrSpin_, box), lrSpin_});
  group({caption(tr("SGD momentum"), sgdMomentumSpin_, box), sgdMomentumSpin_});
  group({caption(tr("BN momentum"), bnMomentumSpin_, box), bnMomentumSpin_});
  auto* liveHint = new QLabel(tr("A new batch or learning rate applies at the next step, without a restart; other settings start the lab "
                            "again."), box);
  liveHint->setObjectName(QStringLiteral("hintLabel"));
  group({liveHint});

  // The batch and the learning rate are taken while the lab trains: the next step of every model
  // draws the new batch and steps with the new rate.
  // Any other change of what is trained starts the lab again (the models must share every step).
  connect(devicesSpin_, &QSpinBox::valueChanged, this, &BatchNormLabPage::scheduleReset);
  connect(batchSpin_, &QSpinBox::valueChanged, this, &BatchNormLabPage::onBatchChanged);
  connect(lrSpin_, &QDoubleSpinBox::valueChanged, this, &BatchNormLabPage::onLearningRateChanged);
  connect(sgdMomentumSpin_, &QDoubleSpinBox::valueChanged, this, &BatchNormLabPage::scheduleReset);
  connect(bnMomentumSpin_, &QDoubleSpinBox::valueChanged, this, &BatchNormLabPage::scheduleReset);
  connect(sortedBox_, &QCheckBox::toggled, this, &BatchNormLabPage::scheduleReset);
  return box;
}

QWidget* BatchNormLabPage::buildChartToolbar() {
  auto* bar = new QWidget(this);
  auto* column = new QVBoxLayout(bar);
  column->setContentsMargins(0, 0, 0, 0);
  column->setSpacing(2);
  auto* row = new QHBoxLayout();
  layerBox_ = new QComboBox(bar);
  const dpv::ModelSpec spec = dpv::course::bnlab_model_spec(0.1);
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const auto& l = spec.layers[i];
    if (!dpv::is_batchnorm(l.kind)) continue;
    const QString type = l.kind == dpv::LayerKind::BatchNorm1d ? QStringLiteral("BatchNorm1d") : QStringLiteral("BatchNorm2d");
    layerBox_->addItem(tr("layer %1: %2(%3)").arg(i).arg(type).arg(l.num_features),
                       QVariant::fromValue(static_cast<int>(l.num_features)));
  }
  channelSpin_ = new QSpinBox(bar);
  channelSpin_->setPrefix(tr("channel "));
  connect(layerBox_, &QComboBox::currentIndexChanged, this, &BatchNormLabPage::updateSelection);
  connect(channelSpin_, &QSpinBox::valueChanged, this, &BatchNormLabPage::updateSelection);
  auto* savePng = new QPushButton(tr("Save PNG…"), bar);
  savePng->setToolTip(tr("Save every chart as a PNG image into a folder"));
  auto* saveCsv = new QPushButton(tr("Save CSV…"), bar);
  saveCsv->setToolTip(tr("Save the data of every chart as CSV into a folder"));
  connect(savePng, &QPushButton::clicked, this, [this] { chooseFolderAndSave(true, false); });
  connect(saveCsv, &QPushButton::clicked, this, [this] { chooseFolderAndSave(false, true); });
  // The status line and whose run this is get lines of their own under the controls and wrap,
  // so nothing is cut off at 1024 pixels; the losses are in the status line's tooltip.
  statusLabel_ = new QLabel(bar);
  statusLabel_->setWordWrap(true);
  statusLabel_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Minimum);
  statusLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  runCaption_ = new QLabel(bar);
  runCaption_->setObjectName(QStringLiteral("hintLabel"));
  runCaption_->setWordWrap(true);
  runCaption_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Minimum);
  runCaption_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  auto* layerCaption = caption(tr("Layer"), layerBox_, bar);
  layerCaption->setToolTip(tr("The BatchNorm layer and channel the statistics charts show"));
  row->addWidget(layerCaption);
  row->addWidget(layerBox_);
  row->addWidget(channelSpin_);
  row->addStretch(1);
  row->addWidget(savePng);
  row->addWidget(saveCsv);
  column->addLayout(row);
  column->addWidget(statusLabel_);
  column->addWidget(runCaption_);
  updateSelection();
  return bar;
}

QWidget* BatchNormLabPage::buildSidePanel() {
  auto* panel = new QWidget(this);
  auto* column = new QVBoxLayout(panel);
  column->setContentsMargins(0, 0, 0, 0);
  callout_ = new QFrame(panel);
  callout_->setObjectName(QStringLiteral("bnlabCallout"));
  callout_->setFrameShape(QFrame::StyledPanel);
  auto* calloutLayout = new QVBoxLayout(callout_);
  calloutLabel_ = new QLabel(callout_);
  calloutLabel_->setWordWrap(true);
  calloutLabel_->setTextFormat(Qt::RichText);
  calloutLabel_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  calloutLayout->addWidget(calloutLabel_);
  callout_->hide();
  explanation_ = new QTextBrowser(panel);
  explanation_->setOpenExternalLinks(true);
  explanation_->setMinimumWidth(220);  // with the charts' toolbar, fits a 1024-pixel window
  column->addWidget(callout_);
  column->addWidget(explanation_, 1);
  return panel;
}

void BatchNormLabPage::loadExplanation() {
  const QString dir = context() ? context()->lessonsDir() : QString();
  try {
    explanation_->setMarkdown(QString::fromStdString(dpv::course::load_lesson(dir.toStdString(), "batchnorm-lab")));
    shrinkHeadings();
  } catch (const dpv::Error& e) {
    // Visible, not silent: the charts still work without the text.
    explanation_->setHtml(tr("<h3>Explanation missing</h3><p>The text beside these charts could not be read:</p>"
                             "<p><code>%1</code></p><p>Set DPVIZ_LESSONS to the lessons/ folder of dpviz.</p>")
                              .arg(QString::fromStdString(e.what()).toHtmlEscaped()));
  }
}

void BatchNormLabPage::shrinkHeadings() {
  // Markdown headings come out at xx-large sizes (a size adjustment on their characters); in a
  // side panel one step up for the title and bold body size for the rest read better.
  QTextDocument* doc = explanation_->document();
  for (QTextBlock block = doc->begin(); block.isValid(); block = block.next()) {
    const int level = block.blockFormat().headingLevel();
    if (level <= 0) continue;
    QTextCursor cursor(block);
    cursor.movePosition(QTextCursor::EndOfBlock, QTextCursor::KeepAnchor);
    QTextCharFormat format;
    format.setProperty(QTextFormat::FontSizeAdjustment, level == 1 ? 1 : 0);
    format.setFontWeight(QFont::Bold);
    cursor.mergeCharFormat(format);
  }
}

void BatchNormLabPage::styleCallout() {
  // A warm tint of the palette's own base colour, so it reads as a warning in light and dark themes.
  const BnLabChartColours colours = bnlab_chart_colours(palette());
  const QColor base = palette().color(QPalette::Base);
  const QColor accent = colours.perDevice;
  const QColor tint = QColor::fromRgbF(base.redF() * 0.82 + accent.redF() * 0.18,
                                       base.greenF() * 0.82 + accent.greenF() * 0.18,
                                       base.blueF() * 0.82 + accent.blueF() * 0.18);
  callout_->setStyleSheet(QStringLiteral("#bnlabCallout { background: %1; border: 2px solid %2; border-radius: 6px; }"
                                         "#bnlabCallout QLabel { color: %3; background: transparent; }")
                              .arg(tint.name(), accent.name(), palette().color(QPalette::Text).name()));
}

void BatchNormLabPage::showEvent(QShowEvent* event) {
  Page::showEvent(event);
  if (splitterSized_) return;
  // About a quarter of the width for the explanation, at any window size; the learner can move it.
  splitterSized_ = true;
  const int total = splitter_->width();
  const int side = std::clamp(total * 27 / 100, 260, 520);
  splitter_->setSizes({total - side, side});
}

void BatchNormLabPage::changeEvent(QEvent* event) {
  Page::changeEvent(event);
  if (event->type() == QEvent::PaletteChange && callout_) styleCallout();
}

double BatchNormLabPage::recentLoss(int model) const {
  double sum = 0;
  int n = 0;
  for (const auto& losses : recentLosses_) {
    const double v = losses[static_cast<size_t>(model)];
    if (!std::isfinite(v)) return v;  // stopped
    sum += v;
    ++n;
  }
  return n ? sum / n : std::numeric_limits<double>::quiet_NaN();
}

void BatchNormLabPage::updateCallout() {
  BnLabCalloutInput in;
  in.batchSize = batchSpin_->value();
  in.devices = deviceCountFromSpec();
  in.probeModel = probeModel_;
  in.probeError = probeError_;
  if (failureModel_ == QLatin1String("setup")) {
    in.setupError = failure_;
  } else if (!failure_.isEmpty()) {
    in.failureModel = failureModel_;
    in.failure = failure_;
  } else if (!stoppedModel_.isEmpty()) {
    in.failureModel = stoppedModel_;
    in.failure = stoppedError_;
    in.failureStep = stoppedStep_;
    in.othersTrain = true;
  }
  if (const BnLabStep* last = charts_->latestStep()) {
    in.steps = last->step;
    in.classSorted = sortedBox_->isChecked();
    in.firstLossPerDevice = firstLosses_[BnLabPerDevice];
    in.lossPerDevice = recentLoss(BnLabPerDevice);
    in.lossSync = recentLoss(BnLabSync);
    in.lossReference = recentLoss(BnLabReference);
    in.ddpPadding = last->ddpPadding;
    in.ddpBatchRows = last->batchRows;
    for (int64_t n : last->shards) in.ddpShards << n;
    in.ddpSyncDistance = last->models[BnLabDdpSync].paramDistance;
    in.dpSyncDistance = last->models[BnLabSync].paramDistance;
  }
  const QString html = bnlab_callout_html(in);
  calloutLabel_->setText(html);
  callout_->setVisible(!html.isEmpty());
}

QString BatchNormLabPage::calloutText() const { return calloutLabel_->text(); }
bool BatchNormLabPage::calloutVisible() const { return !callout_->isHidden(); }
QString BatchNormLabPage::explanationText() const { return explanation_->toPlainText(); }
QString BatchNormLabPage::statusText() const { return statusLabel_->text(); }
QString BatchNormLabPage::runCaption() const { return runCaption_->text(); }

void BatchNormLabPage::updateButtons() {
  const bool canTrain = configured_ && !hasFailed() && charts_->stepCount() < stepLimit_;
  startButton_->setEnabled(canTrain && !running_);
  pauseButton_->setEnabled(running_);
  stepButton_->setEnabled(canTrain && !running_);
}

void BatchNormLabPage::updateStatus() {
  const BnLabStep* last = charts_->latestStep();
  QString text, losses;
  if (!configured_ && !hasFailed()) text = tr("Preparing the devices: the lab is ready in a moment.");
  else if (!last) text = tr("Ready: %1 device(s), batch %2. Press Start.").arg(deviceCountFromSpec()).arg(batchSpin_->value());
  else {
    QStringList sizes, shards;
    for (int64_t c : last->chunks) sizes << QString::number(c);
    for (int64_t c : last->shards) shards << QString::number(c);
    // The line beside the layer controls holds the step and DataParallel's chunks; DDP's shards
    // and the five models' losses (also in the loss chart) are in its tooltip: on the line they
    // were cut off at any window width.
    text = tr("Step %1 of %2 · batch %3 · chunks %4")
               .arg(last->step)
               .arg(stepLimit_)
               .arg(last->batchRows)
               .arg(sizes.join(QStringLiteral(", ")));
    losses = tr("DDP shards %1. Loss at step %2: per-device %3, SyncBN %4, reference %5; DDP per-rank %6, DDP SyncBN %7")
                 .arg(shards.join(QStringLiteral(", ")))
                 .arg(last->step)
                 .arg(last->models[BnLabPerDevice].loss, 0, 'f', 3)
                 .arg(last->models[BnLabSync].loss, 0, 'f', 3)
                 .arg(last->models[BnLabReference].loss, 0, 'f', 3)
                 .arg(last->models[BnLabDdpPerRank].loss, 0, 'f', 3)
                 .arg(last->models[BnLabDdpSync].loss, 0, 'f', 3);
  }
  if (running_) text = tr("Training · ") + text;
  statusLabel_->setText(text);
  runCaption_->setText(tr("Data: %1").arg(QString::fromStdString(dpv::course::run_caption(
      dpv::course::bnlab_run_spec(config(), dpv::course::BnLabDdpSync), 0,
      "DataParallel and DDP, each with per-device BatchNorm and SyncBatchNorm, against one device"))));
  statusLabel_->setToolTip(losses.isEmpty() ? text : text + QStringLiteral("\n") + losses);
}

}  // namespace gui
