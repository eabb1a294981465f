#pragma once
// Where the DDP view draws things (scene coordinates): the header with the sampler's strips, one
// row per rank with its cells, the ring beside the buckets, and the columns of rows for more
// than four ranks. Shared by the drawing (scene.cpp) and the flights (scene_flights.cpp).
#include <QSizeF>

namespace gui::ddp_geometry {

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
constexpr qreal kShardLineH = 46;  // ZeRO: a third line, the shards (parameter chips or flat bars) and memory
// The ring beside the buckets: arrows down from rank to rank, and back up from the last to rank 0.
constexpr qreal kRingX = kBucketX + kBucketW + 12, kRingW = 30;
constexpr qreal kWidth = kRingX + kRingW + kMargin;
constexpr qreal kCellY = 22, kCellH = 30;  // the shard, activity and bucket cells of a row
// Flying chips: a bucket's or a gradient's, and a parameter's or buffer's state.
inline const QSizeF kSmallChip(46, 20), kStateChip(118, 20);

// More than four ranks: two columns of rank rows (the first half on the left), so eight ranks
// keep the picture about as wide as it is tall instead of one tall column.
inline int columnsFor(int world) { return world > 4 ? 2 : 1; }
inline int rowsFor(int world) { return (world + columnsFor(world) - 1) / columnsFor(world); }
constexpr qreal kColumnStep = kWidth - kMargin + 4;  // from a column's rows to the next column's
// `rowH`: the rows' height (kRowH, or kRowH + kShardLineH under the sharded strategies).
inline qreal rowTop(int rank, int world, qreal rowH) { return kHeaderH + (rank % rowsFor(world)) * (rowH + kRowGap); }
inline qreal columnX(int rank, int world) { return (rank / rowsFor(world)) * kColumnStep; }

}  // namespace gui::ddp_geometry
