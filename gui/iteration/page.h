#pragma once
// The Iteration page: one DataParallel iteration, stage by stage. The engine runs each stage on
// its worker thread when asked; the page animates the recorded StageEvent, explains it, marks the
// code line, and lets the learner step back through what was recorded.
#include <QPointer>
#include <QTimer>
#include <functional>
#include <optional>

#include "gui/common/context.h"
#include "gui/common/page.h"
#include "gui/ddp/inspect.h"
#include "gui/ddp/scene_model.h"
#include "gui/common/scene_model.h"
#include "gui/runtime/engine_types.h"

class QHBoxLayout;
class QLabel;
class QStackedWidget;
class QSplitter;
class QToolButton;

namespace gui {

class CodeView;
class DdpScene;
class EngineController;
class IterationScene;
class LessonPanel;
class LossStrip;
class SceneView;
class StepperBar;
class TensorInspector;

class IterationPage : public Page {
  Q_OBJECT
 public:
  IterationPage(AppContext* context, QWidget* parent = nullptr);
  ~IterationPage() override;
  QList<Shot> screenshots() override;

  // Transport (also on the buttons and the Space / Right / Left / Home keys).
  void stepForward();
  void stepBack();
  void play();
  void pause();
  void togglePlay();
  void restart();
  // Shows recorded stage `index` (-1: before the first); runs stages on the engine until it is
  // recorded when it lies ahead. `done` is called once it is shown (or the engine failed).
  void seekTo(int index, std::function<void()> done = {});
  // Speed factor 0.25..4 (1: one stage animates in 0.7 s). 0 switches animation off.
  void setSpeed(double factor);

  bool playing() const { return playing_; }
  int cursor() const { return cursor_; }  // index of the stage shown; -1 before the first
  bool atEnd() const;                     // the last stage of the iteration is shown
  bool waitingForEngine() const { return waiting_; }
  IterationScene* scene() const { return scene_; }
  // The strategy run: DataParallel, DDP or ZeRO-1/2/3 (AppSettings::strategy; the engine starts afresh).
  void setStrategy(dpv::StrategyKind kind);
  dpv::StrategyKind strategy() const;
  DdpScene* ddpScene() const { return ddpScene_; }
  QWidget* modeSwitch() const { return modeBox_; }  // the DataParallel | DDP | ZeRO-1 | ZeRO-2 | ZeRO-3 switch
  QList<QToolButton*> strategyButtons() const { return strategyButtons_; }  // in the switch's order
  bool showingDdp() const;  // the ranks' view (DDP and ZeRO) is the one on screen
  CodeView* codeView() const { return code_; }
  LessonPanel* lessonPanel() const { return lesson_; }
  TensorInspector* inspector() const { return inspector_; }
  LossStrip* lossStrip() const { return lossStrip_; }
  QSplitter* splitter() const { return outer_; }          // the picture | the side panels
  QSplitter* sidePanels() const { return sidePanels_; }   // lesson / code / inspector
  QString errorText() const;              // the error banner's text ("" when hidden)
  QString positionText() const;  // the full form, whatever the label's width shows
  bool eventFilter(QObject* watched, QEvent* event) override;
  // Opens a chip of a device in the inspector (as a click would); false when there is none.
  bool inspectChip(int device, dpv::TensorRole role);
  // DDP: opens a part of a rank (its shard, a bucket, .grad, the watched parameter or buffer) in
  // the inspector, as a click on it would; false when the stage shown has no rows for it.
  bool inspectDdpPart(DdpPart part, int rank, int bucket = 0);

 signals:
  void stageShown(int index);

 private:
  // The widgets (page_layout.cpp): the whole page, then its left column (error banner, scene card,
  // loss strip, transport), the scene card with the mode switch, and the side panels.
  void buildUi();
  QWidget* buildPicturePanel();
  QWidget* buildSceneCard();
  QWidget* buildSidePanels();
  static constexpr int kModeBoxTop = 6;  // the strategy switch's distance from the scene card's top
  void onSettingsApplied();
  void onIterationStarted(const IterationInfo& info);
  void onStageRecorded(const dpv::StageEvent& event);
  void onEngineError(const QString& message);
  // The failure's marks (page_failure.cpp): the failing DataParallel device or DDP rank in red.
  void clearFailure();
  void markFailedRank(DdpSceneState& state) const;
  QString failureAdvice(const EngineFailure& failure) const;
  void onAnimationFinished();
  bool sceneAnimating() const;  // the DataParallel or the DDP picture is animating a stage
  void finishSceneAnimations();
  void showStage(int index, bool animate);
  void afterShown();
  void rebuildStageStrip();
  void updateControls();
  void requestNext();
  void updateCode();
  void updateModeButtons();
  // Screenshots: shows the stage `pick` returns in iteration `iteration` (stepping into it first).
  void seekInIteration(int iteration, std::function<int()> pick, std::function<void()> done);
  // The plan index of a stage of `kind`: its first (which 0), middle (1) or last (2) occurrence;
  // the cursor when the plan has none.
  int planIndexOf(dpv::StageKind kind, int which) const;
  // Applies `settings` and calls `done` once the engine has announced the new iteration.
  void applyAndWait(const AppSettings& settings, std::function<void()> done);
  QList<Shot> ddpScreenshots();
  QList<Shot> zeroScreenshots();  // ZeRO-1, -2, -3 mid-iteration: gather, free, reduce-scatter, broadcast
  // Screenshots: animates the next stage at 1x and stops it at `fraction` of its flights.
  void freezeNextStage(double fraction, std::function<void()> done);
  EngineController* engine() const;
  // The index in `plan` of the stage most like `stage` (at `index` of the old plan): the same kind
  // and layer, else the first of the same kind, else the same position (or the last stage).
  static int stageLike(const std::vector<dpv::Stage>& plan, const dpv::Stage& stage, int index);

  QSplitter* outer_ = nullptr;
  QSplitter* sidePanels_ = nullptr;
  IterationScene* scene_ = nullptr;
  SceneView* view_ = nullptr;
  DdpScene* ddpScene_ = nullptr;
  SceneView* ddpView_ = nullptr;
  QStackedWidget* sceneStack_ = nullptr;
  QWidget* modeBox_ = nullptr;  // the strategy switch, over the scene card's corner
  QList<QToolButton*> strategyButtons_;  // one per gui::kAllStrategies
  CodeView* code_ = nullptr;
  StepperBar* stepper_ = nullptr;
  LessonPanel* lesson_ = nullptr;
  TensorInspector* inspector_ = nullptr;
  LossStrip* lossStrip_ = nullptr;
  QLabel* errorBanner_ = nullptr;
  QWidget* stageStrip_ = nullptr;
  QHBoxLayout* stageStripLayout_ = nullptr;
  QList<QToolButton*> stagePills_;
  QList<int> pillFirstIndex_;
  QTimer dwell_;  // the pause between stages while playing

  IterationInfo info_;
  bool haveInfo_ = false;
  int cursor_ = -1;
  int seekTarget_ = -2;     // >= -1 while seeking ahead
  bool waiting_ = false;    // a stage was asked for and the page will show it when it comes
  bool playing_ = false;
  bool newIterationWanted_ = false;
  std::function<void()> seekDone_;
  std::optional<dpv::Stage> resumeStage_;  // the stage to step to once the new settings' iteration starts
  int resumeIndex_ = -1;                   // its index in the old plan
  int failedRank_ = -1;                    // DDP: the rank whose stage failed (-1: none)
  QString failedRankReason_;
  int durationMs_ = 700;
};

}  // namespace gui
