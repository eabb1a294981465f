#pragma once
// One run description: everything that decides what a training run computes (devices, model,
// global batch, optimizer, BatchNorm mode, seed, strategy and its options), as one plain value.
// The CLI builds it from its options, the app from its settings, course/ from its configs; the
// engine turns it into the options each strategy takes and into the strategy itself, so no front
// end converts settings field by field.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "engine/data_parallel.h"
#include "engine/ddp/ddp_rank.h"
#include "engine/device.h"
#include "engine/model_spec.h"
#include "engine/strategy.h"
#include "engine/tensor_map.h"

namespace dpv {

struct RunSpec {
  std::string devices = "cpu:1";          // a device spec (engine/device.h)
  std::string preset = "mlp-bn";          // a preset_model name, used when `model` is empty
  std::optional<ModelSpec> model;         // a model read from a file; takes the preset's place
  int64_t batch = 0;                      // the GLOBAL batch (DataParallel scatters it, DDP shards it)
  OptimizerSettings optimizer;
  bool sync_bn = false;                   // BatchNorm layers compute the whole batch's statistics
  uint64_t seed = 0;                      // the model's initial state
  StrategyKind strategy = StrategyKind::DataParallel;
  DdpSettings ddp;                        // only DistributedDataParallel reads these (engine/ddp/ddp_rank.h)

  // The model to build: `model` when set, the preset's otherwise (dpv::Error for an unknown preset).
  ModelSpec model_spec() const;
  bool operator==(const RunSpec&) const = default;
};

// The options each strategy's constructor takes, from the one description.
TrainOptions train_options(const RunSpec& spec);
DdpOptions ddp_options(const RunSpec& spec);

// The bucket limit dpviz teaches DDP with: the bytes of the last layer's parameters (at least 1),
// whose gradients are ready first. With both bucket limits at that size the rebuilt first bucket
// is exactly that layer, launched while every earlier layer is still to be computed, and even a
// small model gets several buckets to watch one by one.
int64_t teaching_bucket_bytes(const ModelSpec& spec);
// DDP settings whose two bucket limits (bucket_cap_mb and dist._DEFAULT_FIRST_BUCKET_BYTES) are
// both teaching_bucket_bytes(spec); buffers broadcast as by default.
DdpSettings teaching_ddp_settings(const ModelSpec& spec);

// The strategy the description names (Trainer or DdpTrainer) on `devices`, starting from `state`
// (the model's initial state from spec.seed when null).
std::unique_ptr<Strategy> make_strategy(const RunSpec& spec, std::shared_ptr<DeviceSet> devices,
                                        const TensorMap* state = nullptr);

}  // namespace dpv
