// The sharded strategies' line under each rank's row of the DDP view: ZeRO-1's parameters with the
// ones whose optimizer state and step this rank owns filled in, or ZeRO-2/3's flat parameter and
// flat gradient as bars cut into one slice per rank (this rank's filled, the others only while
// gathered, the padding at the end hatched), the parameters' boundaries marked; and every rank's
// memory bar by kind. Then the flights between ranks of the sharded stages: the all-gather's
// slices, the reduce-scatter's gradient slices, the step inside the own slice, and ZeRO-1's
// broadcast of each parameter from its owner.
#include <QBrush>
#include <algorithm>
#include <QFontMetricsF>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QParallelAnimationGroup>
#include <QPen>

#include "gui/common/scene_model.h"
#include "gui/common/theme.h"
#include "gui/ddp/scene.h"
#include "gui/ddp/scene_geometry.h"

namespace gui {

using namespace ddp_geometry;

namespace {

// Where the line's parts go, from the row's left edge.
constexpr qreal kMemX = kRankX + 12, kMemW = 110;  // the memory bar, under the rank's name
constexpr qreal kBarLabelX = kShardX;               // "param" / "grad"
constexpr qreal kBarX = kShardX + 40;
constexpr qreal kBarW = kRingX - 86 - kBarX;        // leaves room for "padding (n)" before the ring
constexpr qreal kBarH = 14;

QString sliceWord(const FlatParamView& f, int slice, int rank) {
  if (slice == rank) return QStringLiteral("own");
  return f.fullParams ? QStringLiteral("gathered") : QStringLiteral("freed");
}

QString gradWord(const FlatParamView& f, int slice, int rank) {
  if (f.fullGrads) return QStringLiteral("local");
  if (f.gradShardAveraged && slice == rank) return QStringLiteral("averaged");
  return QStringLiteral("none");
}

}  // namespace

qreal DdpScene::rowH() const { return shardedStrategy(state_.strategy) ? kRowH + kShardLineH : kRowH; }

void DdpScene::drawShardLine(const DdpRankView& rank, qreal top) {
  const qreal y = top + kRowH - 4;  // the line's top, under the values
  drawMemoryBar(rank, kMemX, y, kMemW);
  if (rank.flat) {
    drawFlatBar(rank, kBarX, y + 2, kBarW, false);
    drawFlatBar(rank, kBarX, y + 2 + kBarH + 4, kBarW, true);
  } else {
    drawParamChips(rank, kBarX, y + 2, kRingX - 8 - kBarX);
  }
}

void DdpScene::drawFlatBar(const DdpRankView& rank, qreal x, qreal y, qreal w, bool grads) {
  const SceneColors& c = sceneColors(theme_);
  const FlatParamView& f = *rank.flat;
  const bool dark = theme_ == QLatin1String("dark");
  text(grads ? tr("grad") : tr("param"), kBarLabelX, y, c.subtext, 10);
  if (f.paddedNumel <= 0) return;
  const qreal perElement = w / static_cast<qreal>(f.paddedNumel);
  QList<QGraphicsRectItem*> slices;
  for (int s = 0; s < f.world; ++s) {
    const QRectF r(x + s * f.shardNumel * perElement, y, f.shardNumel * perElement, kBarH);
    const QString word = grads ? gradWord(f, s, rank.rank) : sliceWord(f, s, rank.rank);
    const bool filled = word != QLatin1String("freed") && word != QLatin1String("none");
    QColor fill = grads ? c.memoryFor(dpv::MemoryKind::Gradients) : rankColor(s);
    if (!grads && s != rank.rank) fill = dark ? fill.darker(150) : fill.lighter(130);  // another rank's slice
    if (grads && word == QLatin1String("averaged")) fill = c.chipGrad.darker(dark ? 80 : 125);
    auto* item = box(r, filled ? fill : c.idleFill, s == rank.rank ? c.text : c.panelBorder);
    if (s == rank.rank) item->setPen(QPen(c.text, 2));
    const QString description = tr("slice %1: %2").arg(s).arg(word);
    item->setData(kDescription, description);
    const QString head = grads ? f.gradHead : f.shardHead;
    item->setToolTip(tr("%1 — elements %2…%3 of the flat %4%5")
                         .arg(description)
                         .arg(s * f.shardNumel)
                         .arg((s + 1) * f.shardNumel - 1)
                         .arg(grads ? tr("gradient") : tr("parameter"))
                         .arg(s == rank.rank && !head.isEmpty() ? tr("\nfirst values: %1").arg(head) : QString()));
    slices.append(item);
  }
  // The parameters' boundaries, and their names under the gradient bar where they fit.
  for (const FlatEntryView& e : f.entries) {
    const qreal ex = x + e.offset * perElement;
    if (e.offset > 0) addLine(QLineF(origin_ + QPointF(ex, y - 2), origin_ + QPointF(ex, y + kBarH + 2)), QPen(c.text, 1));
    const qreal ew = e.numel * perElement;
    if (grads && ew >= 30) {
      QString name = e.name;
      QFont f10;
      f10.setPixelSize(10);
      name = QFontMetricsF(f10).elidedText(name, Qt::ElideRight, ew - 3);
      text(name, ex + 2, y + kBarH + 1, c.subtext, 10);
    }
  }
  if (f.padding > 0) {
    const QRectF pad(x + (f.paddedNumel - f.padding) * perElement, y, std::max<qreal>(2, f.padding * perElement), kBarH);
    auto* hatch = box(pad, QColor(), QColor());
    hatch->setBrush(QBrush(c.text, Qt::BDiagPattern));
    hatch->setToolTip(tr("padding: %1 zeros so the flat parameter divides into %2 equal slices").arg(f.padding).arg(f.world));
    if (!grads) paddingTexts_.insert(rank.rank, text(tr("padding (%1)").arg(f.padding), x + w + 4, y, c.subtext, 10));
  }
  (grads ? gradSlices_ : flatSlices_).insert(rank.rank, slices);
}

void DdpScene::drawParamChips(const DdpRankView& rank, qreal x, qreal y, qreal w) {
  const SceneColors& c = sceneColors(theme_);
  text(tr("steps"), kBarLabelX, y + 2, c.subtext, 10);
  const int n = static_cast<int>(state_.params.size());
  if (n == 0) return;
  const qreal gap = 3;
  const qreal cw = std::min<qreal>(110, (w - gap * (n - 1)) / n);
  QList<QGraphicsRectItem*> chips;
  QFont font;
  font.setPixelSize(10);
  for (int i = 0; i < n; ++i) {
    const QString& name = state_.params[i];
    const bool owned = rank.ownedParams.contains(name);
    auto* chip = box(QRectF(x + i * (cw + gap), y, cw, 18), owned ? rankColor(rank.rank) : c.idleFill, owned ? QColor() : c.panelBorder);
    chip->setData(kDescription, owned ? tr("%1: owned").arg(name) : name);
    chip->setToolTip(owned ? tr("%1: this rank keeps its optimizer state, steps it and broadcasts it").arg(name)
                           : tr("%1: another rank steps it; this rank receives it in the broadcast").arg(name));
    const QString shown = QFontMetricsF(font).elidedText(name, Qt::ElideRight, cw - 4);
    text(shown, x + i * (cw + gap) + 2, y + 3, owned ? c.chipText : c.subtext, 10, owned)->setParentItem(chip);
    chips.append(chip);
  }
  paramChips_.insert(rank.rank, chips);
  text(tr("owns %1 of %2 parameters: its optimizer state and step").arg(rank.ownedParams.size()).arg(n), x, y + 22, c.subtext, 10);
}

void DdpScene::drawMemoryBar(const DdpRankView& rank, qreal x, qreal y, qreal w) {
  if (!rank.memory) return;
  const SceneColors& c = sceneColors(theme_);
  DeviceView view;
  view.memory = *rank.memory;
  const qint64 total = rank.memory->total();
  text(tr("memory %1").arg(formatBytes(static_cast<double>(total))), x, y + 2, c.subtext, 10);
  const qreal scale = w / static_cast<qreal>(std::max<qint64>({state_.memoryScale, total, 1}));
  auto* track = box(QRectF(x, y + 18, w, 10), c.memoryTrack, c.panelBorder);
  track->setData(kDescription, tr("memory %1").arg(formatBytes(static_cast<double>(total))));
  QStringList parts;
  qreal px = x;
  for (const MemoryPart& part : memoryParts(view)) {
    if (part.bytes <= 0) continue;
    const qreal pw = part.bytes * scale;
    box(QRectF(px, y + 18, pw, 10), part.kind ? c.memoryFor(*part.kind) : c.memoryFill, QColor())->setParentItem(track);
    px += pw;
    parts << tr("%1: %2").arg(part.name, formatBytes(static_cast<double>(part.bytes)));
  }
  track->setToolTip(tr("rank %1's memory after this stage\n%2").arg(rank.rank).arg(parts.join(QLatin1Char('\n'))));
  memoryBars_.insert(rank.rank, track);
}

void DdpScene::drawMemoryLegend(qreal top) {
  const SceneColors& c = sceneColors(theme_);
  using K = dpv::MemoryKind;
  qreal x = kMargin;
  text(tr("memory:"), x, top + 2, c.subtext, 10);
  x += 52;
  QFont font;
  font.setPixelSize(10);
  for (K kind : {K::Parameters, K::Gathered, K::Gradients, K::Optimizer, K::Activations, K::Batch, K::Output, K::Buckets}) {
    box(QRectF(x, top + 4, 10, 10), c.memoryFor(kind), c.panelBorder);
    const QString name = QString::fromLatin1(dpv::memory_kind_name(kind));
    text(name, x + 14, top + 2, c.subtext, 10);
    x += 14 + QFontMetricsF(font).horizontalAdvance(name) + 12;
  }
}

void DdpScene::addShardFlights(const DdpSceneState& previous) {
  using K = dpv::StageKind;
  const int world = static_cast<int>(state_.ranks.size());
  auto at = [](const QGraphicsItem* item) { return item ? item->sceneBoundingRect().topLeft() : QPointF(); };
  switch (state_.kind) {
    case K::GatherParams:
      // Every rank's slice to every other rank: the full bar fills slice by slice.
      for (int r = 0; r < world; ++r) {
        const QList<QGraphicsRectItem*> mine = flatSlices_.value(r);
        for (int s = 0; s < mine.size(); ++s) {
          const QGraphicsRectItem* from = flatSlices_.value(s).value(s);
          if (s == r || !from) continue;
          addFlight(tr("s%1").arg(s), dpv::TensorRole::Param, {at(from), at(mine[s])}, kSmallChip, 0);
          revealOnArrival(mine[s], 0);
        }
      }
      break;
    case K::ReduceScatter:
      // Each rank's local gradient slice s goes to rank s, which keeps the average.
      for (int r = 0; r < world; ++r) {
        const bool hadFull = r < previous.ranks.size() && previous.ranks[r].flat && previous.ranks[r].flat->fullGrads;
        for (int s = 0; s < world && hadFull; ++s) {
          const QGraphicsRectItem* from = gradSlices_.value(r).value(s);
          const QGraphicsRectItem* to = gradSlices_.value(s).value(s);
          if (s == r || !from || !to) continue;
          addFlight(tr("g%1").arg(s), dpv::TensorRole::Grad, {at(from), at(to)}, kSmallChip, 0);
        }
      }
      break;
    case K::Step:
      for (int r = 0; r < world; ++r) {
        if (state_.ranks[r].flat) {
          const QGraphicsRectItem* g = gradSlices_.value(r).value(r);
          const QGraphicsRectItem* p = flatSlices_.value(r).value(r);
          if (g && p) addFlight(tr("−lr·grad"), dpv::TensorRole::Grad, {at(g), at(p)}, kSmallChip, 0);
          continue;
        }
        const QList<QGraphicsRectItem*> chips = paramChips_.value(r);
        for (int i = 0; i < chips.size(); ++i) {
          if (!state_.ranks[r].ownedParams.contains(state_.params.value(i)) || !grads_.value(r)) continue;
          addFlight(tr("−lr·grad"), dpv::TensorRole::Grad, {at(grads_.value(r)), at(chips[i])}, kSmallChip, 0);
        }
      }
      break;
    case K::BroadcastParams:
      // Each parameter from the rank that stepped it to every other rank.
      for (int owner = 0; owner < world; ++owner) {
        const QList<QGraphicsRectItem*> chips = paramChips_.value(owner);
        for (int i = 0; i < chips.size(); ++i) {
          if (!state_.ranks[owner].ownedParams.contains(state_.params.value(i))) continue;
          for (int r = 0; r < world; ++r) {
            const QGraphicsRectItem* to = paramChips_.value(r).value(i);
            if (r != owner && to)  // the chip the size of the parameter's, so its name stays whole
              addFlight(state_.params.value(i), dpv::TensorRole::Param, {at(chips[i]), at(to)}, chips[i]->rect().size(), 0);
          }
        }
      }
      break;
    default: break;
  }
}

}  // namespace gui
