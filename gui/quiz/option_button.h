#pragma once
// An answer option of the quiz: a push button whose text word-wraps (QPushButton's own text does
// not), with a state that tints it after answering. Tints are translucent mid-tones drawn over the
// palette's button colour, so they read well in light and dark themes.
#include <QPushButton>

class QLabel;

namespace gui {

class QuizOptionButton : public QPushButton {
  Q_OBJECT
 public:
  enum class State { Plain, Selected, Correct, Wrong, Dimmed };  // Selected: chosen, not yet checked
  QuizOptionButton(const QString& label, const QString& text, QWidget* parent = nullptr);
  QString label() const { return label_; }
  QString optionText() const;
  void setState(State state);
  State state() const { return state_; }

  bool hasHeightForWidth() const override { return true; }
  int heightForWidth(int width) const override;
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 private:
  QString label_;
  QLabel* text_;
  State state_ = State::Plain;
};

}  // namespace gui
