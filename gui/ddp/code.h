#pragma once
// The code panel's two texts in DDP mode, as course/ writes them (course/sample_program.h:
// ddp_program, ddp_source_program): the training script every rank runs (init_process_group,
// DistributedSampler, DistributedDataParallel), and short excerpts of PyTorch 1.13's own source
// with file and line references, each line naming the DDP stages it stands for so the current one
// is highlighted.
#include <QVector>

#include "gui/common/context.h"
#include "gui/common/code_view.h"

namespace gui {

// The script for the settings and a run whose global batch has `rows` samples on `ranks` ranks and
// whose bucket limits are `bucketBytes` (dist._DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb).
QVector<CodeLine> ddpScriptLines(const AppSettings& settings, int ranks, qint64 rows, qint64 bucketBytes);
// DistributedDataParallel's own code (PyTorch 1.13, abridged, with file:line references).
QVector<CodeLine> ddpSourceLines();

}  // namespace gui
