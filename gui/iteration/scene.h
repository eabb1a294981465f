#pragma once
// The Iteration page's picture: the host, one box per device, and tensor chips that move between
// them as the stages run (QPropertyAnimation on pos and opacity). The scene is driven only by
// SceneStates built from the engine's recorded StageEvents, so replaying a recorded stage draws
// exactly what the engine reported.
#include <QGraphicsScene>
#include <QGraphicsView>
#include <QMap>
#include <QPointer>
#include <initializer_list>
#include <optional>
#include <set>
#include <utility>

#include "gui/common/scene_items.h"
#include "gui/common/scene_model.h"

class QParallelAnimationGroup;

namespace gui {

// A chip's place in the scene: one chip per (device, role) (chipRoleFor's group of memory).
using ChipKey = std::pair<int, dpv::TensorRole>;

class IterationScene : public QGraphicsScene {
  Q_OBJECT
 public:
  explicit IterationScene(QObject* parent = nullptr);
  ~IterationScene() override;

  void setTheme(const QString& theme);
  // Rebuilds the boxes for an iteration's devices and shows the state before its first stage.
  void setInfo(const IterationInfo& info);
  // Shows a state; with `animate`, chips travel from where the stage takes them from.
  void showState(const SceneState& state, bool animate);
  // Milliseconds one stage's animation takes (0: no animation).
  void setDuration(int ms) { duration_ = ms; }
  int duration() const { return duration_; }
  // Bytes that fill a memory bar completely (the largest peak of the iteration).
  void setMemoryScale(qint64 bytes) { memoryScale_ = bytes; }
  // Marks a device as the one whose replica failed (device < 0 clears every mark).
  void setFailure(int device, const QString& reason);
  void finishAnimations();  // jumps every running animation to its end
  bool animating() const;
  // For tests: pauses the stage's animation at `ms` (a frame that can be checked), and the chips
  // in flight (Gather, Grad scatter, Reduce) at that frame.
  void pauseAnimationsAt(int ms);
  QList<ChipItem*> flyingChips() const;

  int deviceCount() const { return static_cast<int>(boxes_.size()); }
  DeviceBox* deviceBox(int device) const { return boxes_.value(device); }
  HostBox* hostBox() const { return host_; }
  InfoCard* card() const { return card_; }
  // Outlines the chips of these roles on every device (what the lesson sentence under the mouse
  // talks about); an empty list clears it.
  void setHighlightedRoles(const QList<dpv::TensorRole>& roles);
  QList<dpv::TensorRole> highlightedRoles() const { return highlighted_; }
  QList<ChipItem*> chipsOn(int device) const;  // top to bottom
  const SceneState& state() const { return state_; }
  const IterationInfo& info() const { return info_; }

 signals:
  void chipClicked(const ChipView& chip, int device);
  void animationFinished();

 private:
  QPointF chipScenePos(int device, int row) const;
  ChipItem* makeChip(const ChipView& view, int device);
  // showState's parts: a chip that stays (moved, flashed when its value changed), a new chip (flown
  // in from chipSource or faded in), the chips the stage removed, the collectives' flights, and
  // starting what was queued.
  std::optional<QPointF> chipSource(int device, dpv::TensorRole role) const;
  void moveChip(ChipItem* chip, const ChipView& view, QPointF target, bool animate);
  ChipItem* addChip(const ChipView& view, QPointF target, bool animate);
  void removeChipsExcept(const std::set<ChipKey>& keep, bool animate);
  ChipItem* firstChipOf(int device, std::initializer_list<dpv::TensorRole> roles) const;
  void addStageFlights(const SceneState& previous, const SceneState& next);
  void startAnimations();
  // One chip flying from `from` to `to`; the flight of `order` > 0 starts that many staggers
  // later, so chips converging on device 0 arrive one after the other instead of as one blur.
  void addFlight(const ChipView& view, QPointF from, QPointF to, qreal width, int order = 0);
  void onChipClicked(ChipItem* chip);
  void buildConnectors();

  QString theme_ = QStringLiteral("light");
  IterationInfo info_;
  SceneState state_;
  HostBox* host_ = nullptr;
  InfoCard* card_ = nullptr;
  QList<dpv::TensorRole> highlighted_;
  QList<DeviceBox*> boxes_;
  QMap<ChipKey, ChipItem*> chips_;
  QList<QGraphicsItem*> connectors_;
  QList<ChipItem*> ghosts_;  // chips flying for Gather/GradScatter/ReduceGrads, deleted at the end
  QPointer<QParallelAnimationGroup> group_;
  ChipItem* selected_ = nullptr;
  int duration_ = 700;
  qint64 memoryScale_ = 1;
};

// A view that shows the whole scene (scaled to fit, aspect kept) unless that would draw text under
// 9 pt: then it shows the scene larger and scrolls. It follows the theme.
class SceneView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit SceneView(QGraphicsScene* scene, QWidget* parent = nullptr);
  void fit();
  qreal minimumScreenTextPx() const;  // 9 pt at this screen's resolution

 protected:
  void resizeEvent(QResizeEvent* event) override;
  void paintEvent(QPaintEvent* event) override;

 private:
  bool learnerScrolled_ = false;  // a scroll bar was moved while the scene scrolls
  void showEvent(QShowEvent* event) override;
};

}  // namespace gui
