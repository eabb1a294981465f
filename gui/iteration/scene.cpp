#include "gui/iteration/scene.h"

#include <QScrollBar>

#include "gui/common/flight.h"

#include <algorithm>

#include <QGraphicsPathItem>
#include <QParallelAnimationGroup>
#include <QPropertyAnimation>
#include <QSequentialAnimationGroup>
#include <cmath>
#include <optional>
#include <set>

namespace gui {

namespace {
constexpr qreal kMargin = 16;
constexpr qreal kSpacing = 12;
constexpr qreal kHostGap = 34;
constexpr qreal kBodyTextPx = 11;        // the scene's body text at scale 1 (scene_items.cpp)
constexpr qreal kMinScreenTextPt = 9;    // the smallest text the view shows
constexpr qreal kMaxTextScale = 1.25;    // larger text overflows the chips and boxes
}  // namespace

IterationScene::IterationScene(QObject* parent) : QGraphicsScene(parent) {}

IterationScene::~IterationScene() {
  if (group_) group_->stop();
}

void IterationScene::setTheme(const QString& theme) {
  theme_ = theme;
  setBackgroundBrush(sceneColors(theme).background);
  if (host_) host_->setTheme(theme);
  if (card_) card_->setTheme(theme);
  for (auto* box : boxes_) box->setTheme(theme);
  for (auto* chip : chips_) chip->setTheme(theme);
  buildConnectors();
}

void IterationScene::setInfo(const IterationInfo& info) {
  finishAnimations();
  info_ = info;
  selected_ = nullptr;
  chips_.clear();
  boxes_.clear();
  connectors_.clear();
  host_ = nullptr;
  card_ = nullptr;
  clear();  // deletes every item
  setBackgroundBrush(sceneColors(theme_).background);

  const int n = static_cast<int>(info.deviceLabels.size());
  const BoxGeometry g = BoxGeometry::forDevices(n);
  const int cols = n > 4 ? 4 : std::max(1, n);
  const int rows = n == 0 ? 0 : (n + cols - 1) / cols;
  const qreal rowWidth = std::max<qreal>(cols * g.width + (cols - 1) * kSpacing, 660);
  // The host on the left half of the top row, the stage's numbers card on the right half.
  const qreal half = (rowWidth - kSpacing) / 2;
  host_ = new HostBox(half, theme_);
  host_->setPos(kMargin, kMargin);
  host_->setContent(info.inputShape, info.inputDtype, info.targetShape, info.transport);
  addItem(host_);
  card_ = new InfoCard(half, theme_);
  card_->setPos(kMargin + half + kSpacing, kMargin);
  addItem(card_);
  const qreal top = kMargin + HostBox::kHeight + kHostGap;
  for (int d = 0; d < n; ++d) {
    auto* box = new DeviceBox(d, info.layerKinds, g, theme_);
    box->setPos(kMargin + (d % cols) * (g.width + kSpacing), top + (d / cols) * (g.height + kSpacing));
    addItem(box);
    boxes_.append(box);
  }
  const qreal width = rowWidth + 2 * kMargin;
  const qreal height = top + rows * g.height + std::max(0, rows - 1) * kSpacing + kMargin;
  setSceneRect(0, 0, width, height);
  buildConnectors();
  state_ = SceneState{};
  showState(sceneStateFor(info, nullptr), false);
}

void IterationScene::buildConnectors() {
  for (auto* item : connectors_) {
    removeItem(item);
    delete item;
  }
  connectors_.clear();
  if (!host_ || boxes_.isEmpty()) return;
  // A bus from the host to every device of the first row: the path chunks and results take.
  const SceneColors& c = sceneColors(theme_);
  QPainterPath path;
  const qreal busY = host_->y() + HostBox::kHeight + kHostGap / 2;
  path.moveTo(host_->x() + 40, host_->y() + HostBox::kHeight);
  path.lineTo(host_->x() + 40, busY);
  qreal right = host_->x() + 40;
  for (auto* box : boxes_) {
    if (box->y() > boxes_.first()->y()) break;
    const qreal x = box->x() + box->boundingRect().width() / 2;
    path.moveTo(x, busY);
    path.lineTo(x, box->y());
    right = std::max(right, x);
  }
  path.moveTo(host_->x() + 40, busY);
  path.lineTo(right, busY);
  auto* item = addPath(path, QPen(c.panelBorder, 1.5, Qt::DashLine));
  item->setZValue(-1);
  connectors_.append(item);
}

QPointF IterationScene::chipScenePos(int device, int row) const {
  DeviceBox* box = boxes_.value(device);
  return box ? box->mapToScene(box->chipPos(row)) : QPointF();
}

ChipItem* IterationScene::makeChip(const ChipView& view, int device) {
  DeviceBox* box = boxes_.at(device);
  auto* chip = new ChipItem(view, box->chipWidth(), box->geometry().chipH, theme_);
  chip->setHighlighted(highlighted_.contains(view.role));
  addItem(chip);
  connect(chip, &ChipItem::clicked, this, &IterationScene::onChipClicked);
  return chip;
}

void IterationScene::onChipClicked(ChipItem* chip) {
  if (selected_ && chips_.values().contains(selected_)) selected_->setSelectedChip(false);
  selected_ = chip;
  chip->setSelectedChip(true);
  emit chipClicked(chip->view(), chip->view().device);
}

void IterationScene::addFlight(const ChipView& view, QPointF from, QPointF to, qreal width, int order) {
  if (!group_) return;
  auto* ghost = new ChipItem(view, width, boxes_.isEmpty() ? 24 : boxes_.first()->geometry().chipH, theme_);
  ghost->setZValue(5);
  ghost->setAcceptedMouseButtons(Qt::NoButton);
  ghost->setPos(from);
  addItem(ghost);
  ghosts_.append(ghost);
  group_->addAnimation(makeFlight(ghost, {from, to}, duration_, order));
}

void IterationScene::pauseAnimationsAt(int ms) {
  if (!group_) return;
  group_->pause();
  group_->setCurrentTime(ms);
}

QList<ChipItem*> IterationScene::flyingChips() const {
  QList<ChipItem*> out;
  for (ChipItem* g : ghosts_)
    if (g && g->zValue() == 5) out.append(g);  // flights (addFlight); ghosts_ also holds chips fading out
  return out;
}

void IterationScene::finishAnimations() {
  if (group_) {
    QParallelAnimationGroup* g = group_;
    group_ = nullptr;
    g->disconnect(this);  // cut short: no animationFinished (the caller moves on by itself)
    g->setCurrentTime(g->totalDuration());
    g->stop();
    g->deleteLater();
  }
  for (auto* ghost : ghosts_) {
    removeItem(ghost);
    ghost->deleteLater();
  }
  ghosts_.clear();
  for (auto* chip : chips_) chip->setOpacity(1.0);
}

bool IterationScene::animating() const { return group_ && group_->state() == QAbstractAnimation::Running; }

void IterationScene::setHighlightedRoles(const QList<dpv::TensorRole>& roles) {
  highlighted_ = roles;
  for (auto* chip : chips_) chip->setHighlighted(roles.contains(chip->view().role));
}

void IterationScene::setFailure(int device, const QString& reason) {
  for (auto* box : boxes_) {
    if (device < 0 || box->device() == device) box->setFailed(device < 0 ? QString() : reason);
  }
}

QList<ChipItem*> IterationScene::chipsOn(int device) const {
  QList<ChipItem*> list;
  for (auto it = chips_.begin(); it != chips_.end(); ++it) {
    if (it.key().first == device) list.append(it.value());
  }
  std::sort(list.begin(), list.end(), [](ChipItem* a, ChipItem* b) { return a->y() < b->y(); });
  return list;
}

void IterationScene::showState(const SceneState& next, bool animateRequested) {
  finishAnimations();
  const SceneState previous = state_;
  state_ = next;
  const bool animate = animateRequested && duration_ > 0 && next.started;
  if (animate) group_ = new QParallelAnimationGroup(this);
  if (card_) card_->setContent(next.cardTitle, next.cardLines, next.cardTitleShorter);

  std::set<ChipKey> keep;
  for (const DeviceView& dv : next.devices) {
    DeviceBox* box = boxes_.value(dv.device);
    if (!box) continue;
    const bool layerStage = next.kind == dpv::StageKind::Forward || next.kind == dpv::StageKind::Backward;
    box->setView(dv, next.started && layerStage ? next.layer : -1, memoryScale_);
    for (int row = 0; row < dv.chips.size(); ++row) {
      ChipView cv = dv.chips[row];
      cv.device = dv.device;  // the box it is drawn in, whoever built the view
      const ChipKey key{dv.device, cv.role};
      keep.insert(key);
      const QPointF target = chipScenePos(dv.device, row);
      if (ChipItem* chip = chips_.value(key)) {
        moveChip(chip, cv, target, animate);
      } else {
        chips_.insert(key, addChip(cv, target, animate));
      }
    }
  }
  removeChipsExcept(keep, animate);
  // Flights between devices: the collectives of this stage, drawn as chips in transit.
  if (animate) addStageFlights(previous, next);
  startAnimations();
}

std::optional<QPointF> IterationScene::chipSource(int device, dpv::TensorRole role) const {
  // Where a chip that is new on a device comes from, by stage: the host's batch on Scatter, the
  // original parameters on device 0 on Replicate; elsewhere it grows in place.
  if (state_.kind == dpv::StageKind::Scatter && role == dpv::TensorRole::Input && host_) return host_->batchAnchor();
  if (state_.kind == dpv::StageKind::Replicate && role == dpv::TensorRole::Param && device != 0) {
    if (ChipItem* original = chips_.value(ChipKey{0, dpv::TensorRole::Param})) return original->pos();
  }
  return std::nullopt;
}

void IterationScene::moveChip(ChipItem* chip, const ChipView& view, QPointF target, bool animate) {
  const bool changed = chip->view().text != view.text;
  chip->setView(view);
  if (animate && chip->pos() != target) {
    auto* move = new QPropertyAnimation(chip, "pos");
    move->setStartValue(chip->pos());
    move->setEndValue(target);
    move->setDuration(duration_ / 2);
    group_->addAnimation(move);
  } else {
    chip->setPos(target);
  }
  if (animate && changed) {  // a new value in the same place: a short flash
    auto* flash = new QPropertyAnimation(chip, "opacity");
    flash->setStartValue(0.25);
    flash->setEndValue(1.0);
    flash->setDuration(duration_ / 2);
    group_->addAnimation(flash);
  }
}

ChipItem* IterationScene::addChip(const ChipView& view, QPointF target, bool animate) {
  ChipItem* chip = makeChip(view, view.device);
  const auto source = animate ? chipSource(view.device, view.role) : std::nullopt;
  if (source) {
    chip->setPos(*source);
    auto* move = new QPropertyAnimation(chip, "pos");
    move->setStartValue(*source);
    move->setEndValue(target);
    move->setDuration(duration_);
    move->setEasingCurve(QEasingCurve::InOutCubic);
    group_->addAnimation(move);
    return chip;
  }
  chip->setPos(target);
  if (animate) {
    chip->setOpacity(0.0);
    auto* fade = new QPropertyAnimation(chip, "opacity");
    fade->setStartValue(0.0);
    fade->setEndValue(1.0);
    fade->setDuration(duration_ * 2 / 3);
    group_->addAnimation(fade);
  }
  return chip;
}

void IterationScene::removeChipsExcept(const std::set<ChipKey>& keep, bool animate) {
  // Chips the stage removed (freed activations, grads of replicas thrown away).
  for (auto it = chips_.begin(); it != chips_.end();) {
    if (keep.contains(it.key())) {
      ++it;
      continue;
    }
    ChipItem* chip = it.value();
    if (chip == selected_) selected_ = nullptr;
    it = chips_.erase(it);
    if (animate) {
      // Fade out as a ghost (no longer clickable), deleted with the other ghosts.
      chip->setAcceptedMouseButtons(Qt::NoButton);
      ghosts_.append(chip);
      auto* fade = new QPropertyAnimation(chip, "opacity");
      fade->setStartValue(chip->opacity());
      fade->setEndValue(0.0);
      fade->setDuration(duration_ / 2);
      group_->addAnimation(fade);
    } else {
      removeItem(chip);
      delete chip;
    }
  }
}

ChipItem* IterationScene::firstChipOf(int device, std::initializer_list<dpv::TensorRole> roles) const {
  for (dpv::TensorRole role : roles) {
    if (ChipItem* c = chips_.value(ChipKey{device, role})) return c;
  }
  return nullptr;
}

void IterationScene::addStageFlights(const SceneState& previous, const SceneState& next) {
  const int n = static_cast<int>(next.devices.size());
  const qreal width = boxes_.isEmpty() ? 180 : boxes_.first()->chipWidth();
  if (next.kind == dpv::StageKind::Gather) {
    ChipItem* dst = firstChipOf(0, {dpv::TensorRole::Output, dpv::TensorRole::Activation});
    for (int d = 1; d < n && dst; ++d) {
      if (const DeviceView& pv = previous.devices.value(d); pv.hasReplica) {
        ChipView v{dpv::TensorRole::Output, dpv::MemoryKind::Output, tr("output of GPU %1").arg(d), {}, true};
        addFlight(v, chipScenePos(d, std::max<int>(0, static_cast<int>(pv.chips.size()) - 1)), dst->pos(), width, d - 1);
      }
    }
  } else if (next.kind == dpv::StageKind::GradScatter) {
    ChipItem* src = firstChipOf(0, {dpv::TensorRole::Loss, dpv::TensorRole::Output});
    for (int d = 1; d < n && src; ++d) {
      if (next.devices[d].hasReplica) {
        ChipView v{dpv::TensorRole::Grad, dpv::MemoryKind::Activations, tr("grad of output → GPU %1").arg(d), {}, true};
        addFlight(v, src->pos(), chipScenePos(d, std::max<int>(0, static_cast<int>(next.devices[d].chips.size()) - 1)), width);
      }
    }
  } else if (next.kind == dpv::StageKind::ReduceGrads) {
    ChipItem* dst = firstChipOf(0, {dpv::TensorRole::Grad});
    int order = 0;
    for (int d = 1; d < n && dst; ++d) {
      const DeviceView& pv = previous.devices.value(d);
      bool flew = false;
      for (int row = 0; row < pv.chips.size(); ++row) {
        if (pv.chips[row].role == dpv::TensorRole::Grad) {
          addFlight(pv.chips[row], chipScenePos(d, row), dst->pos(), width, order);
          flew = true;
        }
      }
      if (flew) ++order;  // one device's gradients leave together, the next device's after them
    }
  } else if (next.kind == dpv::StageKind::Step) {
    if (ChipItem* params = firstChipOf(0, {dpv::TensorRole::Param})) {
      auto* pulse = new QPropertyAnimation(params, "scale");
      pulse->setStartValue(1.0);
      pulse->setKeyValueAt(0.5, 1.06);
      pulse->setEndValue(1.0);
      pulse->setDuration(duration_);
      group_->addAnimation(pulse);
    }
  }
}

void IterationScene::startAnimations() {
  if (!group_) return;
  if (group_->animationCount() == 0) {
    group_->deleteLater();
    group_ = nullptr;
    return;
  }
  connect(group_, &QAbstractAnimation::finished, this, [this] {
    for (auto* ghost : ghosts_) {
      removeItem(ghost);
      ghost->deleteLater();
    }
    ghosts_.clear();
    if (group_) {
      group_->deleteLater();
      group_ = nullptr;
    }
    emit animationFinished();
  });
  group_->start();
}

// ---------------------------------------------------------------- SceneView

SceneView::SceneView(QGraphicsScene* scene, QWidget* parent) : QGraphicsView(scene, parent) {
  setRenderHints(QPainter::Antialiasing | QPainter::TextAntialiasing | QPainter::SmoothPixmapTransform);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
  setFrameShape(QFrame::NoFrame);
  setMinimumSize(360, 260);
  connect(scene, &QGraphicsScene::sceneRectChanged, this, &SceneView::fit);
  // Dragging, clicking or wheeling a scroll bar: the learner's place is kept from then on.
  for (QScrollBar* bar : {horizontalScrollBar(), verticalScrollBar()})
    connect(bar, &QScrollBar::actionTriggered, this, [this] { learnerScrolled_ = true; });
}

void SceneView::fit() {
  if (!scene()) return;
  const QRectF r = scene()->sceneRect();
  if (r.isEmpty()) return;
  // The picture fills its canvas on the side that limits it, enlarged on a large window too (a
  // cap left two thirds of a 1920x1080 canvas empty around a small picture).
  const qreal fitted = std::min(viewport()->width() / r.width(), viewport()->height() / r.height());
  // The scene's body text is 11 px by design; shrunk below 9 pt on screen it is hard to read, so
  // the text (not the boxes) is drawn somewhat larger (more would not fit the chips); long labels
  // take their shorter forms, wrapped notes shrink to fit.
  const qreal minScreenPx = minimumScreenTextPx();
  const qreal textScale = std::clamp(minScreenPx / (kBodyTextPx * fitted), 1.0, kMaxTextScale);
  if (!qFuzzyCompare(textScale, sceneTextScale(scene()))) {
    setSceneTextScale(scene(), textScale);
    scene()->update();
  }
  // Whatever still draws smaller than 9 pt at the fitted scale (a label shrunk into its chip, the
  // small print of 8 ranks in 1024x640) decides: the picture is shown larger and the view scrolls,
  // rather than showing text nobody can read.
  const qreal smallest = smallestSceneTextPx(scene());
  const qreal s = smallest > 0 ? std::max(fitted, minScreenPx / smallest) : fitted;
  const bool scrolls = s > fitted * 1.001;
  setHorizontalScrollBarPolicy(scrolls ? Qt::ScrollBarAsNeeded : Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(scrolls ? Qt::ScrollBarAsNeeded : Qt::ScrollBarAlwaysOff);
  setTransform(QTransform::fromScale(s, s));
  if (!scrolls) {
    learnerScrolled_ = false;
    centerOn(r.center());
  } else if (!learnerScrolled_) {
    // The top left (the host, rank 0) until the learner scrolls; set once the scroll bars have
    // their new ranges.
    QMetaObject::invokeMethod(this, [this] {
      if (learnerScrolled_) return;
      horizontalScrollBar()->setValue(horizontalScrollBar()->minimum());
      verticalScrollBar()->setValue(verticalScrollBar()->minimum());
    }, Qt::QueuedConnection);
  }
}

qreal SceneView::minimumScreenTextPx() const { return kMinScreenTextPt * logicalDpiY() / 72.0; }

void SceneView::paintEvent(QPaintEvent* event) {
  QGraphicsView::paintEvent(event);
  // The items record the sizes they drew at; text that came out under 9 pt asks for a new fit
  // (queued: never re-entered from a paint).
  const qreal smallest = smallestSceneTextPx(scene());
  if (smallest > 0 && smallest * transform().m11() < minimumScreenTextPx() - 0.25)
    QMetaObject::invokeMethod(this, &SceneView::fit, Qt::QueuedConnection);
}

void SceneView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  fit();
}

void SceneView::showEvent(QShowEvent* event) {
  QGraphicsView::showEvent(event);
  fit();
}

}  // namespace gui
