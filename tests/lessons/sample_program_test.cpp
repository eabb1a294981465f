// The seed's sample program (course/sample_program.h): its text, its data and one run.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "course/sample_program.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

std::string text_of(const std::vector<ProgramLine>& lines) {
  std::string out;
  for (const auto& l : lines) out += l.text + "\n";
  return out;
}

TEST(SampleProgram, SimpleModelTextIsTheSeedProgram) {
  const std::string text = text_of(sample_program(ProgramOptions{}));
  EXPECT_NE(text.find("class SimpleModel(nn.Module):"), std::string::npos) << text;
  EXPECT_NE(text.find("self.linear = nn.Linear(10, 2)"), std::string::npos) << text;
  EXPECT_NE(text.find("inputs = torch.randn(32, 10).cuda()"), std::string::npos) << text;
  EXPECT_NE(text.find("labels = torch.randint(0, 2, (32,)).cuda()"), std::string::npos) << text;
  EXPECT_NE(text.find("lr=0.01)"), std::string::npos) << text;
}

TEST(SampleProgram, OtherPresetsAreSequentialsOfTheirLayers) {
  ProgramOptions o;
  o.preset = "cnn";
  o.batch = 8;
  o.sync_bn = true;
  const auto lines = sample_program(o);
  const std::string text = text_of(lines);
  EXPECT_NE(text.find("model = nn.Sequential("), std::string::npos) << text;
  EXPECT_NE(text.find("inputs = torch.randn(8, 3, 32, 32)"), std::string::npos) << text;
  EXPECT_EQ(text.find("nn.SyncBatchNorm("), std::string::npos) << "no SyncBatchNorm inside nn.DataParallel:\n" << text;
  EXPECT_NE(text.find("nn.BatchNorm2d("), std::string::npos) << text;
  EXPECT_NE(text.find("nn.SyncBatchNorm.convert_sync_batchnorm(model)"), std::string::npos) << text;
  EXPECT_NE(text.find("nn.parallel.DistributedDataParallel(model, device_ids=[rank])"), std::string::npos) << text;
  EXPECT_NE(text.find("--nproc_per_node=4"), std::string::npos) << text;
  const size_t layers = preset_model("cnn").layers.size();
  const auto defines = std::count_if(lines.begin(), lines.end(), [](const ProgramLine& l) { return l.layer >= 0; });
  EXPECT_EQ(static_cast<size_t>(defines), layers) << "one line per layer";
  EXPECT_THROW(sample_program(ProgramOptions{"no-such-preset"}), Error);
}

TEST(SampleProgram, EveryStageHasItsLine) {
  std::set<StageKind> named;
  for (const auto& line : sample_program(ProgramOptions{})) named.insert(line.stages.begin(), line.stages.end());
  for (StageKind k : {StageKind::Scatter, StageKind::Replicate, StageKind::Forward, StageKind::Gather, StageKind::Loss,
                      StageKind::GradScatter, StageKind::Backward, StageKind::ReduceGrads, StageKind::Step}) {
    EXPECT_TRUE(named.count(k)) << stage_kind_name(k);
  }
}

TEST(SampleProgram, DataIsFixedBySeedAndTheRunIsTheSameOnAnyDeviceCount) {
  const Dataset a = sample_data(32, 9), b = sample_data(32, 9), c = sample_data(32, 10);
  EXPECT_EQ(a.inputs.to_doubles(), b.inputs.to_doubles());
  EXPECT_EQ(a.targets.to_int64(), b.targets.to_int64());
  EXPECT_NE(a.inputs.to_doubles(), c.inputs.to_doubles());

  const SampleRun one = run_sample_program(DeviceSet::create("cpu:1"), 9);
  const SampleRun four = run_sample_program(DeviceSet::create("cpu:4"), 9);
  EXPECT_EQ(four.chunks, (std::vector<int64_t>{8, 8, 8, 8}));
  EXPECT_EQ(four.output_shape, (Shape{32, 2}));
  // Linear has no coupling across samples: DataParallel's loss is the single device's.
  EXPECT_NEAR(one.loss, four.loss, 1e-5);
  EXPECT_GT(one.loss, 0.4);
  EXPECT_LT(one.loss, 1.2);
}

TEST(SampleProgram, TheDdpScriptDefinesTheSameModelLeftOnItsRanksDevice) {
  for (const std::string& preset : {std::string("simple"), std::string("cnn")}) {
    const auto model = model_definition(preset, ModelPlacement::AsBuilt);
    const auto on_gpu = model_definition(preset, ModelPlacement::Cuda);
    ASSERT_EQ(model.size(), on_gpu.size()) << preset;
    EXPECT_EQ(on_gpu.back().text, model.back().text + ".cuda()") << preset;
    EXPECT_EQ(text_of(model).find(".cuda()"), std::string::npos) << text_of(model);

    DdpProgramOptions o;
    o.preset = preset;
    o.ranks = 3;
    o.rows = 10;
    o.bucket_bytes = 88;
    const auto script = ddp_program(o);
    const std::string text = text_of(script);
    EXPECT_NE(text.find(text_of(model)), std::string::npos) << "the DataParallel program's model, whole:\n" << text;
    EXPECT_NE(text.find("--nproc_per_node=3"), std::string::npos) << text;
    EXPECT_NE(text.find("batch_size=4,"), std::string::npos) << "ceil(10 / 3) per process:\n" << text;
    EXPECT_NE(text.find("bucket_cap_mb=88 / 2**20"), std::string::npos) << text;
    const auto defines = std::count_if(script.begin(), script.end(), [](const ProgramLine& l) { return l.layer >= 0; });
    EXPECT_EQ(static_cast<size_t>(defines), preset_model(preset).layers.size()) << preset;
  }
  EXPECT_THROW(ddp_program(DdpProgramOptions{"no-such-preset"}), Error);
}

TEST(SampleProgram, EveryDdpStageHasItsLineInTheScriptAndTheSource) {
  for (const auto& program : {ddp_program(DdpProgramOptions{}), ddp_source_program()}) {
    std::set<StageKind> named;
    for (const auto& line : program) named.insert(line.stages.begin(), line.stages.end());
    for (StageKind k : {StageKind::Construct, StageKind::Sample, StageKind::BroadcastBuffers, StageKind::Forward, StageKind::Loss,
                        StageKind::Backward, StageKind::Finalize, StageKind::Step}) {
      EXPECT_TRUE(named.count(k)) << stage_kind_name(k);
    }
  }
}

}  // namespace
}  // namespace dpv::course
