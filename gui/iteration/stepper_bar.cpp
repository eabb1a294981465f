#include "gui/iteration/stepper_bar.h"

#include <QEvent>
#include <QHBoxLayout>
#include <QIcon>
#include <QLabel>
#include <QSlider>
#include <QToolButton>

namespace gui {

namespace {
const double kSpeeds[] = {0.25, 0.5, 1.0, 2.0, 4.0};
}  // namespace

StepperBar::StepperBar(QWidget* parent) : QWidget(parent) {
  auto* row = new QHBoxLayout(this);
  row->setContentsMargins(10, 6, 10, 6);
  auto button = [this](const QString& icon, const QString& text, const QString& tip) {
    auto* b = new QToolButton(this);
    b->setIcon(QIcon(icon));
    b->setText(text);
    b->setToolTip(tip);
    b->setToolButtonStyle(Qt::ToolButtonTextBesideIcon);
    b->setAutoRaise(true);
    b->setFocusPolicy(Qt::NoFocus);  // Space belongs to play/pause, not to the focused button
    return b;
  };
  restartButton_ = button(QStringLiteral(":/icons/restart.svg"), tr("Restart"), tr("Back to the start of this iteration (Home)"));
  backButton_ = button(QStringLiteral(":/icons/step-back.svg"), tr("Back"), tr("Show the previous stage again (←)"));
  playButton_ = button(QStringLiteral(":/icons/play.svg"), tr("Play"), tr("Play the iteration (Space)"));
  stepButton_ = button(QStringLiteral(":/icons/step.svg"), tr("Step"), tr("Run the next stage (→)"));
  connect(restartButton_, &QToolButton::clicked, this, &StepperBar::restartClicked);
  connect(backButton_, &QToolButton::clicked, this, &StepperBar::backClicked);
  connect(playButton_, &QToolButton::clicked, this, &StepperBar::playClicked);
  connect(stepButton_, &QToolButton::clicked, this, &StepperBar::stepClicked);
  for (auto* b : {restartButton_, backButton_, playButton_, stepButton_}) row->addWidget(b);
  row->addSpacing(6);
  auto* speedTitle = new QLabel(tr("Speed"), this);
  speed_ = new QSlider(Qt::Horizontal, this);
  speed_->setRange(0, 4);
  speed_->setValue(2);
  speed_->setPageStep(1);
  speed_->setFixedWidth(64);  // five notches; narrow enough for the row at 1024x640
  speed_->setFocusPolicy(Qt::NoFocus);
  speedLabel_ = new QLabel(QStringLiteral("1×"), this);
  speedLabel_->setMinimumWidth(speedLabel_->fontMetrics().horizontalAdvance(tr("instant")) + 4);  // its longest form
  connect(speed_, &QSlider::valueChanged, this, [this](int v) { emit speedChosen(kSpeeds[qBound(0, v, 4)]); });
  row->addWidget(speedTitle);
  row->addWidget(speed_);
  row->addWidget(speedLabel_);
  position_ = new QLabel(this);
  position_->setObjectName(QStringLiteral("hintLabel"));
  position_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);  // long stage titles must not widen the window
  position_->setAlignment(Qt::AlignRight | Qt::AlignVCenter);
  // Room for the shortest form ("11/21") at least: never cut to "1/2".
  position_->setMinimumWidth(position_->fontMetrics().horizontalAdvance(QStringLiteral("88/88")) + 6);
  row->addWidget(position_, 1);
  position_->installEventFilter(this);  // a shorter form of the position when the row is narrow
}

void StepperBar::setState(bool playing, bool canGoBack, bool canStep, bool canPlay) {
  playButton_->setIcon(QIcon(playing ? QStringLiteral(":/icons/pause.svg") : QStringLiteral(":/icons/play.svg")));
  playButton_->setText(playing ? tr("Pause") : tr("Play"));
  backButton_->setEnabled(canGoBack);
  restartButton_->setEnabled(canGoBack);
  stepButton_->setEnabled(canStep);
  playButton_->setEnabled(canPlay);
}

void StepperBar::showSpeed(double factor) {
  speedLabel_->setText(factor > 0 ? QStringLiteral("%1×").arg(factor) : tr("instant"));
}

void StepperBar::setPosition(const QStringList& forms, const QString& toolTip) {
  positionForms_ = forms;
  position_->setToolTip(toolTip);
  fitPosition();
}

bool StepperBar::eventFilter(QObject* watched, QEvent* event) {
  if (event->type() == QEvent::Resize && watched == position_) fitPosition();
  return QWidget::eventFilter(watched, event);
}

// The longest form of the position that fits the label (at 1024x640 the stepper row leaves it
// about 70 px): "stage 3 of 9 · iteration 1", then "3/9 · iteration 1", "3/9 · it. 1", "3/9".
void StepperBar::fitPosition() {
  const QFontMetrics metrics(position_->font());
  QString shown = positionForms_.value(positionForms_.size() - 1);
  for (const QString& form : positionForms_) {
    if (metrics.horizontalAdvance(form) <= position_->width()) {
      shown = form;
      break;
    }
  }
  position_->setText(shown);
}

}  // namespace gui
