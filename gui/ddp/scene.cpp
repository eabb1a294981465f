#include "gui/ddp/scene.h"

#include <QFont>
#include <utility>
#include <QGraphicsPathItem>
#include <QGraphicsRectItem>
#include <QCursor>
#include <QGraphicsSceneMouseEvent>
#include <QGraphicsSimpleTextItem>
#include <QParallelAnimationGroup>
#include <QPen>
#include <QSequentialAnimationGroup>
#include <QVariantAnimation>

#include "gui/common/theme.h"
#include "gui/common/flight.h"
#include "gui/common/scene_model.h"
#include "gui/ddp/scene_geometry.h"

namespace gui {

using namespace ddp_geometry;

namespace {

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

DdpScene::~DdpScene() {
  if (group_) group_->stop();
}

void DdpScene::setTheme(const QString& theme) {
  finishAnimations();
  theme_ = theme;
  setBackgroundBrush(sceneColors(theme).background);
  rebuild();
}

void DdpScene::setInfo(const IterationInfo& info) {
  info_ = info;
  showState(ddpSceneStateFor(info, nullptr));
}

void DdpScene::showState(const DdpSceneState& state, bool animate) {
  finishAnimations();
  const DdpSceneState previous = state_;
  state_ = state;
  rebuild();
  if (!animate || duration_ <= 0 || !state.started) return;
  group_ = new QParallelAnimationGroup(this);
  // The sharded strategies' own stages, and their step (only the owned part changes), fly their own way.
  using K = dpv::StageKind;
  const bool shardStage = state.kind == K::Step || state.kind == K::GatherParams || state.kind == K::ReduceScatter ||
                          state.kind == K::BroadcastParams || state.kind == K::FreeParams;
  if (shardedStrategy(state.strategy) && shardStage) addShardFlights(previous);
  else addFlights(previous);
  if (group_->animationCount() == 0) {
    delete group_;
    return;
  }
  connect(group_, &QAbstractAnimation::finished, this, [this] {
    finishAnimations();
    emit animationFinished();
  });
  group_->start();
}

void DdpScene::finishAnimations() {
  if (group_) {
    QParallelAnimationGroup* g = group_;
    group_ = nullptr;
    g->disconnect(this);  // cut short: no animationFinished (the caller moves on by itself)
    g->setCurrentTime(g->totalDuration());  // hidden cells shown, flights at their ends
    g->stop();
    g->deleteLater();
  }
  for (ChipItem* ghost : std::exchange(ghosts_, {})) {
    removeItem(ghost);
    ghost->deleteLater();
  }
}

bool DdpScene::animating() const { return group_ && group_->state() == QAbstractAnimation::Running; }

void DdpScene::pauseAnimationsAt(int ms) {
  if (!group_) return;
  group_->pause();
  group_->setCurrentTime(ms);
}

int DdpScene::totalAnimationMs() const { return group_ ? group_->totalDuration() : 0; }

QGraphicsSimpleTextItem* DdpScene::text(const QString& s, qreal x, qreal y, const QColor& color, int px, bool bold) {
  auto* t = addSimpleText(s);
  QFont f = t->font();
  f.setPixelSize(px);
  f.setBold(bold);
  t->setFont(f);
  t->setBrush(color);
  t->setPos(origin_ + QPointF(x, y));
  return t;
}

QGraphicsRectItem* DdpScene::box(const QRectF& r, const QColor& fill, const QColor& border, qreal) {
  auto* b = addRect(r.translated(origin_), border.isValid() ? QPen(border, 1) : QPen(Qt::NoPen), fill);
  return b;
}

void DdpScene::rebuild() {
  clear();
  buckets_.clear();
  samples_.clear();
  grads_.clear();
  buffers_.clear();
  activities_.clear();
  params_.clear();
  stripCells_.clear();
  flatSlices_.clear();
  gradSlices_.clear();
  paramChips_.clear();
  paddingTexts_.clear();
  memoryBars_.clear();
  headline_ = nullptr;
  ring_ = nullptr;
  const SceneColors& c = sceneColors(theme_);
  const int n = static_cast<int>(state_.ranks.size());
  const bool sharded = shardedStrategy(state_.strategy);
  const qreal legendH = sharded ? 22 : 0;  // the memory bars' legend under the rows
  const qreal height = kHeaderH + rowsFor(n) * (rowH() + kRowGap) + kMargin + legendH;
  setSceneRect(0, 0, kWidth + (columnsFor(n) - 1) * kColumnStep, height);
  headline_ = text(state_.headline, kMargin, kMargin - 4, c.text, 13, true);
  drawBatchStrips(kMargin + 24);
  for (int r = 0; r < n; ++r) {
    origin_ = QPointF(columnX(r, n), 0);  // the rank's column: text() and box() place its items there
    drawRank(state_.ranks[r], rowTop(r, n, rowH()));
  }
  origin_ = QPointF();
  drawRing();
  if (sharded) drawMemoryLegend(kHeaderH + rowsFor(n) * (rowH() + kRowGap));
}

// Item data keys of a clickable part (kDescription is 0).
constexpr int kPartKey = 1, kRankKey = 2, kBucketKey = 3;

void DdpScene::makeClickable(QGraphicsItem* item, DdpPart part, int rank, int bucket) {
  item->setData(kPartKey, static_cast<int>(part) + 1);
  item->setData(kRankKey, rank);
  item->setData(kBucketKey, bucket);
  item->setCursor(Qt::PointingHandCursor);
}

QGraphicsItem* DdpScene::partItem(DdpPart part, int rank, int bucket) const {
  switch (part) {
    case DdpPart::Shard: return samples_.value(rank).value(0);
    case DdpPart::Bucket: return buckets_.value(key(rank, bucket));
    case DdpPart::Grad: return grads_.value(rank);
    case DdpPart::Params: return params_.value(rank);
    case DdpPart::Buffers: return buffers_.value(rank);
  }
  return nullptr;
}

void DdpScene::mousePressEvent(QGraphicsSceneMouseEvent* event) {
  for (QGraphicsItem* item : items(event->scenePos())) {
    for (QGraphicsItem* i = item; i; i = i->parentItem()) {  // a cell's number belongs to its cell
      if (!i->data(kPartKey).isValid()) continue;
      emit partClicked(static_cast<DdpPart>(i->data(kPartKey).toInt() - 1), i->data(kRankKey).toInt(), i->data(kBucketKey).toInt());
      event->accept();
      return;
    }
  }
  QGraphicsScene::mousePressEvent(event);
}

void DdpScene::drawRing() {
  const int world = static_cast<int>(state_.ranks.size());
  if (world < 2 || !state_.ranks.front().constructed) return;
  const SceneColors& c = sceneColors(theme_);
  bool busy = false;
  for (const auto& rank : state_.ranks)
    for (const auto& b : rank.buckets) busy = busy || b.phase == BucketPhase::AllReducing;
  auto mid = [this, world](int r) { return rowTop(r, world, rowH()) + kCellY + kCellH / 2; };
  auto down = [this, world](int r) { return columnX(r, world) + kRingX + 6; };           // the lane r -> r + 1
  auto back = [this, world](int r) { return columnX(r, world) + kRingX + kRingW - 4; };  // the return lane
  QPainterPath path;
  auto arrowHead = [&path](QPointF tip, qreal dx, qreal dy) {  // (dx, dy): the direction it points
    path.moveTo(tip - QPointF(dx * 6 - dy * 4, dy * 6 - dx * 4));
    path.lineTo(tip);
    path.lineTo(tip - QPointF(dx * 6 + dy * 4, dy * 6 + dx * 4));
  };
  const int rows = rowsFor(world);
  for (int r = 0; r + 1 < world; ++r) {
    if ((r + 1) % rows != 0) {  // the next rank is below, in the same column
      path.moveTo(down(r), mid(r) + 6);
      path.lineTo(down(r), mid(r + 1) - 6);
      arrowHead(QPointF(down(r), mid(r + 1) - 6), 0, 1);
      continue;
    }
    // The next rank heads the next column: through the gap between the columns, into its row.
    const qreal gap = columnX(r + 1, world) + kMargin - 9;
    path.moveTo(down(r) + 2, mid(r));
    path.lineTo(gap - 3, mid(r));
    path.lineTo(gap - 3, mid(r + 1));
    path.lineTo(gap + 3, mid(r + 1));
    arrowHead(QPointF(gap + 3, mid(r + 1)), 1, 0);
  }
  // The last rank back to rank 0: up the return lane, under the rows when it is in another column.
  const int last = world - 1;
  path.moveTo(down(last) + 2, mid(last));
  path.lineTo(back(last), mid(last));
  if (columnX(last, world) > 0) {
    const qreal under = rowTop(rows - 1, world, rowH()) + rowH() + kRowGap / 2;
    path.lineTo(back(last), under);
    path.lineTo(back(0), under);
  }
  path.lineTo(back(0), mid(0));
  path.lineTo(down(0) + 4, mid(0));
  arrowHead(QPointF(down(0) + 4, mid(0)), -1, 0);
  ring_ = addPath(path, QPen(busy ? QColor(0x2f, 0x6f, 0xd6) : c.panelBorder, busy ? 2.0 : 1.2));
  ring_->setData(kDescription, busy ? QStringLiteral("ring: all-reducing") : QStringLiteral("ring: idle"));
  ring_->setToolTip(tr("The ring: in an all-reduce each rank sends to the next and receives from the one before"));
  for (int col = 0; col < columnsFor(world); ++col) text(tr("ring"), col * kColumnStep + kRingX, rowTop(0, world, rowH()) + 4, c.subtext, 11);
}

void DdpScene::drawBatchStrips(qreal top) {
  const SceneColors& c = sceneColors(theme_);
  const int world = static_cast<int>(state_.ranks.size());
  if (world == 0 || state_.batchRows <= 0) return;
  // DDP: the padded index list, position p going to rank p % world.
  const qint64 perRank = (state_.batchRows + world - 1) / world;
  const qint64 total = perRank * world;
  const qreal labelW = 160;
  const qreal cell = std::min<qreal>(26, (kWidth - kMargin - kMargin - labelW) / static_cast<qreal>(total));
  const bool numbers = cell >= 15;
  text(tr("DistributedSampler"), kMargin, top + 3, c.subtext, 12, true);
  for (qint64 p = 0; p < total; ++p) {
    const qint64 sample = p % state_.batchRows;
    const bool pad = p >= state_.batchRows;
    const int rank = static_cast<int>(p % world);
    const QColor fill = state_.sampled ? rankColor(rank) : c.idleFill;
    auto* b = box(QRectF(kMargin + labelW + p * cell, top, cell - 1, 22), fill, pad ? kPadding : QColor());
    if (pad) b->setPen(QPen(kPadding, 2, Qt::DashLine));
    stripCells_.append(b);
    b->setToolTip(pad ? tr("sample %1 again (padding), to rank %2").arg(sample).arg(rank)
                      : tr("sample %1 to rank %2").arg(sample).arg(rank));
    if (numbers) text(QString::number(sample), kMargin + labelW + p * cell + 2, top + 4, c.chipText, 11);
  }
  // DataParallel: contiguous torch.chunk pieces of the same batch.
  const qreal y2 = top + 30;
  text(tr("DataParallel (contrast)"), kMargin, y2 + 3, c.subtext, 12);
  // Muted device colours, so the contrast row reads as secondary: paler on the light theme, darker
  // on the dark one, where the chips' light text stays readable (pale cells made it vanish).
  const bool dark = theme_ == QLatin1String("dark");
  qint64 start = 0;
  for (int k = 0; k < state_.dpChunks.size(); ++k) {
    const QColor fill = dark ? rankColor(k).darker(170) : rankColor(k).lighter(150);
    for (qint64 i = start; i < start + state_.dpChunks[k]; ++i) {
      auto* b = box(QRectF(kMargin + labelW + i * cell, y2, cell - 1, 22), fill, QColor());
      b->setToolTip(tr("DataParallel would scatter sample %1 to device %2").arg(i).arg(k));
      if (numbers) text(QString::number(i), kMargin + labelW + i * cell + 2, y2 + 4, c.chipText, 11);
    }
    start += state_.dpChunks[k];
  }
  text(tr("strided shards (rank r: r, r+%1, …), padded to %2; DataParallel: contiguous chunks")
           .arg(world)
           .arg(total),
       kMargin, y2 + 28, c.subtext, 11);
}

void DdpScene::drawRank(const DdpRankView& rank, qreal top) {
  const SceneColors& c = sceneColors(theme_);
  auto* panel = box(QRectF(kMargin - 6, top, kWidth - 2 * kMargin + 12, rowH()), c.panel, c.panelBorder);
  panel->setZValue(-1);
  if (!rank.failure.isEmpty()) {  // a failing rank is marked as a failing DataParallel device is
    panel->setPen(QPen(c.failed, 2));
    panel->setToolTip(rank.failure);
  }
  // Rank label with its colour.
  box(QRectF(kRankX, top + 8, 6, rowH() - 16), rankColor(rank.rank), QColor());
  text(rank.title, kRankX + 12, top + 6, c.text, 15, true);
  text(rank.deviceName, kRankX + 12, top + 26, c.subtext, 11);
  // What the rank built: DDP (also under ZeroRedundancyOptimizer) or FSDP's flat parameter.
  const bool fsdp = dpv::zero_stage(state_.strategy) >= 2;
  text(rank.constructed ? (fsdp ? tr("FSDP built") : tr("DDP built")) : tr("not built yet"), kRankX + 12, top + 42, c.subtext, 11);

  // Shard: one cell per sample, padding duplicates outlined in red.
  text(tr("shard"), kShardX, top + 6, c.subtext, 11);
  QList<QGraphicsRectItem*> cells;
  const int count = static_cast<int>(rank.samples.size());
  const qreal cell = count > 0 ? std::min<qreal>(30, kShardW / count) : 30;
  for (int k = 0; k < count; ++k) {
    const DdpSampleView& s = rank.samples[k];
    auto* b = box(QRectF(kShardX + k * cell, top + 24, cell - 2, 26), rankColor(rank.rank), QColor());
    if (s.padding) b->setPen(QPen(kPadding, 2, Qt::DashLine));
    const QString what = s.padding ? tr("sample %1 (padding)").arg(s.index) : tr("sample %1").arg(s.index);
    b->setData(kDescription, what);
    makeClickable(b, DdpPart::Shard, rank.rank);
    b->setToolTip(s.padding ? tr("sample %1, repeated so every rank gets %2 samples").arg(s.index).arg(count) : what);
    // The number belongs to its cell (hidden with it until the sampler's chip arrives).
    if (cell >= 16) text(QString::number(s.index), kShardX + k * cell + 3, top + 30, c.chipText, 11, true)->setParentItem(b);
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
  if (!fsdp) text(tr("gradient buckets (launch order →)"), kBucketX, top + 6, c.subtext, 11);
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
    makeClickable(outline, DdpPart::Bucket, rank.rank, b.bucket);
    outline->setToolTip(tr("%1\n%2\n%3").arg(desc, b.params.join(QStringLiteral(", ")), formatBytes(static_cast<double>(b.bytes))));
    if (w >= 40) text(QStringLiteral("b%1 %2/%3").arg(b.bucket).arg(b.ready).arg(b.total), x + 4, top + 24, c.text, 11, true);
    if (w >= 60) text(formatBytes(static_cast<double>(b.bytes)), x + 4, top + 37, c.text, 11);
    text(bucketPhaseName(b.phase), x + 2, top + 55, phaseColor(b.phase, c).darker(theme_ == QLatin1String("dark") ? 70 : 120), 10);
    buckets_.insert(key(rank.rank, b.bucket), outline);
    x += w + gap;
  }
  if (fsdp) text(tr("no buckets: FSDP reduce-scatters\nthe flat gradient (below)"), kBucketX, top + 22, c.subtext, 11);
  else if (rank.buckets.isEmpty()) text(tr("built with DDP"), kBucketX, top + 28, c.subtext, 11);

  // Values, on the second line: the watched parameter, its gradient, a buffer; green where equal
  // to rank 0's, orange where they differ.
  auto valueColor = [&](bool equal) { return rank.rank == 0 ? c.text : (equal ? kEqual : kDiffer); };
  const qreal y = top + kValuesY;
  if (!rank.paramText.isEmpty()) {
    params_.insert(rank.rank, text(rank.paramText, kRankX + 12, y, valueColor(rank.paramsEqualRank0), 11));
    makeClickable(params_.value(rank.rank), DdpPart::Params, rank.rank);
  }
  auto* g = text(rank.gradText, kRankX + 222, y, rank.grads == dpv::GradState::None ? c.subtext : valueColor(rank.gradsEqualRank0), 11,
                 rank.grads == dpv::GradState::Averaged);
  g->setData(kDescription, QString::fromLatin1(dpv::grad_state_name(rank.grads)));
  makeClickable(g, DdpPart::Grad, rank.rank);
  grads_.insert(rank.rank, g);
  if (!rank.bufferText.isEmpty()) {
    auto* bt = text(rank.bufferText, kRankX + 498, y, valueColor(rank.buffersEqualRank0), 11);
    buffers_.insert(rank.rank, bt);
    makeClickable(bt, DdpPart::Buffers, rank.rank);
  }
  if (shardedStrategy(state_.strategy)) drawShardLine(rank, top);
}

}  // namespace gui
