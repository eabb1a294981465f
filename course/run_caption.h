#pragma once
// Whose numbers a page shows: one line naming the run they came from, written from its RunSpec
// ("model simple · seed 0 · batch 32 · DistributedDataParallel · cpu:4"), so every page that shows
// measured or computed values says the same thing about the same run in the same words.
#include <string>

#include "engine/run/run_spec.h"

namespace dpv::course {

// "model <preset, or 'of N layers' for a model spec> · seed S · batch N · <strategy> · <devices>"; `batch` overrides
// run.batch when the page ran another (0: run.batch); `modes` replaces the strategy's name when the
// page runs several ("one device, DataParallel and DDP").
std::string run_caption(const RunSpec& run, int64_t batch = 0, const std::string& modes = {});

}  // namespace dpv::course
