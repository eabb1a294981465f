#include "gui/runtime/run_spec_from_settings.h"

namespace gui {

dpv::RunSpec runSpecFromSettings(const AppSettings& settings) {
  dpv::RunSpec spec;
  spec.devices = settings.devices.toStdString();
  spec.preset = settings.preset.toStdString();
  spec.batch = settings.batchSize;
  spec.optimizer.lr = settings.learningRate;
  spec.sync_bn = settings.syncBatchNorm;
  spec.seed = settings.seed;
  spec.strategy = settings.strategy;
  // DDP's buckets (also ZeRO-1's: ZeroRedundancyOptimizer runs over DDP) at the teaching size;
  // FSDP (ZeRO-2/3) has no buckets, and DataParallel none either.
  if (spec.strategy == dpv::StrategyKind::DistributedDataParallel || spec.strategy == dpv::StrategyKind::Zero1)
    spec.ddp = dpv::teaching_ddp_settings(spec.model_spec());
  return spec;
}

}  // namespace gui
