#include "gui/ring/ring_view.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QPainterPath>
#include <QtMath>

#include "gui/common/theme.h"

namespace gui {

namespace {

size_t ix(int i) { return static_cast<size_t>(i); }

QColor mix(const QColor& a, const QColor& b, double t) {
  return QColor::fromRgbF(static_cast<float>(a.redF() + (b.redF() - a.redF()) * t),
                          static_cast<float>(a.greenF() + (b.greenF() - a.greenF()) * t),
                          static_cast<float>(a.blueF() + (b.blueF() - a.blueF()) * t));
}

// An arrow head at `tip` pointing along `dir` (unit vector).
void drawHead(QPainter& p, QPointF tip, QPointF dir, double size) {
  const QPointF normal(-dir.y(), dir.x());
  QPolygonF head;
  head << tip << tip - dir * size + normal * size * 0.5 << tip - dir * size - normal * size * 0.5;
  p.drawPolygon(head);
}

}  // namespace

QString shortValue(double v) { return QString::number(v, 'g', 4); }

RingView::RingView(QWidget* parent) : QWidget(parent) {
  setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Expanding);
  setObjectName(QStringLiteral("ringView"));
}

void RingView::setDemo(std::shared_ptr<const dpv::course::RingDemo> demo) {
  demo_ = std::move(demo);
  frame_ = 0;
  update();
}

void RingView::setFrame(int frame) {
  if (!demo_) return;
  frame_ = std::clamp(frame, 0, static_cast<int>(demo_->frames.size()) - 1);
  update();
}

void RingView::setTheme(const QString& theme) {
  theme_ = theme;
  update();
}

double RingView::cellValue(int rank, int chunk) const {
  if (!demo_ || rank < 0 || rank >= demo_->world_size || chunk < 0 || chunk >= demo_->world_size) return qQNaN();
  const auto& values = demo_->frames[ix(frame_)].values[ix(rank)];
  const auto first = demo_->chunk_offsets[ix(chunk)];
  if (first >= demo_->chunk_offsets[ix(chunk) + 1] || ix(static_cast<int>(first)) >= values.size()) return qQNaN();
  return values[static_cast<size_t>(first)];
}

QString RingView::cellText(int rank, int chunk) const {
  const double v = cellValue(rank, chunk);
  return qIsNaN(v) ? QStringLiteral("—") : shortValue(v);
}

int RingView::cellContributors(int rank, int chunk) const {
  if (!demo_ || rank < 0 || rank >= demo_->world_size || chunk < 0 || chunk >= demo_->world_size) return 0;
  return static_cast<int>(demo_->frames[ix(frame_)].contributors[ix(rank)][ix(chunk)].size());
}

void RingView::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.setRenderHint(QPainter::Antialiasing);
  const SceneColors& c = sceneColors(theme_);
  p.fillRect(rect(), c.background);
  if (!demo_) {
    p.setPen(c.subtext);
    p.drawText(rect(), Qt::AlignCenter | Qt::TextWordWrap, tr("Press “Run the ring” to all-reduce a real gradient bucket."));
    return;
  }
  const auto& demo = *demo_;
  const int world = demo.world_size;
  const auto& frame = demo.frames[ix(frame_)];
  const QColor grad = c.chipGrad;

  QFont small = font();
  small.setPointSizeF(font().pointSizeF() * 0.85);

  // Right: the grid of every rank's bucket; left: the ring of ranks in the space that is left.
  const double rowLabelW = 58, headerH = 34, captionH = 36;
  const double cellW = std::clamp((width() * (world > 4 ? 0.7 : 0.62) - rowLabelW) / world, 40.0, 96.0);
  const double cellH = std::clamp((height() - headerH - captionH - 8) / world, 30.0, 58.0);
  const double gridW = rowLabelW + world * cellW, gridH = headerH + world * cellH;
  const double gx = width() - gridW - 8;
  const double gy = std::max(4.0, (height() - gridH - captionH) / 2);
  const double ringW = gx - 8;
  const QPointF centre(ringW / 2, height() / 2.0 - 10);
  const double radius = std::max(40.0, std::min(ringW, static_cast<double>(height())) / 2 - (world > 4 ? 30 : 48));
  const double node = std::clamp(radius * 0.2, 14.0, 24.0);
  std::vector<QPointF> at;
  for (int r = 0; r < world; ++r) {
    const double a = -M_PI / 2 + 2 * M_PI * r / world;
    at.emplace_back(centre.x() + radius * std::cos(a), centre.y() + radius * std::sin(a));
  }
  for (const auto& m : frame.moves) {
    const QPointF a = at[ix(m.from)], b = at[ix(m.to)];
    QPointF dir = b - a;
    const double len = std::hypot(dir.x(), dir.y());
    if (len < 1) continue;
    dir /= len;
    const QPointF s = a + dir * (node + 3), e = b - dir * (node + 3);
    // Bend outwards so the world arrows read as a ring.
    const QPointF mid = (s + e) / 2, out = mid - centre;
    const double outLen = std::hypot(out.x(), out.y());
    const QPointF ctrl = outLen > 1 ? mid + out / outLen * (world == 2 ? radius * 0.5 : radius * 0.18) : mid;
    QPainterPath path(s);
    path.quadTo(ctrl, e);
    p.setPen(QPen(c.accent, 2.2));
    p.setBrush(Qt::NoBrush);
    p.drawPath(path);
    QPointF tipDir = e - ctrl;
    tipDir /= std::max(1e-9, std::hypot(tipDir.x(), tipDir.y()));
    p.setBrush(c.accent);
    drawHead(p, e, tipDir, 9);
    p.setFont(small);
    p.setPen(c.text);
    const QPointF label = path.pointAtPercent(0.5) + (outLen > 1 ? out / outLen * 12 : QPointF());
    p.drawText(QRectF(label.x() - 40, label.y() - 9, 80, 18), Qt::AlignCenter,
               world > 4 ? tr("c%1").arg(m.chunk) : tr("chunk %1").arg(m.chunk));
  }
  p.setFont(font());
  for (int r = 0; r < world; ++r) {
    p.setPen(QPen(c.panelBorder, 1.5));
    p.setBrush(c.panel);
    p.drawEllipse(at[ix(r)], node, node);
    p.setPen(c.text);
    p.drawText(QRectF(at[ix(r)].x() - node, at[ix(r)].y() - node, 2 * node, 2 * node), Qt::AlignCenter, QString::number(r));
  }
  p.setPen(c.subtext);
  p.setFont(small);
  p.drawText(QRectF(4, centre.y() + radius + node + 8, ringW - 8, 36), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap,
             tr("ranks on the ring; arrows: this step's sends"));

  // Every rank's bucket, chunk by chunk.
  p.setFont(small);
  for (int ch = 0; ch < world; ++ch) {
    const QRectF h(gx + rowLabelW + ch * cellW, gy, cellW, headerH - 4);
    p.setPen(c.text);
    p.drawText(h, Qt::AlignHCenter | Qt::AlignTop, world > 4 ? tr("c%1").arg(ch) : tr("chunk %1").arg(ch));
    p.setPen(c.subtext);
    p.drawText(h, Qt::AlignHCenter | Qt::AlignBottom,
               tr("[%1, %2)").arg(demo.chunk_offsets[ix(ch)]).arg(demo.chunk_offsets[ix(ch) + 1]));
  }
  for (int r = 0; r < world; ++r) {
    const double y = gy + headerH + r * cellH;
    p.setPen(c.text);
    p.drawText(QRectF(gx, y, rowLabelW - 6, cellH), Qt::AlignVCenter | Qt::AlignRight, tr("rank %1").arg(r));
    int received = -1;
    if (!frame.moves.empty())
      for (const auto& m : frame.moves)
        if (m.to == r) received = m.chunk;
    for (int ch = 0; ch < world; ++ch) {
      const QRectF cell(gx + rowLabelW + ch * cellW + 2, y + 2, cellW - 4, cellH - 4);
      const int n = cellContributors(r, ch);
      const double share = world > 1 ? static_cast<double>(n - 1) / (world - 1) : 1.0;
      p.setBrush(mix(c.panel, grad, 0.15 + 0.75 * share));
      p.setPen(ch == received ? QPen(c.accent, 2.6) : QPen(c.panelBorder, 1));
      p.drawRoundedRect(cell, 4, 4);
      QStringList who;
      for (int q : frame.contributors[ix(r)][ix(ch)]) who << QString::number(q);
      p.setPen(share > 0.6 ? c.chipText : c.text);
      // Narrow cells (many ranks) get a smaller font and a count instead of the list of ranks.
      const QString value = cellText(r, ch);
      QFont valueFont = font();
      while (QFontMetricsF(valueFont).horizontalAdvance(value) > cell.width() - 4 && valueFont.pointSizeF() > 6)
        valueFont.setPointSizeF(valueFont.pointSizeF() - 0.5);
      p.setFont(valueFont);
      p.drawText(cell.adjusted(1, 1, -1, -cell.height() / 2 + 2), Qt::AlignCenter, value);
      p.setFont(small);
      QString sigma = n == world ? tr("Σ all %1").arg(world) : QStringLiteral("Σ ") + who.join(QLatin1Char(','));
      if (QFontMetricsF(small).horizontalAdvance(sigma) > cell.width() - 4) sigma = tr("Σ %1 of %2").arg(n).arg(world);
      if (QFontMetricsF(small).horizontalAdvance(sigma) > cell.width() - 4) sigma = tr("%1/%2").arg(n).arg(world);
      p.drawText(cell.adjusted(1, cell.height() / 2 - 2, -1, -1), Qt::AlignCenter, sigma);
    }
  }
  p.setPen(c.subtext);
  p.setFont(small);
  p.drawText(QRectF(gx, gy + gridH + 4, gridW, captionH), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap,
             tr("Each cell: the chunk's first value as the engine's ring left it; Σ: the ranks whose gradients it "
                "holds. Outlined: the chunk received in this step."));
}

}  // namespace gui
