#pragma once
// What the tensor inspector shows for a clicked part of the DDP picture, built only from the
// engine's recorded DDP snapshots (StageEvent::ranks): a rank's shard (one row per sample with its
// index in the global batch and its input values, padding repeats marked), a bucket on every rank
// (its flat buffer: gradients ×1/world while filling, the mean once all-reduced), the watched
// gradient on every rank before averaging (the last Backward) and after it (Finalize on), and the
// watched parameter or buffer on every rank.
#include <QList>

#include "gui/common/scene_model.h"

namespace gui {

enum class DdpPart { Shard, Bucket, Grad, Params, Buffers };

struct DdpInspection {
  ChipView chip;      // its tensors are the rows; text is the headline's subject
  QString where;      // "rank 1"
  int selectedRow = 0;  // the clicked rank's row
};

// `events` are the recorded stages of the iteration shown, `shown` the index on screen.
DdpInspection ddpInspection(const IterationInfo& info, const QList<dpv::StageEvent>& events, int shown,
                            DdpPart part, int rank, int bucket);

}  // namespace gui
