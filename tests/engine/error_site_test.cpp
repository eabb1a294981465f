// The engine error's typed facts: the Python class, the reason and the site (replica, rank,
// device, stage) travel with the error, so front ends decide on them instead of the message text.
#include <gtest/gtest.h>

#include <cerrno>
#include <functional>
#include <optional>

#include "dp_test_support.h"
#include "engine/ddp/ddp.h"
#include "engine/error.h"
#include "engine/io/atomic_file.h"
#include "tests/support/errors.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

// The plan index of the forward of `layer`.
int forward_stage_of(const std::vector<Stage>& plan, int layer) {
  for (size_t i = 0; i < plan.size(); ++i)
    if (plan[i].kind == StageKind::Forward && plan[i].layer == layer) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST(ErrorSite, ClassNamesAreWhatPythonPrints) {
  EXPECT_STREQ(error_class_name(ErrorClass::ValueError), "ValueError");
  EXPECT_STREQ(error_class_name(ErrorClass::OutOfMemoryError), "OutOfMemoryError");
  EXPECT_STREQ(error_class_name(ErrorClass::NotADirectoryError), "NotADirectoryError");
  const Error plain("boom");
  EXPECT_EQ(plain.error_class(), ErrorClass::RuntimeError);
  EXPECT_EQ(plain.reason(), ErrorReason::Unspecified);
  EXPECT_EQ(plain.site().replica, -1);
  EXPECT_EQ(plain.site().rank, -1);
  EXPECT_EQ(plain.site().stage, -1);
  EXPECT_EQ(plain.full(), "RuntimeError: boom");
}

TEST(ErrorSite, RewordingKeepsClassReasonAndSite) {
  Error inner("Expected more than 1 value per channel", ErrorClass::ValueError, ErrorReason::BatchNormSingleValue);
  inner.at_replica(2, 2).at_stage(5);
  const Error outer = inner.reworded("layer 1: " + std::string(inner.what()));
  EXPECT_EQ(std::string(outer.what()), "layer 1: Expected more than 1 value per channel");
  EXPECT_EQ(outer.error_class(), ErrorClass::ValueError);
  EXPECT_EQ(outer.reason(), ErrorReason::BatchNormSingleValue);
  EXPECT_EQ(outer.site().replica, 2);
  EXPECT_EQ(outer.site().device, 2);
  EXPECT_EQ(outer.site().stage, 5);
  // The innermost stage is the one that failed; a later layer does not move it.
  Error again = outer;
  again.at_stage(9);
  EXPECT_EQ(again.site().stage, 5);
}

TEST(ErrorSite, FileErrorsCarryTheClassOfTheirErrno) {
  EXPECT_EQ(file_error(ENOENT, "/x").error_class(), ErrorClass::FileNotFoundError);
  EXPECT_EQ(file_error(EACCES, "/x").error_class(), ErrorClass::PermissionError);
  EXPECT_EQ(file_error(EISDIR, "/x").error_class(), ErrorClass::IsADirectoryError);
  EXPECT_EQ(file_error(ENOTDIR, "/x").error_class(), ErrorClass::NotADirectoryError);
  EXPECT_EQ(file_error(EIO, "/x").error_class(), ErrorClass::OSError);
}

TEST(ErrorSite, DataParallelNamesTheReplicaAndStageOfAOneSampleChunk) {
  const ModelSpec spec = mlp_bn();
  const Batch batch = random_batch(10, 4, 3, 8);  // torch.chunk: 3,3,3,1
  Trainer trainer(DeviceSet::create("cpu:4"), Model(spec), Model(spec).initial_state(1), {});
  Iteration it(trainer, batch.input, batch.target);
  const auto error = caught([&] { it.run_to_end(); });
  ASSERT_TRUE(error.has_value()) << "the one-sample chunk did not fail";
  EXPECT_EQ(error->error_class(), ErrorClass::ValueError);
  EXPECT_EQ(error->reason(), ErrorReason::BatchNormSingleValue);
  EXPECT_EQ(error->site().replica, 3);
  EXPECT_EQ(error->site().device, 3);
  EXPECT_EQ(error->site().rank, -1);
  EXPECT_EQ(error->site().stage, forward_stage_of(it.plan(), 1));  // layer 1 is the BatchNorm
  EXPECT_GE(error->site().stage, 0);
}

TEST(ErrorSite, DataParallelOnOneDeviceHasNoReplica) {
  // One device: the module is called directly, as DataParallel does, and nothing is wrapped.
  const ModelSpec spec = mlp_bn();
  const Batch batch = random_batch(1, 4, 3, 8);
  Trainer trainer(DeviceSet::create("cpu:1"), Model(spec), Model(spec).initial_state(1), {});
  Iteration it(trainer, batch.input, batch.target);
  const auto error = caught([&] { it.run_to_end(); });
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->reason(), ErrorReason::BatchNormSingleValue);
  EXPECT_EQ(error->site().replica, -1);
  EXPECT_EQ(error->site().stage, forward_stage_of(it.plan(), 1));
}

TEST(ErrorSite, DdpReportsTheFailingRankNotOneWokenByTheAbort) {
  const ModelSpec spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(9);
  const Batch four = random_batch(4, 4, 3, 17);  // one sample per rank: plain BatchNorm refuses
  DdpTrainer trainer(DeviceSet::create("cpu:4"), Model(spec), state, {});
  DdpIteration it(trainer, four.input, four.target);
  std::optional<Error> error;
  while (!error && !it.finished()) error = caught([&] { it.step(); });
  ASSERT_TRUE(error.has_value()) << "one sample per rank did not fail";
  EXPECT_EQ(error->reason(), ErrorReason::BatchNormSingleValue);
  EXPECT_NE(error->reason(), ErrorReason::GroupAborted);
  EXPECT_GE(error->site().rank, 0);
  EXPECT_LT(error->site().rank, 4);
  EXPECT_EQ(error->site().replica, -1);
  EXPECT_EQ(error->site().stage, forward_stage_of(it.plan(), 1));
}

TEST(ErrorSettings, RewordingKeepsTheSettingsAnErrorIsAbout) {
  Error e = Error("MASTER_PORT=0x is not a TCP port", ErrorClass::ValueError).about_settings({"MASTER_PORT"});
  const Error again = e.reworded("rank 1: " + std::string(e.what()));
  EXPECT_EQ(again.settings(), std::vector<std::string>{"MASTER_PORT"});
  EXPECT_EQ(again.error_class(), ErrorClass::ValueError);
  EXPECT_TRUE(Error("no settings").settings().empty());
}
