#include "gui/quiz/option_button.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QStyle>

namespace gui {

QuizOptionButton::QuizOptionButton(const QString& label, const QString& text, QWidget* parent)
    : QPushButton(parent), label_(label), text_(new QLabel(this)) {
  setObjectName(QStringLiteral("quizOption"));
  setProperty("optionLabel", label);
  setAutoDefault(false);
  setCursor(Qt::PointingHandCursor);
  text_->setText(QStringLiteral("<b>%1.</b>&nbsp;&nbsp;%2").arg(label, text.toHtmlEscaped()));
  text_->setTextFormat(Qt::RichText);
  text_->setWordWrap(true);
  text_->setAttribute(Qt::WA_TransparentForMouseEvents);  // clicks reach the button
  auto* layout = new QHBoxLayout(this);
  const int pad = fontMetrics().height() / 2;
  layout->setContentsMargins(pad, pad / 2 + 2, pad, pad / 2 + 2);
  layout->addWidget(text_);
  QSizePolicy policy(QSizePolicy::Expanding, QSizePolicy::Preferred);
  policy.setHeightForWidth(true);
  setSizePolicy(policy);
  setAccessibleName(label + QStringLiteral(". ") + text);
  setState(State::Plain);
}

QString QuizOptionButton::optionText() const { return text_->text(); }

int QuizOptionButton::heightForWidth(int width) const {
  const QMargins m = layout()->contentsMargins();
  return text_->heightForWidth(width - m.left() - m.right()) + m.top() + m.bottom();
}

QSize QuizOptionButton::sizeHint() const {
  const QSize hint = layout()->sizeHint();
  const int width = qMax(hint.width(), fontMetrics().averageCharWidth() * 30);
  return {width, heightForWidth(width)};
}

QSize QuizOptionButton::minimumSizeHint() const {
  const int width = fontMetrics().averageCharWidth() * 16;
  return {width, heightForWidth(width)};
}

void QuizOptionButton::setState(State state) {
  state_ = state;
  setProperty("answerState", static_cast<int>(state));
  // Palette roles for the plain state and translucent mid-tones for the verdicts, so the button
  // reads well in light and dark themes alike; the text keeps the palette's colour.
  const QString base = QStringLiteral("QPushButton#quizOption { text-align: left; border-radius: 6px; %1 }"
                                      "QPushButton#quizOption:hover { border-color: palette(highlight); }");
  switch (state) {
    case State::Plain:
      setStyleSheet(base.arg(QStringLiteral("background-color: palette(button); border: 1px solid palette(mid);")));
      break;
    case State::Selected:
      setStyleSheet(base.arg(QStringLiteral("background-color: palette(button); border: 2px solid palette(highlight);")));
      break;
    case State::Correct:
      setStyleSheet(base.arg(QStringLiteral("background-color: rgba(46, 160, 67, 0.28); border: 2px solid rgba(46, 160, 67, 0.95);")));
      break;
    case State::Wrong:
      setStyleSheet(base.arg(QStringLiteral("background-color: rgba(218, 54, 51, 0.25); border: 2px solid rgba(218, 54, 51, 0.95);")));
      break;
    case State::Dimmed:
      setStyleSheet(base.arg(QStringLiteral("background-color: transparent; border: 1px solid palette(mid);")));
      break;
  }
  text_->setEnabled(state != State::Dimmed);
}

}  // namespace gui
