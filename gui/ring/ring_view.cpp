#include "gui/ring/ring_view.h"

#include "gui/common/chart_style.h"

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

// The geometry of one paint: the grid of buckets on the right, the ring of ranks in the space left
// of it, and the smaller font the labels use.
struct RingView::Layout {
  int world = 0;
  QFont small;
  double rowLabelW = 58, headerH = 34, captionH = 52;  // the caption: three lines under a narrow grid
  double cellW = 0, cellH = 0, gridW = 0, gridH = 0, gx = 0, gy = 0;
  double ringW = 0, radius = 0, node = 0;
  QPointF centre;
  std::vector<QPointF> at;  // each rank's place on the ring
};

RingView::Layout RingView::computeLayout() const {
  Layout l;
  const int world = demo_->world_size;
  l.world = world;
  l.small = font();
  l.small.setPointSizeF(std::max(kMinChartTextPt, font().pointSizeF() * 0.85));
  // Right: the grid of every rank's bucket; left: the ring of ranks in the space that is left.
  // Many ranks: the grid takes more of the width (the ring is smaller) and row labels are short,
  // so a cell holds a value of a few digits at 9 pt.
  if (world > 4) l.rowLabelW = 30;
  l.cellW = std::clamp((width() * (world > 4 ? 0.78 : 0.62) - l.rowLabelW) / world, 40.0, 96.0);
  l.cellH = std::clamp((height() - l.headerH - l.captionH - 8) / world, 30.0, 58.0);
  l.gridW = l.rowLabelW + world * l.cellW;
  l.gridH = l.headerH + world * l.cellH;
  l.gx = width() - l.gridW - 8;
  l.gy = std::max(4.0, (height() - l.gridH - l.captionH) / 2);
  l.ringW = l.gx - 8;
  l.centre = QPointF(l.ringW / 2, height() / 2.0 - 10);
  // Room around the ring for the chunk labels beside the nodes (a narrow ring area with 8 ranks).
  l.radius = std::max(28.0, std::min(l.ringW, static_cast<double>(height())) / 2 - (world > 4 ? 36 : 48));
  l.node = std::clamp(l.radius * 0.2, 12.0, 24.0);
  for (int r = 0; r < world; ++r) {
    const double a = -M_PI / 2 + 2 * M_PI * r / world;
    l.at.emplace_back(l.centre.x() + l.radius * std::cos(a), l.centre.y() + l.radius * std::sin(a));
  }
  return l;
}

// The helpers run in this order and rely on the painter's pen, brush and font each one leaves
// behind (the grid's row labels, for one, use the small font the header set), so the picture is
// the one a single pass drew.
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
  const Layout l = computeLayout();
  smallestDrawnPt_ = std::min(font().pointSizeF(), l.small.pointSizeF());
  cutCells_ = 0;
  drawMoves(p, l, c);
  drawRanks(p, l, c);
  drawHeader(p, l, c);
  drawCells(p, l, c);
  drawCaption(p, l, c);
}

void RingView::drawMoves(QPainter& p, const Layout& l, const SceneColors& c) const {
  for (const auto& m : demo_->frames[ix(frame_)].moves) drawMove(p, l, c, m);
}

// One send: a curved arrow from rank to rank, labelled with the chunk it carries.
void RingView::drawMove(QPainter& p, const Layout& l, const SceneColors& c, const dpv::course::RingMove& m) const {
  const QPointF a = l.at[ix(m.from)], b = l.at[ix(m.to)];
  QPointF dir = b - a;
  const double len = std::hypot(dir.x(), dir.y());
  if (len < 1) return;
  dir /= len;
  const QPointF s = a + dir * (l.node + 3), e = b - dir * (l.node + 3);
  // Bend outwards so the world arrows read as a ring.
  const QPointF mid = (s + e) / 2, out = mid - l.centre;
  const double outLen = std::hypot(out.x(), out.y());
  const QPointF ctrl = outLen > 1 ? mid + out / outLen * (l.world == 2 ? l.radius * 0.5 : l.radius * 0.18) : mid;
  QPainterPath path(s);
  path.quadTo(ctrl, e);
  p.setPen(QPen(c.accent, 2.2));
  p.setBrush(Qt::NoBrush);
  p.drawPath(path);
  QPointF tipDir = e - ctrl;
  tipDir /= std::max(1e-9, std::hypot(tipDir.x(), tipDir.y()));
  p.setBrush(c.accent);
  drawHead(p, e, tipDir, 9);
  p.setFont(l.small);
  p.setPen(c.text);
  const QPointF label = path.pointAtPercent(0.5) + (outLen > 1 ? out / outLen * 12 : QPointF());
  p.drawText(QRectF(label.x() - 40, label.y() - 9, 80, 18), Qt::AlignCenter,
             l.world > 4 ? tr("c%1").arg(m.chunk) : tr("chunk %1").arg(m.chunk));
}

// The ranks as numbered circles on top of the arrows, and the ring's caption under them.
void RingView::drawRanks(QPainter& p, const Layout& l, const SceneColors& c) const {
  p.setFont(font());
  for (int r = 0; r < l.world; ++r) {
    p.setPen(QPen(c.panelBorder, 1.5));
    p.setBrush(c.panel);
    p.drawEllipse(l.at[ix(r)], l.node, l.node);
    p.setPen(c.text);
    p.drawText(QRectF(l.at[ix(r)].x() - l.node, l.at[ix(r)].y() - l.node, 2 * l.node, 2 * l.node), Qt::AlignCenter,
               QString::number(r));
  }
  p.setPen(c.subtext);
  p.setFont(l.small);
  p.drawText(QRectF(4, l.centre.y() + l.radius + l.node + 8, l.ringW - 8, 56),
             Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap, tr("ranks on the ring; arrows: this step's sends"));
}

// The grid's column headers: each chunk's name and the range of the bucket it covers.
void RingView::drawHeader(QPainter& p, const Layout& l, const SceneColors& c) const {
  const auto& demo = *demo_;
  p.setFont(l.small);
  for (int ch = 0; ch < l.world; ++ch) {
    const QRectF h(l.gx + l.rowLabelW + ch * l.cellW, l.gy, l.cellW, l.headerH - 4);
    p.setPen(c.text);
    p.drawText(h, Qt::AlignHCenter | Qt::AlignTop, l.world > 4 ? tr("c%1").arg(ch) : tr("chunk %1").arg(ch));
    p.setPen(c.subtext);
    p.drawText(h, Qt::AlignHCenter | Qt::AlignBottom,
               tr("[%1, %2)").arg(demo.chunk_offsets[ix(ch)]).arg(demo.chunk_offsets[ix(ch) + 1]));
  }
}

// Every rank's bucket, chunk by chunk: a row per rank, its label on the left.
void RingView::drawCells(QPainter& p, const Layout& l, const SceneColors& c) const {
  const auto& frame = demo_->frames[ix(frame_)];
  for (int r = 0; r < l.world; ++r) {
    const double y = l.gy + l.headerH + r * l.cellH;
    p.setPen(c.text);
    p.drawText(QRectF(l.gx, y, l.rowLabelW - 6, l.cellH), Qt::AlignVCenter | Qt::AlignRight,
               l.world > 4 ? tr("r%1").arg(r) : tr("rank %1").arg(r));
    int received = -1;
    if (!frame.moves.empty())
      for (const auto& m : frame.moves)
        if (m.to == r) received = m.chunk;
    for (int ch = 0; ch < l.world; ++ch) drawCell(p, l, c, r, ch, ch == received);
  }
}

// One cell: shaded by how many ranks' gradients it holds, the value on top and who it holds below;
// outlined when it is the chunk the rank just received.
void RingView::drawCell(QPainter& p, const Layout& l, const SceneColors& c, int rank, int chunk, bool received) const {
  const int world = l.world;
  const double y = l.gy + l.headerH + rank * l.cellH;
  const QRectF cell(l.gx + l.rowLabelW + chunk * l.cellW + 2, y + 2, l.cellW - 4, l.cellH - 4);
  const int n = cellContributors(rank, chunk);
  const double share = world > 1 ? static_cast<double>(n - 1) / (world - 1) : 1.0;
  p.setBrush(mix(c.panel, c.chipGrad, 0.15 + 0.75 * share));
  p.setPen(received ? QPen(c.accent, 2.6) : QPen(c.panelBorder, 1));
  p.drawRoundedRect(cell, 4, 4);
  QStringList who;
  for (int q : demo_->frames[ix(frame_)].contributors[ix(rank)][ix(chunk)]) who << QString::number(q);
  p.setPen(share > 0.6 ? c.chipText : c.text);
  // Narrow cells (many ranks): fewer significant digits first, then a smaller font (9 pt at
  // least), and a count instead of the list of ranks.
  const double v = cellValue(rank, chunk);
  QString value = cellText(rank, chunk);
  QFont valueFont = font();
  auto tooWide = [&] { return QFontMetricsF(valueFont).horizontalAdvance(value) > cell.width() - 4; };
  for (int digits = 3; digits >= 1 && !qIsNaN(v) && tooWide(); --digits) value = QString::number(v, 'g', digits);
  while (tooWide() && valueFont.pointSizeF() > kMinChartTextPt) valueFont.setPointSizeF(valueFont.pointSizeF() - 0.5);
  smallestDrawnPt_ = std::min(smallestDrawnPt_, valueFont.pointSizeF());
  if (tooWide()) ++cutCells_;
  p.setFont(valueFont);
  p.drawText(cell.adjusted(1, 1, -1, -cell.height() / 2 + 2), Qt::AlignCenter, value);
  p.setFont(l.small);
  QString sigma = n == world ? tr("Σ all %1").arg(world) : QStringLiteral("Σ ") + who.join(QLatin1Char(','));
  if (QFontMetricsF(l.small).horizontalAdvance(sigma) > cell.width() - 4) sigma = tr("Σ %1 of %2").arg(n).arg(world);
  if (QFontMetricsF(l.small).horizontalAdvance(sigma) > cell.width() - 4) sigma = tr("%1/%2").arg(n).arg(world);
  p.drawText(cell.adjusted(1, cell.height() / 2 - 2, -1, -1), Qt::AlignCenter, sigma);
}

// The grid's caption: how to read a cell.
void RingView::drawCaption(QPainter& p, const Layout& l, const SceneColors& c) const {
  p.setPen(c.subtext);
  p.setFont(l.small);
  p.drawText(QRectF(l.gx, l.gy + l.gridH + 4, l.gridW, l.captionH), Qt::AlignHCenter | Qt::AlignTop | Qt::TextWordWrap,
             tr("Each cell: the chunk's first value as the engine's ring left it; Σ: the ranks whose gradients it "
                "holds. Outlined: the chunk received in this step."));
}

}  // namespace gui
