#pragma once
// The graphics items of the Iteration scene: the host box, one box per device (replica, chips,
// memory bar, idle/failed state) and tensor chips, which are QGraphicsObjects so their position
// and opacity can be animated with QPropertyAnimation.
#include <QGraphicsObject>
#include <QGraphicsScene>
#include <QStringList>
#include <optional>
#include <vector>

#include "gui/common/theme.h"
#include "engine/model_spec.h"
#include "gui/common/scene_model.h"

namespace gui {

// Text in a scene is drawn this many times its design size. Its view raises it when it has to
// shrink the scene a lot (a small window), so labels stay readable on screen; 1 otherwise. Each
// scene has its own (the DDP view's fit must not change the DataParallel picture's text).
void setSceneTextScale(QGraphicsScene* scene, qreal factor);
qreal sceneTextScale(const QGraphicsScene* scene);
// The smallest text the scene's visible items drew at their last paint, in scene pixels (text
// items' fonts, the painted labels of chips, boxes and cards); 0 before anything was painted.
// SceneView scales the scene so that this text is never under 9 pt on screen.
qreal smallestSceneTextPx(const QGraphicsScene* scene);

// One piece of text an item painted, in item coordinates: where its glyphs are, the pixel size
// it was drawn at, and whether it had to be elided. Layout tests map it through the view to
// check on-screen sizes and overlaps.
struct DrawnLabel {
  QString text;
  QRectF rect;
  qreal pixelSize = 0;
  bool elided = false;
};

class ChipItem : public QGraphicsObject {
  Q_OBJECT
 public:
  ChipItem(const ChipView& view, qreal width, qreal height, const QString& theme, QGraphicsItem* parent = nullptr);
  const ChipView& view() const { return view_; }
  void setView(const ChipView& view);
  void setTheme(const QString& theme);
  void setSelectedChip(bool selected);
  // Marked by the lesson text that talks about it (a thick outline in the accent colour).
  void setHighlighted(bool highlighted);
  bool highlighted() const { return highlighted_; }
  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  // The labels as last painted (shortened or shrunk to fit; "…" only when nothing fitted), for tests.
  QStringList drawnTexts() const { return drawn_; }
  QList<DrawnLabel> drawnLabels() const { return labels_; }

 signals:
  void clicked(ChipItem* chip);

 protected:
  void mousePressEvent(QGraphicsSceneMouseEvent* event) override;

 private:
  ChipView view_;
  qreal width_;
  qreal height_;
  QString theme_;
  bool selected_ = false;
  bool highlighted_ = false;
  QStringList drawn_;
  QList<DrawnLabel> labels_;
};

class HostBox : public QGraphicsObject {
  Q_OBJECT
 public:
  HostBox(qreal width, const QString& theme);
  void setContent(const QString& inputShape, const QString& inputDtype, const QString& targetShape, const QString& transport);
  void setTheme(const QString& theme);
  // The two lines under the title: where the batch is, and the transport.
  QStringList lines() const;
  // Scene position where chips leave the host (the batch chip).
  QPointF batchAnchor() const;
  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  static constexpr qreal kHeight = 96;  // the stage card beside it holds four wrapped lines
  QStringList drawnTexts() const { return drawn_; }
  QList<DrawnLabel> drawnLabels() const { return labels_; }  // as last painted

 private:
  QStringList drawn_;
  QList<DrawnLabel> labels_;
  qreal width_;
  QString theme_;
  QString inputShape_, inputDtype_, targetShape_, transport_;
};

// Vertical layout of a device box; compact for more than four devices (two rows of boxes).
struct BoxGeometry {
  qreal width, height, titleH, subtitleTop, replicaTop, replicaH, chipTop, chipH, chipStep, noteTop, memoryTop;
  bool compact;
  static BoxGeometry forDevices(int count);
};

// One part of a device's memory bar (kind empty: what no chip accounts for).
struct MemoryPart {
  std::optional<dpv::MemoryKind> kind;
  QString name;
  qint64 bytes = 0;
};
// The parts of a device's memory in bar order: parameters, gradients, activations, optimizer
// state, gathered output, batch, other.
QList<MemoryPart> memoryParts(const DeviceView& view);

class DeviceBox : public QGraphicsObject {
  Q_OBJECT
 public:
  DeviceBox(int device, const std::vector<dpv::LayerKind>& layerKinds, const BoxGeometry& geometry, const QString& theme);
  int device() const { return device_; }
  const DeviceView& view() const { return view_; }
  void setView(const DeviceView& view, int activeLayer, qint64 memoryScale);
  void setFailed(const QString& reason);  // empty: not failed
  QString replicaTitle() const;           // "replica 1 (a copy)", "replica 1 freed after backward", ...
  QStringList replicaTitleForms() const;  // the title, then shorter ways to say it ("replica 0 (original)")
  QString failure() const { return failure_; }
  bool isIdle() const { return view_.idle; }
  void setTheme(const QString& theme);
  const BoxGeometry& geometry() const { return g_; }
  // Chip geometry inside the box (item coordinates): the `row`-th chip from the top.
  QPointF chipPos(int row) const { return QPointF(10, g_.chipTop + row * g_.chipStep); }
  qreal chipWidth() const { return g_.width - 20; }
  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  QStringList drawnTexts() const { return drawn_; }
  QList<DrawnLabel> drawnLabels() const { return labels_; }  // title, subtitle, replica, memory as last painted

 private:
  QStringList drawn_;
  QList<DrawnLabel> labels_;
  void paintLayers(QPainter* painter, const QRectF& area, const SceneColors& c);
  int device_;
  std::vector<dpv::LayerKind> layerKinds_;
  BoxGeometry g_;
  QString theme_;
  DeviceView view_;
  int activeLayer_ = -1;
  qint64 memoryScale_ = 1;
  QString failure_;
};

// A card of numbers the engine reported for this stage (the followed weight element, the samples
// each device got), drawn beside the host box.
class InfoCard : public QGraphicsObject {
  Q_OBJECT
 public:
  InfoCard(qreal width, const QString& theme);
  // Empty title: hidden. `shorterTitles`: ways to say the title where room is short, longest first.
  void setContent(const QString& title, const QStringList& lines, const QStringList& shorterTitles = {});
  void setTheme(const QString& theme);
  QString title() const { return title_; }
  QStringList lines() const { return lines_; }
  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  QStringList drawnTexts() const { return drawn_; }
  QList<DrawnLabel> drawnLabels() const { return labels_; }  // as last painted

 private:
  QStringList drawn_;
  QList<DrawnLabel> labels_;
  qreal width_;
  QString theme_;
  QString title_;
  QStringList shorterTitles_;
  QStringList lines_;
};

// "Linear" -> "Lin", "BatchNorm1d" -> "BN", ... for the layer strip in a replica.
QString shortLayerName(dpv::LayerKind kind);

}  // namespace gui
