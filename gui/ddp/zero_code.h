#pragma once
// The code panel's two texts under the sharded strategies: the script every rank runs (PyTorch
// 1.13: ZeroRedundancyOptimizer over DDP for ZeRO-1, FullyShardedDataParallel with SHARD_GRAD_OP
// or FULL_SHARD for ZeRO-2 and ZeRO-3), and short excerpts of PyTorch's own source, each line
// naming the stages it stands for so the current one is highlighted (as gui/ddp/code.h for DDP).
#include <QVector>

#include "gui/common/code_view.h"
#include "gui/runtime/settings.h"

namespace gui {

// The script for `settings` (its strategy, preset, learning rate) on `ranks` ranks with a global
// batch of `rows` samples.
QVector<CodeLine> zeroScriptLines(const AppSettings& settings, int ranks, qint64 rows);
// What PyTorch runs underneath, for the strategy (ZeRO-1: ZeroRedundancyOptimizer.step; ZeRO-2/3:
// FSDP's forward, backward hooks and sharded step).
QVector<CodeLine> zeroSourceLines(dpv::StrategyKind kind);

}  // namespace gui
