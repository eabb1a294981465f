#pragma once
// The app's settings as the engine's one run description: every page that trains (the Iteration
// page's worker, the Timeline, the Ring) builds its dpv::RunSpec here, so no page converts the
// settings field by field.
#include "engine/run/run_spec.h"
#include "gui/runtime/settings.h"

namespace gui {

// Devices, preset, global batch, learning rate, BatchNorm mode, seed and strategy from `settings`.
// Under DDP and ZeRO-1 (DDP's buckets under ZeroRedundancyOptimizer) the buckets are the teaching
// size (dpv::teaching_ddp_settings), so even a small model gets several buckets to watch; that
// reads the preset, so an unknown preset throws dpv::Error there.
dpv::RunSpec runSpecFromSettings(const AppSettings& settings);

}  // namespace gui
