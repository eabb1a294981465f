// The one run description: the options each strategy takes come from it field by field, and
// make_strategy builds the strategy it names from the seed's initial state.
#include <gtest/gtest.h>

#include "engine/ddp/ddp.h"
#include "engine/model.h"
#include "engine/run/run_spec.h"

using namespace dpv;

namespace {

RunSpec sample_spec() {
  RunSpec spec;
  spec.devices = "cpu:2";
  spec.preset = "mlp-bn";
  spec.batch = 8;
  spec.optimizer = {.lr = 0.25, .momentum = 0.5, .weight_decay = 0.125};
  spec.sync_bn = true;
  spec.seed = 7;
  spec.ddp = {false, 0.5, 4096};
  return spec;
}

}  // namespace

TEST(RunSpec, OptionsCarryEveryField) {
  const RunSpec spec = sample_spec();
  const TrainOptions dp = train_options(spec);
  EXPECT_EQ(dp.optimizer.lr, 0.25);
  EXPECT_EQ(dp.optimizer.momentum, 0.5);
  EXPECT_EQ(dp.optimizer.weight_decay, 0.125);
  EXPECT_TRUE(dp.sync_bn);
  const DdpOptions ddp = ddp_options(spec);
  EXPECT_EQ(ddp.optimizer.lr, 0.25);
  EXPECT_EQ(ddp.optimizer.momentum, 0.5);
  EXPECT_EQ(ddp.optimizer.weight_decay, 0.125);
  EXPECT_TRUE(ddp.sync_bn);
  EXPECT_FALSE(ddp.broadcast_buffers);
  EXPECT_EQ(ddp.bucket_cap_mb, 0.5);
  EXPECT_EQ(ddp.first_bucket_bytes, 4096u);
}

TEST(RunSpec, ModelFromFileTakesThePresetsPlace) {
  RunSpec spec = sample_spec();
  EXPECT_EQ(spec.model_spec().layers.size(), preset_model("mlp-bn").layers.size());
  spec.model = preset_model("simple");
  EXPECT_EQ(spec.model_spec().layers.size(), preset_model("simple").layers.size());
  spec.model.reset();
  spec.preset = "no-such-preset";
  EXPECT_THROW(spec.model_spec(), Error);
}

TEST(RunSpec, MakeStrategyBuildsTheNamedStrategyFromTheSeed) {
  RunSpec spec = sample_spec();
  auto dp = make_strategy(spec, DeviceSet::create(spec.devices));
  ASSERT_EQ(dp->kind(), StrategyKind::DataParallel);
  auto* trainer = dynamic_cast<Trainer*>(dp.get());
  ASSERT_NE(trainer, nullptr);
  EXPECT_EQ(trainer->options().optimizer.lr, 0.25);
  const TensorMap expected = Model(spec.model_spec()).initial_state(spec.seed);
  const TensorMap held = trainer->state_to_host();
  ASSERT_EQ(held.names(), expected.names());
  for (const std::string& name : expected.names())
    EXPECT_EQ(held.at(name).to_doubles(), expected.at(name).to_doubles()) << name;

  spec.strategy = StrategyKind::DistributedDataParallel;
  auto ddp = make_strategy(spec, DeviceSet::create(spec.devices));
  ASSERT_EQ(ddp->kind(), StrategyKind::DistributedDataParallel);
  auto* ddp_trainer = dynamic_cast<DdpTrainer*>(ddp.get());
  ASSERT_NE(ddp_trainer, nullptr);
  EXPECT_EQ(ddp_trainer->options().bucket_cap_mb, 0.5);
  EXPECT_FALSE(ddp_trainer->options().broadcast_buffers);
}

TEST(RunSpec, TeachingBucketIsTheLastLayerWithParameters) {
  // SimpleModel: Linear(10, 2), 22 floats.
  EXPECT_EQ(teaching_bucket_bytes(preset_model("simple")), 22 * 4);
  // mlp-bn ends in Linear(32, 3); the BatchNorm layers before it are not part of the bucket.
  const ModelSpec mlp = preset_model("mlp-bn");
  const Model model(mlp);
  const std::string last = model.layer_prefix(model.num_layers() - 1);
  ASSERT_EQ(model.layer(model.num_layers() - 1).kind(), LayerKind::Linear);
  EXPECT_EQ(teaching_bucket_bytes(mlp), (32 * 3 + 3) * 4);
  EXPECT_EQ(teaching_bucket_bytes(mlp), parameter_bytes(model, last));
  // Both DDP limits are that size.
  const DdpSettings ddp = teaching_ddp_settings(mlp);
  EXPECT_EQ(ddp.first_bucket_bytes, static_cast<size_t>((32 * 3 + 3) * 4));
  EXPECT_DOUBLE_EQ(ddp.bucket_cap_mb * 1024.0 * 1024.0, (32 * 3 + 3) * 4);
  EXPECT_TRUE(ddp.broadcast_buffers);
}
