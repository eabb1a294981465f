#include "gui/ddp/scene.h"

#include <QFont>
#include <QGraphicsRectItem>
#include <QGraphicsSimpleTextItem>
#include <QPen>

#include "gui/app/theme.h"
#include "gui/iteration/scene_model.h"

namespace gui {

namespace {

constexpr qreal kMargin = 16;
constexpr qreal kHeaderH = 112;
constexpr qreal kRowH = 88;
constexpr qreal kRowGap = 8;
// Columns of a rank row: first line rank, shard, activity, buckets; second line the values.
constexpr qreal kRankX = kMargin;
constexpr qreal kShardX = 150, kShardW = 168;
constexpr qreal kActX = 328, kActW = 150;
constexpr qreal kBucketX = 488, kBucketW = 272;
constexpr qreal kValuesY = 66;  // the second line, below the cells
constexpr qreal kWidth = kBucketX + kBucketW + kMargin;

QColor phaseColor(BucketPhase phase, const SceneColors& c) {
  switch (phase) {
    case BucketPhase::Empty: return c.idleFill;
    case BucketPhase::Filling: return QColor(0xe8, 0xa3, 0x3d);
    case BucketPhase::Waiting: return QColor(0xd6, 0x6b, 0x2f);
    case BucketPhase::AllReducing: return QColor(0x2f, 0x6f, 0xd6);
    case BucketPhase::Done: return QColor(0x3f, 0xa3, 0x5b);
  }
  return c.idleFill;
}

const QColor kPadding(0xc2, 0x41, 0x41);
const QColor kEqual(0x3f, 0xa3, 0x5b);
const QColor kDiffer(0xd6, 0x6b, 0x2f);

}  // namespace

QColor DdpScene::rankColor(int rank) {
  static const QColor colors[] = {QColor(0x4c, 0x78, 0xa8), QColor(0xf5, 0x85, 0x18), QColor(0x54, 0xa2, 0x4b),
                                  QColor(0xb2, 0x79, 0xa2), QColor(0x9d, 0x75, 0x5d), QColor(0x72, 0xb7, 0xb2),
                                  QColor(0xe4, 0x57, 0x56), QColor(0xba, 0xb0, 0xac)};
  return colors[((rank % 8) + 8) % 8];
}

DdpScene::DdpScene(QObject* parent) : QGraphicsScene(parent) { setTheme(theme_); }

void DdpScene::setTheme(const QString& theme) {
  theme_ = theme;
  setBackgroundBrush(sceneColors(theme).background);
  rebuild();
}

void DdpScene::setInfo(const IterationInfo& info) {
  info_ = info;
  showState(ddpSceneStateFor(info, nullptr));
}

void DdpScene::showState(const DdpSceneState& state) {
  state_ = state;
  rebuild();
}

QGraphicsSimpleTextItem* DdpScene::text(const QString& s, qreal x, qreal y, const QColor& color, int px, bool bold) {
  auto* t = addSimpleText(s);
  QFont f = t->font();
  f.setPixelSize(px);
  f.setBold(bold);
  t->setFont(f);
  t->setBrush(color);
  t->setPos(x, y);
  return t;
}

QGraphicsRectItem* DdpScene::box(const QRectF& r, const QColor& fill, const QColor& border, qreal) {
  auto* b = addRect(r, border.isValid() ? QPen(border, 1) : QPen(Qt::NoPen), fill);
  return b;
}

void DdpScene::rebuild() {
  clear();
  buckets_.clear();
  samples_.clear();
  grads_.clear();
  buffers_.clear();
  activities_.clear();
  headline_ = nullptr;
  const SceneColors& c = sceneColors(theme_);
  const int n = static_cast<int>(state_.ranks.size());
  const qreal height = kHeaderH + n * (kRowH + kRowGap) + kMargin;
  setSceneRect(0, 0, kWidth, height);
  headline_ = text(state_.headline, kMargin, kMargin - 4, c.text, 13, true);
  drawBatchStrips(kMargin + 24);
  for (int r = 0; r < n; ++r) drawRank(state_.ranks[r], kHeaderH + r * (kRowH + kRowGap));
}

void DdpScene::drawBatchStrips(qreal top) {
  const SceneColors& c = sceneColors(theme_);
  const int W = static_cast<int>(state_.ranks.size());
  if (W == 0 || state_.batchRows <= 0) return;
  // DDP: the padded index list, position p going to rank p % W.
  const qint64 perRank = (state_.batchRows + W - 1) / W;
  const qint64 total = perRank * W;
  const qreal labelW = 160;
  const qreal cell = std::min<qreal>(26, (kWidth - kMargin - kMargin - labelW) / static_cast<qreal>(total));
  const bool numbers = cell >= 15;
  text(tr("DistributedSampler"), kMargin, top + 3, c.subtext, 12, true);
  for (qint64 p = 0; p < total; ++p) {
    const qint64 sample = p % state_.batchRows;
    const bool pad = p >= state_.batchRows;
    const int rank = static_cast<int>(p % W);
    const QColor fill = state_.sampled ? rankColor(rank) : c.idleFill;
    auto* b = box(QRectF(kMargin + labelW + p * cell, top, cell - 1, 22), fill, pad ? kPadding : QColor());
    if (pad) b->setPen(QPen(kPadding, 2, Qt::DashLine));
    b->setToolTip(pad ? tr("sample %1 again (padding), to rank %2").arg(sample).arg(rank)
                      : tr("sample %1 to rank %2").arg(sample).arg(rank));
    if (numbers) text(QString::number(sample), kMargin + labelW + p * cell + 2, top + 4, c.chipText, 10);
  }
  // DataParallel: contiguous torch.chunk pieces of the same batch.
  const qreal y2 = top + 30;
  text(tr("DataParallel (contrast)"), kMargin, y2 + 3, c.subtext, 12);
  qint64 start = 0;
  for (int k = 0; k < state_.dpChunks.size(); ++k) {
    for (qint64 i = start; i < start + state_.dpChunks[k]; ++i) {
      auto* b = box(QRectF(kMargin + labelW + i * cell, y2, cell - 1, 22), rankColor(k).lighter(150), QColor());
      b->setToolTip(tr("DataParallel would scatter sample %1 to device %2").arg(i).arg(k));
      if (numbers) text(QString::number(i), kMargin + labelW + i * cell + 2, y2 + 4, c.subtext, 10);
    }
    start += state_.dpChunks[k];
  }
  text(tr("strided shards (rank r: r, r+%1, …), padded to %2; DataParallel: contiguous chunks")
           .arg(W)
           .arg(total),
       kMargin, y2 + 28, c.subtext, 11);
}

void DdpScene::drawRank(const DdpRankView& rank, qreal top) {
  const SceneColors& c = sceneColors(theme_);
  auto* panel = box(QRectF(kMargin - 6, top, kWidth - 2 * kMargin + 12, kRowH), c.panel, c.panelBorder);
  panel->setZValue(-1);
  // Rank label with its colour.
  box(QRectF(kRankX, top + 8, 6, kRowH - 16), rankColor(rank.rank), QColor());
  text(rank.title, kRankX + 12, top + 6, c.text, 15, true);
  text(splitDeviceLabel(rank.subtitle).first, kRankX + 12, top + 26, c.subtext, 11);
  text(rank.constructed ? tr("DDP built") : tr("not built yet"), kRankX + 12, top + 42, c.subtext, 11);

  // Shard: one cell per sample, padding duplicates outlined in red.
  text(tr("shard"), kShardX, top + 6, c.subtext, 10);
  QList<QGraphicsRectItem*> cells;
  const int count = static_cast<int>(rank.samples.size());
  const qreal cell = count > 0 ? std::min<qreal>(30, kShardW / count) : 30;
  for (int k = 0; k < count; ++k) {
    const DdpSampleView& s = rank.samples[k];
    auto* b = box(QRectF(kShardX + k * cell, top + 24, cell - 2, 26), rankColor(rank.rank), QColor());
    if (s.padding) b->setPen(QPen(kPadding, 2, Qt::DashLine));
    const QString what = s.padding ? tr("sample %1 (padding)").arg(s.index) : tr("sample %1").arg(s.index);
    b->setData(kDescription, what);
    b->setToolTip(s.padding ? tr("sample %1, repeated so every rank gets %2 samples").arg(s.index).arg(count) : what);
    if (cell >= 16) text(QString::number(s.index), kShardX + k * cell + 3, top + 30, c.chipText, 11, true);
    cells.append(b);
  }
  if (count == 0) text(tr("no samples yet"), kShardX, top + 28, c.subtext, 11);
  else if (std::any_of(rank.samples.begin(), rank.samples.end(), [](const DdpSampleView& s) { return s.padding; }))
    text(tr("dashed: padding"), kShardX + std::min<qreal>(count * cell, kShardW - 70) + 4, top + 30, kPadding, 10);
  samples_.insert(rank.rank, cells);

  // Activity.
  auto* act = box(QRectF(kActX, top + 22, kActW, 30), rank.computing ? c.accent : c.idleFill, QColor());
  act->setToolTip(rank.activity);
  activities_.insert(rank.rank, text(rank.activity, kActX + 6, top + 29, rank.computing ? c.accentText : c.idleText, 11));

  // Buckets in launch order, filled by the share of their gradients that are in, coloured by phase
  // (equal widths: the bytes are on the label and in the tooltip).
  text(tr("gradient buckets (launch order →)"), kBucketX, top + 6, c.subtext, 10);
  qreal x = kBucketX;
  const qreal gap = 4;
  const int nb = static_cast<int>(rank.buckets.size());
  const qreal w = nb > 0 ? (kBucketW - gap * (nb - 1)) / nb : kBucketW;
  for (const auto& b : rank.buckets) {
    auto* outline = box(QRectF(x, top + 22, w, 30), c.idleFill, c.panelBorder);
    const qreal fillW = b.total > 0 ? w * b.ready / b.total : 0;
    if (fillW > 0) box(QRectF(x, top + 22, fillW, 30), phaseColor(b.phase, c), QColor());
    const QString desc = tr("bucket %1: %2 %3/%4").arg(b.bucket).arg(bucketPhaseName(b.phase)).arg(b.ready).arg(b.total);
    outline->setData(kDescription, desc);
    outline->setToolTip(tr("%1\n%2\n%3").arg(desc, b.params.join(QStringLiteral(", ")), formatBytes(static_cast<double>(b.bytes))));
    if (w >= 40) text(QStringLiteral("b%1 %2/%3").arg(b.bucket).arg(b.ready).arg(b.total), x + 4, top + 24, c.text, 10, true);
    if (w >= 60) text(formatBytes(static_cast<double>(b.bytes)), x + 4, top + 37, c.text, 9);
    text(bucketPhaseName(b.phase), x + 2, top + 55, phaseColor(b.phase, c).darker(theme_ == QLatin1String("dark") ? 70 : 120), 9);
    buckets_.insert(key(rank.rank, b.bucket), outline);
    x += w + gap;
  }
  if (rank.buckets.isEmpty()) text(tr("built with DDP"), kBucketX, top + 28, c.subtext, 11);

  // Values, on the second line: the watched parameter, its gradient, a buffer; green where equal
  // to rank 0's, orange where they differ.
  auto valueColor = [&](bool equal) { return rank.rank == 0 ? c.text : (equal ? kEqual : kDiffer); };
  const qreal y = top + kValuesY;
  if (!rank.paramText.isEmpty()) text(rank.paramText, kRankX + 12, y, valueColor(rank.paramsEqualRank0), 11);
  auto* g = text(rank.gradText, kRankX + 222, y, rank.grads == dpv::GradState::None ? c.subtext : valueColor(rank.gradsEqualRank0), 11,
                 rank.grads == dpv::GradState::Averaged);
  g->setData(kDescription, QString::fromLatin1(dpv::grad_state_name(rank.grads)));
  grads_.insert(rank.rank, g);
  if (!rank.bufferText.isEmpty()) {
    auto* bt = text(rank.bufferText, kRankX + 498, y, valueColor(rank.buffersEqualRank0), 11);
    buffers_.insert(rank.rank, bt);
  }
}

}  // namespace gui
