#pragma once
// The Ring page: one real DDP gradient bucket all-reduced by the engine's in-process ring, step by
// step (reduce-scatter, then all-gather), scrubbable with the slider or the arrow keys; the bytes
// of each step and the ring's cost formula 2(world-1)/world × bytes beside the measured time; and
// DataParallel's reduce of the same gradients onto device 0 for contrast. The run happens on the
// engine's worker thread (course::run_ring_demo); the page only draws what comes back.
#include <memory>

#include "course/ring_demo.h"
#include "gui/common/page.h"
#include "gui/runtime/settings.h"

class QComboBox;
class QLabel;
class QPushButton;
class QSlider;
class QSpinBox;
class QTextBrowser;

namespace gui {

class LessonPanel;
class RingView;

class RingPage : public Page {
  Q_OBJECT
 public:
  RingPage(AppContext* context, QWidget* parent = nullptr);
  QList<Shot> screenshots() override;
  // Its own model and rank controls, which follow the Iteration page's settings; the batch, seed,
  // optimizer and DDP settings are that page's (the run caption names them).
  bool usesSettingsBar() const override { return false; }

  // Runs the ring on the engine: the Iteration page's run with the page's model and rank count.
  void run();
  void setWorldSize(int ranks);
  void setPreset(const QString& preset);
  void setFrame(int frame);
  int frame() const;
  int frameCount() const;
  bool running() const { return running_; }
  QString errorText() const { return error_; }
  const dpv::course::RingDemo* demo() const { return demo_.get(); }
  RingView* view() const { return view_; }
  QString stepText() const;  // the side panel's account of the current step
  QString costText() const;
  QString runCaption() const;  // "Data: … model … · seed … · batch … · mode · devices"
  dpv::RunSpec ringRun() const;  // what run() runs
  LessonPanel* lessonPanel() const { return lesson_; }  // lessons/ddp/ring.md

 signals:
  void demoShown();
  void failed(const QString& message);

 private:
  void showDemo(std::shared_ptr<const dpv::course::RingDemo> demo);
  void refreshPanels();
  void showDpPanel();
  void applyTheme();
  void followSettings(const AppSettings& settings);

  QComboBox* preset_;
  QLabel* runCaption_;
  QSpinBox* ranks_;
  QPushButton* runButton_;
  QLabel* status_;
  RingView* view_;
  QSlider* slider_;
  QPushButton* back_;
  QPushButton* forward_;
  QLabel* frameLabel_;
  QTextBrowser* step_;
  QTextBrowser* cost_;
  QTextBrowser* dp_;
  LessonPanel* lesson_;
  std::shared_ptr<const dpv::course::RingDemo> demo_;
  bool running_ = false;
  QString error_;
  quint64 request_ = 0;
};

}  // namespace gui
