#include "gui/common/scene_items.h"

#include <QFontMetricsF>
#include <QGraphicsScene>
#include <QGraphicsSceneMouseEvent>
#include <QCursor>
#include <QGraphicsSimpleTextItem>
#include <QPainter>
#include <algorithm>
#include <limits>

namespace gui {

namespace {

constexpr char kTextScaleProperty[] = "dpvSceneTextScale";  // see setSceneTextScale
// Labels shrink to fit their boxes down to this size, no further: the view shows the scene large
// enough that it reads at 9 pt (SceneView::fit), and each smaller step costs the learner scrolling.
constexpr int kSmallestFittedPx = 9;

// The font of an item's text: its design size times the text scale of the item's scene.
QFont sceneFont(const QGraphicsItem* item, qreal pointSize, bool bold = false) {
  QFont f;
  f.setPixelSize(qRound(pointSize * (item->scene() ? sceneTextScale(item->scene()) : 1.0)));
  f.setBold(bold);
  return f;
}

// Draws `text` in `r` at the painter's font and notes it in `out` (where its glyphs are, at which
// size) for the layout tests.
void drawRecorded(QPainter* p, const QRectF& r, int flags, const QString& text, QList<DrawnLabel>* out, bool elided = false) {
  p->drawText(r, flags, text);
  if (out && !text.isEmpty())
    out->append({text, QFontMetricsF(p->font()).boundingRect(r, flags, text), static_cast<qreal>(p->font().pixelSize()), elided});
}

// One line of a label in `r`: the first form that fits at the painter's font, else at a smaller
// one (down to 80% of it, 9 px at least), and only when none fits, the last form elided. Returns what was drawn.
QString drawFitted(QPainter* p, const QRectF& r, const QStringList& forms, QList<DrawnLabel>* out,
                   int flags = Qt::AlignLeft | Qt::AlignVCenter) {
  const QFont original = p->font();
  QFont f = original;
  const int start = original.pixelSize();
  const int floor = std::max(kSmallestFittedPx, qRound(start * 0.8));
  // A shorter form at the full size before a longer one shrunk: the smallest text decides how
  // large the view must show the scene (SceneView::fit).
  for (int px = start; px >= floor; --px)
    for (const QString& text : forms) {
      f.setPixelSize(px);
      if (QFontMetricsF(f).horizontalAdvance(text) <= r.width()) {
        p->setFont(f);
        drawRecorded(p, r, flags, text, out);
        p->setFont(original);
        return text;
      }
    }
  f.setPixelSize(floor);
  p->setFont(f);
  const QString elided = QFontMetricsF(f).elidedText(forms.value(forms.size() - 1), Qt::ElideRight, r.width());
  drawRecorded(p, r, flags, elided, out, true);
  p->setFont(original);
  return elided;
}

// Wrapped text that must stay inside `r`: drawn at the painter's font, or smaller until it fits
// (a larger text scale must not push a note into the memory bar below it).
void drawWrappedFitted(QPainter* p, const QRectF& r, int flags, const QString& text, QList<DrawnLabel>* out) {
  QFont f = p->font();
  for (int px = f.pixelSize(); px > kSmallestFittedPx; --px) {
    f.setPixelSize(px);
    if (QFontMetricsF(f).boundingRect(r, flags, text).height() <= r.height() + 0.5) break;
  }
  p->setFont(f);
  drawRecorded(p, r, flags, text, out);
}

}  // namespace

void setSceneTextScale(QGraphicsScene* scene, qreal factor) { scene->setProperty(kTextScaleProperty, factor); }

qreal sceneTextScale(const QGraphicsScene* scene) {
  const QVariant factor = scene->property(kTextScaleProperty);
  return factor.isValid() ? factor.toReal() : 1.0;
}

namespace {

template <class Item>
void lowerToLabels(const QGraphicsItem* item, qreal& smallest) {
  if (const auto* typed = dynamic_cast<const Item*>(item))
    for (const DrawnLabel& label : typed->drawnLabels())
      if (label.pixelSize > 0) smallest = std::min(smallest, label.pixelSize * item->sceneTransform().m11());
}

}  // namespace

qreal smallestSceneTextPx(const QGraphicsScene* scene) {
  qreal smallest = std::numeric_limits<qreal>::max();
  for (const QGraphicsItem* item : scene->items()) {
    if (!item->isVisible() || item->effectiveOpacity() < 0.05) continue;
    if (const auto* text = dynamic_cast<const QGraphicsSimpleTextItem*>(item)) {
      if (!text->text().isEmpty() && text->font().pixelSize() > 0)
        smallest = std::min(smallest, text->font().pixelSize() * item->sceneTransform().m11());
      continue;
    }
    lowerToLabels<ChipItem>(item, smallest);
    lowerToLabels<DeviceBox>(item, smallest);
    lowerToLabels<HostBox>(item, smallest);
    lowerToLabels<InfoCard>(item, smallest);
  }
  return smallest == std::numeric_limits<qreal>::max() ? 0.0 : smallest;
}

QString shortLayerName(dpv::LayerKind kind) {
  switch (kind) {
    case dpv::LayerKind::BatchNorm1d:
    case dpv::LayerKind::BatchNorm2d: return QStringLiteral("BN");
    case dpv::LayerKind::Linear: return QStringLiteral("Linear");
    case dpv::LayerKind::Conv2d: return QStringLiteral("Conv");
    case dpv::LayerKind::Flatten: return QStringLiteral("Flat");
    case dpv::LayerKind::ReLU: return QStringLiteral("ReLU");
  }
  return QString();
}

// ---------------------------------------------------------------- ChipItem

ChipItem::ChipItem(const ChipView& view, qreal width, qreal height, const QString& theme, QGraphicsItem* parent)
    : QGraphicsObject(parent), view_(view), width_(width), height_(height), theme_(theme) {
  setCursor(Qt::PointingHandCursor);
  setAcceptedMouseButtons(Qt::LeftButton);
  setToolTip(chipHoverCard(view));
  setZValue(2);
}

void ChipItem::setView(const ChipView& view) {
  view_ = view;
  setToolTip(chipHoverCard(view));
  update();
}

void ChipItem::setHighlighted(bool highlighted) {
  highlighted_ = highlighted;
  update();
}

void ChipItem::setTheme(const QString& theme) {
  theme_ = theme;
  update();
}

void ChipItem::setSelectedChip(bool selected) {
  selected_ = selected;
  update();
}

QRectF ChipItem::boundingRect() const { return QRectF(-3, -3, width_ + 6, height_ + 6); }

void ChipItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const SceneColors& c = sceneColors(theme_);
  painter->setRenderHint(QPainter::Antialiasing);
  const QRectF r(0, 0, width_, height_);
  const QColor fill = view_.synthesized ? c.chipFor(view_.role) : c.memoryFor(view_.kind);
  painter->setPen(QPen(selected_ || highlighted_ ? c.accent : fill.darker(130), highlighted_ ? 3.0 : selected_ ? 2.0 : 1.0));
  painter->setBrush(fill);
  painter->drawRoundedRect(r, 5, 5);
  painter->setPen(c.chipText);
  painter->setFont(sceneFont(this, height_ < 22 ? 11 : 12));
  labels_.clear();
  drawn_ = {drawFitted(painter, r.adjusted(8, 0, -6, 0), QStringList{view_.text} + view_.shorterTexts, &labels_)};
}

void ChipItem::mousePressEvent(QGraphicsSceneMouseEvent* event) {
  emit clicked(this);
  event->accept();
}

// ---------------------------------------------------------------- HostBox

HostBox::HostBox(qreal width, const QString& theme) : width_(width), theme_(theme) {}

void HostBox::setContent(const QString& inputShape, const QString& inputDtype, const QString& targetShape,
                         const QString& transport) {
  inputShape_ = inputShape;
  inputDtype_ = inputDtype;
  targetShape_ = targetShape;
  transport_ = transport;
  update();
}

void HostBox::setTheme(const QString& theme) {
  theme_ = theme;
  update();
}

QPointF HostBox::batchAnchor() const { return mapToScene(QPointF(16, 44)); }

// ---------------------------------------------------------------- InfoCard

InfoCard::InfoCard(qreal width, const QString& theme) : width_(width), theme_(theme) { setVisible(false); }

void InfoCard::setContent(const QString& title, const QStringList& lines, const QStringList& shorterTitles) {
  title_ = title;
  shorterTitles_ = shorterTitles;
  lines_ = lines;
  setVisible(!title.isEmpty());
  update();
}

void InfoCard::setTheme(const QString& theme) {
  theme_ = theme;
  update();
}

QRectF InfoCard::boundingRect() const { return QRectF(0, 0, width_, HostBox::kHeight); }

void InfoCard::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const SceneColors& c = sceneColors(theme_);
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setPen(QPen(c.accent, 1.5));
  painter->setBrush(c.panel);
  painter->drawRoundedRect(boundingRect().adjusted(0.75, 0.75, -0.75, -0.75), 8, 8);
  painter->setPen(c.text);
  painter->setFont(sceneFont(this, 13, true));
  // The title may be said shorter ("Which samples went where" without "(torch.chunk)"); the numbers are whole.
  labels_.clear();
  drawn_ = {drawFitted(painter, QRectF(12, 5, width_ - 24, 18), QStringList{title_} + shorterTitles_, &labels_)};
  painter->setFont(sceneFont(this, 12));
  // The lines wrap rather than lose their ends (eight devices' terms are longer than half the
  // scene), shrinking to fit the card; every number stays whole.
  drawWrappedFitted(painter, QRectF(12, 24, width_ - 24, HostBox::kHeight - 28), Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap,
                    lines_.join(QLatin1Char('\n')), &labels_);
  drawn_ << lines_;
}

QRectF HostBox::boundingRect() const { return QRectF(0, 0, width_, kHeight); }

void HostBox::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const SceneColors& c = sceneColors(theme_);
  painter->setRenderHint(QPainter::Antialiasing);
  painter->setPen(QPen(c.panelBorder, 1));
  painter->setBrush(c.panel);
  painter->drawRoundedRect(boundingRect().adjusted(0.5, 0.5, -0.5, -0.5), 8, 8);
  painter->setPen(c.text);
  painter->setFont(sceneFont(this, 14, true));
  labels_.clear();
  drawRecorded(painter, QRectF(14, 8, width_ - 28, 20), Qt::AlignLeft | Qt::AlignVCenter, QObject::tr("Host (your Python program)"), &labels_);
  painter->setFont(sceneFont(this, 12));
  painter->setPen(c.subtext);
  const QStringList text = lines();
  drawn_ = {drawFitted(painter, QRectF(14, 32, width_ - 28, 18), {text.value(0)}, &labels_),
            drawFitted(painter, QRectF(14, 52, width_ - 28, 18), {text.value(1)}, &labels_)};
}

QStringList HostBox::lines() const {
  // The code's `.cuda()` copies the batch to GPU 0 before model(inputs): it is in GPU 0's memory.
  return {QObject::tr("batch %1 + labels %2 → GPU 0 by .cuda()").arg(inputShape_, targetShape_),
          QObject::tr("collectives between devices: %1").arg(transport_.isEmpty() ? QObject::tr("(not started)") : transport_)};
}

// ---------------------------------------------------------------- DeviceBox

BoxGeometry BoxGeometry::forDevices(int count) {
  if (count > 4) {
    //            width height titleH subT  repT repH chipT chipH step noteT memT
    return BoxGeometry{196, 274, 22, 0, 28, 38, 72, 20, 23, 212, 244, true};  // notes: two lines
  }
  return BoxGeometry{204, 340, 22, 28, 48, 44, 100, 24, 28, 272, 304, false};
}

DeviceBox::DeviceBox(int device, const std::vector<dpv::LayerKind>& layerKinds, const BoxGeometry& geometry,
                     const QString& theme)
    : device_(device), layerKinds_(layerKinds), g_(geometry), theme_(theme) {
  view_.device = device;
}

void DeviceBox::setView(const DeviceView& view, int activeLayer, qint64 memoryScale) {
  view_ = view;
  activeLayer_ = activeLayer;
  memoryScale_ = std::max<qint64>(1, memoryScale);
  QStringList parts;
  for (const MemoryPart& part : memoryParts(view)) {
    if (part.bytes > 0) parts << QObject::tr("%1: %2").arg(part.name, formatBytes(static_cast<double>(part.bytes)));
  }
  setToolTip(QObject::tr("%1 memory %2 (peak %3)\n%4")
                 .arg(view.title, formatBytes(static_cast<double>(view.memoryBytes)), formatBytes(static_cast<double>(view.memoryPeak)),
                      parts.isEmpty() ? QObject::tr("nothing allocated") : parts.join(QLatin1Char('\n'))));
  update();
}

QList<MemoryPart> memoryParts(const DeviceView& view) {
  using K = dpv::MemoryKind;
  const dpv::MemoryBreakdown& m = view.memory;
  QList<MemoryPart> parts = {{K::Parameters, QObject::tr("parameters"), m.parameters},
                             {K::Gradients, QObject::tr("gradients"), m.gradients},
                             {K::Activations, QObject::tr("activations"), m.activations},
                             {K::Optimizer, QObject::tr("optimizer state"), m.optimizer},
                             {K::Output, QObject::tr("gathered output"), m.output},
                             {K::Batch, QObject::tr("batch"), m.batch},
                             {K::Buckets, QObject::tr("DDP buckets"), m.buckets},
                             {K::Gathered, QObject::tr("gathered parameters"), m.gathered},
                             {std::nullopt, QObject::tr("other"), m.other}};
  if (m.total() == 0 && view.memoryBytes > 0) parts = {{std::nullopt, QObject::tr("allocations"), view.memoryBytes}};
  return parts;
}

void DeviceBox::setFailed(const QString& reason) {
  failure_ = reason;
  update();
}

QString DeviceBox::replicaTitle() const { return replicaTitleForms().constFirst(); }

QStringList DeviceBox::replicaTitleForms() const {
  if (view_.hasReplica) {
    if (device_ == 0) return {QObject::tr("replica 0 (the original)"), QObject::tr("replica 0 (original)")};
    return {QObject::tr("replica %1 (a copy)").arg(device_), QObject::tr("replica %1").arg(device_)};
  }
  // Shorter forms keep the text at its size in a narrow box (see drawFitted).
  if (device_ == 0) return {QObject::tr("the module (original weights)"), QObject::tr("the original module"), QObject::tr("the module")};
  if (view_.replicaDiscarded) return {QObject::tr("replica %1: discarded").arg(device_), QObject::tr("discarded")};
  if (view_.idle) return {QObject::tr("no replica (idle)"), QObject::tr("idle")};
  return {QObject::tr("no replica yet"), QObject::tr("no replica")};
}

void DeviceBox::setTheme(const QString& theme) {
  theme_ = theme;
  update();
}

QRectF DeviceBox::boundingRect() const { return QRectF(0, 0, g_.width, g_.height); }

void DeviceBox::paintLayers(QPainter* painter, const QRectF& area, const SceneColors& c) {
  const int n = static_cast<int>(layerKinds_.size());
  if (n == 0) return;
  const qreal gap = 3;
  const qreal w = (area.width() - gap * (n - 1)) / n;
  painter->setFont(sceneFont(this, n > 5 ? 9 : 11));
  for (int i = 0; i < n; ++i) {
    const QRectF r(area.left() + i * (w + gap), area.top(), w, area.height());
    const bool active = i == activeLayer_;
    painter->setPen(Qt::NoPen);
    painter->setBrush(active ? c.layerActive : c.layerPill);
    painter->drawRoundedRect(r, 3, 3);
    painter->setPen(active ? c.layerActiveText : c.subtext);
    const QString label = shortLayerName(layerKinds_.at(static_cast<size_t>(i)));
    if (QFontMetricsF(painter->font()).horizontalAdvance(label) <= r.width() - 2) drawRecorded(painter, r, Qt::AlignCenter, label, &labels_);
  }
}

void DeviceBox::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const SceneColors& c = sceneColors(theme_);
  const qreal W = g_.width;
  painter->setRenderHint(QPainter::Antialiasing);
  const QRectF box = boundingRect().adjusted(0.5, 0.5, -0.5, -0.5);
  const bool failed = !failure_.isEmpty();
  const QColor border = failed ? c.failed : (device_ == 0 ? c.accent : c.panelBorder);
  painter->setPen(QPen(border, failed || device_ == 0 ? 2.0 : 1.0));
  painter->setBrush(view_.idle ? c.idleFill : c.panel);
  painter->drawRoundedRect(box, 8, 8);

  // Title and what the device really is ("simulated on CPU"); one line in compact boxes.
  painter->setPen(view_.idle ? c.idleText : c.text);
  painter->setFont(sceneFont(this, g_.compact ? 14 : 15, true));
  const QFontMetricsF titleMetrics(painter->font());
  labels_.clear();
  drawRecorded(painter, QRectF(10, 6, W - 20, g_.titleH), Qt::AlignLeft | Qt::AlignVCenter, view_.title, &labels_);
  drawn_ = {view_.title};
  painter->setFont(sceneFont(this, 11));
  painter->setPen(c.subtext);
  // "simulated on CPU · output device", or where room is short the view's shorter forms (beside
  // the title of a small box: "on CPU"; the full text is in the box's hover card).
  const QStringList subtitleForms = QStringList{view_.subtitle} + view_.shorterSubtitles;
  if (g_.compact) {
    const qreal x = 10 + titleMetrics.horizontalAdvance(view_.title) + 8;
    drawn_ << drawFitted(painter, QRectF(x, 6, W - 10 - x, g_.titleH), subtitleForms, &labels_);
  } else {
    drawn_ << drawFitted(painter, QRectF(10, g_.subtitleTop, W - 20, 16), subtitleForms, &labels_);
  }

  // Replica panel: which copy of the module this device holds, and the layer running now.
  const QRectF replica(10, g_.replicaTop, W - 20, g_.replicaH);
  painter->setPen(QPen(c.panelBorder, 1, view_.hasReplica ? Qt::SolidLine : Qt::DashLine));
  painter->setBrush(Qt::NoBrush);
  painter->drawRoundedRect(replica, 5, 5);
  painter->setFont(sceneFont(this, 11));
  painter->setPen(view_.hasReplica ? c.text : c.subtext);
  const qreal pillH = g_.compact ? 14 : 16;
  drawn_ << drawFitted(painter, QRectF(replica.left() + 7, replica.top() + 2, replica.width() - 14, replica.height() - pillH - 6),
                       replicaTitleForms(), &labels_);
  if (view_.hasReplica || device_ == 0) {
    paintLayers(painter, QRectF(replica.left() + 7, replica.bottom() - pillH - 5, replica.width() - 14, pillH), c);
  }

  // Idle or failed: one clear line where the chips would be.
  if (view_.idle) {
    painter->setPen(c.idleText);
    painter->setFont(sceneFont(this, 16, true));
    drawRecorded(painter, QRectF(10, g_.chipTop + 4, W - 20, 24), Qt::AlignCenter, QObject::tr("idle"), &labels_);
    painter->setFont(sceneFont(this, 11));
    drawWrappedFitted(painter, QRectF(14, g_.chipTop + 30, W - 28, 48), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap,
               QObject::tr("no chunk of the batch: torch.chunk made fewer chunks than devices"), &labels_);
  }
  const QRectF noteRect(10, g_.noteTop, W - 20, g_.memoryTop - g_.noteTop - 2);
  if (failed) {
    painter->setPen(c.failed);
    painter->setFont(sceneFont(this, 11, true));
    drawWrappedFitted(painter, noteRect, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, failure_, &labels_);
  } else if (!view_.note.isEmpty()) {
    painter->setPen(c.subtext);
    painter->setFont(sceneFont(this, 11));
    drawWrappedFitted(painter, noteRect, Qt::AlignLeft | Qt::AlignTop | Qt::TextWordWrap, view_.note, &labels_);
  }

  // Memory bar: the engine's allocations on one scale for all devices, split into the parts the
  // chips hold (same colours), with the peak marked.
  painter->setFont(sceneFont(this, 11));
  painter->setPen(c.subtext);
  // Where room is short the peak goes (it is marked on the bar).
  const QString memory = QObject::tr("memory %1").arg(formatBytes(static_cast<double>(view_.memoryBytes)));
  drawn_ << drawFitted(painter, QRectF(10, g_.memoryTop, W - 20, 15),
                       {memory + QObject::tr(" · peak %1").arg(formatBytes(static_cast<double>(view_.memoryPeak))), memory}, &labels_);
  const QRectF track(10, g_.memoryTop + 17, W - 20, 9);
  painter->setPen(Qt::NoPen);
  painter->setBrush(c.memoryTrack);
  painter->drawRoundedRect(track, 3, 3);
  const qreal scale = static_cast<qreal>(memoryScale_);
  qreal x = track.left();
  for (const MemoryPart& part : memoryParts(view_)) {
    const qreal w = track.width() * std::clamp(static_cast<qreal>(part.bytes) / scale, 0.0, 1.0);
    if (w <= 0) continue;
    painter->setBrush(part.kind ? c.memoryFor(*part.kind) : c.memoryFill);
    painter->drawRect(QRectF(x, track.top(), std::max<qreal>(1.5, std::min(w, track.right() - x)), track.height()));
    x += w;
    if (x >= track.right()) break;
  }
  const qreal peak = std::clamp(static_cast<qreal>(view_.memoryPeak) / scale, 0.0, 1.0);
  if (peak > 0) {
    painter->setPen(QPen(c.memoryPeak, 2));
    const qreal px = track.left() + track.width() * peak;
    painter->drawLine(QPointF(px, track.top() - 2), QPointF(px, track.bottom() + 2));
  }
}

}  // namespace gui
