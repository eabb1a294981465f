#pragma once
// The Iteration page's stepper row: Restart, Back, Play/Pause and Step, the animation speed, and
// where the learner is ("stage 3 of 9 · iteration 1"), shown in the longest form that fits.
#include <QStringList>
#include <QWidget>

class QLabel;
class QSlider;
class QToolButton;

namespace gui {

class StepperBar : public QWidget {
  Q_OBJECT
 public:
  explicit StepperBar(QWidget* parent = nullptr);
  // Which buttons act now, and whether Play reads Pause.
  void setState(bool playing, bool canGoBack, bool canStep, bool canPlay);
  // The speed factor's label ("1×", or "instant" for 0); the slider is the learner's.
  void showSpeed(double factor);
  // The position, longest form first; the label shows the first that fits its width.
  void setPosition(const QStringList& forms, const QString& toolTip = {});
  QString position() const { return positionForms_.value(0); }

 signals:
  void restartClicked();
  void backClicked();
  void playClicked();
  void stepClicked();
  void speedChosen(double factor);

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void fitPosition();

  QToolButton* restartButton_;
  QToolButton* backButton_;
  QToolButton* playButton_;
  QToolButton* stepButton_;
  QSlider* speed_;
  QLabel* speedLabel_;
  QLabel* position_;
  QStringList positionForms_;
};

}  // namespace gui
