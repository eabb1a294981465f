// The BatchNorm lab's DDP trainers (course/bnlab_session.cpp) as the lab drives them, without Qt, so the
// TSan stage of scripts/test.sh (filter *Ddp*) runs them: per-rank BatchNorm and SyncBatchNorm
// under DDP on device sets of their own, stepped in turn with the DataParallel pair and the one
// device reference on the same global batches, the values the lab reads taken between steps, a
// throwaway copy built and dropped (the lab's first-step probe), and the per-rank model stopped
// by a one-sample shard while the SyncBatchNorm one trains on.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/ddp/ddp.h"
#include "engine/error.h"
#include "engine/model_data.h"

using namespace dpv;

namespace {

ModelSpec lab_model() {  // bnlab_model_spec: the mlp-bn preset, BatchNorm momentum 0.1
  ModelSpec spec = preset_model("mlp-bn");
  for (auto& layer : spec.layers)
    if (is_batchnorm(layer.kind)) layer.momentum = 0.1;
  return spec;
}

std::unique_ptr<DdpTrainer> lab_ddp(const std::string& devices, const ModelSpec& spec, const TensorMap& state,
                                    bool sync_bn) {
  DdpOptions o;
  o.optimizer.lr = 0.05;
  o.optimizer.momentum = 0.9;
  o.sync_bn = sync_bn;
  return std::make_unique<DdpTrainer>(DeviceSet::create(devices), Model(spec), state, o);
}

// What the lab reads of a DDP model after a step: the mean loss, every rank's output, the
// BatchNorm statistics and rank 0's running statistics. Checks the ranks still agree.
void read_like_the_lab(DdpTrainer& tr, const DdpIteration& it, const Model& model) {
  EXPECT_TRUE(std::isfinite(it.mean_rank_loss()));
  for (int r = 0; r < tr.world_size(); ++r) {
    EXPECT_EQ(tr.rank(r).output().dim(0), static_cast<int64_t>(it.shards()[static_cast<size_t>(r)].size()));
    (void)tr.rank(r).output().to_doubles();
    // The same averaged gradients on every rank: the parameters stay equal without a broadcast.
    for (const auto& d : model.parameter_decls())
      EXPECT_EQ(tr.rank(r).params().at(d.name).to_doubles(), tr.rank(0).params().at(d.name).to_doubles())
          << "rank " << r << " " << d.name;
  }
  EXPECT_FALSE(it.batchnorm_stats().empty());
  for (const auto& d : model.buffer_decls()) (void)tr.rank(0).buffers().at(d.name).to_doubles();
}

}  // namespace

TEST(DdpBatchNormLab, FiveModelsStepInTurnOnTheSameBatches) {
  const ModelSpec spec = lab_model();
  const Model model(spec);
  const TensorMap state = model.initial_state(7);
  const Dataset data = make_spiral(256, 2, 11, spec.dtype);
  TrainOptions per_device{.optimizer = {.lr = 0.05, .momentum = 0.9}};
  TrainOptions sync = per_device;
  sync.sync_bn = true;
  Trainer dp(DeviceSet::create("cpu:4"), Model(spec), state, per_device);
  Trainer dp_sync(DeviceSet::create("cpu:4"), Model(spec), state, sync);
  Trainer reference(DeviceSet::create("cpu:1"), Model(spec), state, per_device);
  auto ddp = lab_ddp("cpu:4", spec, state, false);
  auto ddp_sync = lab_ddp("cpu:4", spec, state, true);
  for (int64_t step = 0; step < 6; ++step) {
    const Tensor in = data.inputs.slice0(32 * step, 32 * step + 32), tg = data.targets.slice0(32 * step, 32 * step + 32);
    if (step == 0) {  // the lab's probe: throwaway copies run the first batch and are dropped
      auto probe = lab_ddp("cpu:4", spec, state, true);
      DdpIteration(*probe, in, tg).run_to_end();
    }
    for (Trainer* t : {&dp, &dp_sync, &reference}) Iteration(*t, in, tg).run_to_end();
    for (DdpTrainer* t : {ddp.get(), ddp_sync.get()}) {
      DdpIteration it(*t, in, tg);
      it.run_to_end();
      read_like_the_lab(*t, it, model);
    }
  }
}

TEST(DdpBatchNormLab, AOneSampleShardStopsPerRankBatchNormOnly) {
  const ModelSpec spec = lab_model();
  const Model model(spec);
  const TensorMap state = model.initial_state(8);
  const Dataset data = make_spiral(64, 2, 12, spec.dtype);
  const Tensor in = data.inputs.slice0(0, 4), tg = data.targets.slice0(0, 4);  // one sample per rank on cpu:4
  for (int round = 0; round < 3; ++round) {
    auto per_rank = lab_ddp("cpu:4", spec, state, false);
    auto synced = lab_ddp("cpu:4", spec, state, true);
    try {
      DdpIteration(*per_rank, in, tg).run_to_end();
      ADD_FAILURE() << "per-rank BatchNorm trained on one-sample shards";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("Expected more than 1 value per channel"), std::string::npos) << e.what();
    }
    EXPECT_THROW(DdpIteration(*per_rank, in, tg).run_to_end(), Error);  // stopped: the lab shows it, no hang
    for (int step = 0; step < 2; ++step) {
      DdpIteration it(*synced, in, tg);  // SyncBatchNorm: statistics over the 4 samples of the group
      it.run_to_end();
      read_like_the_lab(*synced, it, model);
    }
    per_rank.reset();  // a broken trainer goes without waiting for its ranks
  }
}
