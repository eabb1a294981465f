// engine/cuda/group_guard.h through its seam: a fake NCCL that counts open groups and fails on
// demand proves the group always ends, whatever throws in between (no CUDA needed).
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "engine/cuda/group_guard.h"
#include "engine/error.h"

namespace dpv {
namespace {

// The fake NCCL: group depth and call counts, and which call fails next.
struct FakeNccl {
  static inline int depth = 0, starts = 0, ends = 0;
  static inline bool fail_start = false, fail_end = false;
  static void reset() { depth = starts = ends = 0, fail_start = fail_end = false; }
  static int start() {
    ++starts;
    if (fail_start) return 3;
    ++depth;
    return 0;
  }
  static int end() {
    ++ends;
    --depth;  // ncclGroupEnd closes the group even when the launch it makes fails
    return fail_end ? 5 : 0;
  }
  static std::string describe(int status) { return "fake NCCL error " + std::to_string(status); }
  static GroupCalls calls() { return {&FakeNccl::start, &FakeNccl::end, &FakeNccl::describe}; }
};

class GroupGuardTest : public ::testing::Test {
 protected:
  void SetUp() override { FakeNccl::reset(); }
};

TEST_F(GroupGuardTest, EndsTheGroupOnTheNormalPath) {
  {
    GroupGuard group(FakeNccl::calls());
    EXPECT_EQ(FakeNccl::depth, 1);
    group.end();
    EXPECT_FALSE(group.open());
  }
  EXPECT_EQ(FakeNccl::depth, 0);
  EXPECT_EQ(FakeNccl::ends, 1) << "the destructor must not end the group a second time";
}

TEST_F(GroupGuardTest, EndsTheGroupWhenACallInsideThrows) {
  try {
    GroupGuard group(FakeNccl::calls());
    throw Error("ncclAllReduce failed: NCCL: invalid argument");  // a DPV_CUDA_CHECK inside the group
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ncclAllReduce failed: NCCL: invalid argument") << "the first error survives";
  }
  EXPECT_EQ(FakeNccl::depth, 0) << "a group left open would swallow every later NCCL call on this thread";
  EXPECT_EQ(FakeNccl::ends, 1);
  // The next group on this thread is a fresh one, not nested.
  GroupGuard next(FakeNccl::calls());
  EXPECT_EQ(FakeNccl::depth, 1);
  next.end();
  EXPECT_EQ(FakeNccl::depth, 0);
}

TEST_F(GroupGuardTest, AFailedEndIsReportedOnce) {
  FakeNccl::fail_end = true;
  try {
    GroupGuard group(FakeNccl::calls());
    group.end();
    ADD_FAILURE() << "a failed ncclGroupEnd was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ncclGroupEnd failed: fake NCCL error 5");
  }
  EXPECT_EQ(FakeNccl::ends, 1);
  EXPECT_EQ(FakeNccl::depth, 0);
}

TEST_F(GroupGuardTest, AFailedStartOpensNothingAndEndsNothing) {
  FakeNccl::fail_start = true;
  try {
    GroupGuard group(FakeNccl::calls());
    ADD_FAILURE() << "a failed ncclGroupStart was not reported";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ncclGroupStart failed: fake NCCL error 3");
  }
  EXPECT_EQ(FakeNccl::ends, 0);
  EXPECT_EQ(FakeNccl::depth, 0);
}

TEST_F(GroupGuardTest, AnyExceptionTypeEndsTheGroup) {
  EXPECT_THROW(
      {
        GroupGuard group(FakeNccl::calls());
        throw std::runtime_error("not a dpv::Error");
      },
      std::runtime_error);
  EXPECT_EQ(FakeNccl::depth, 0);
}

}  // namespace
}  // namespace dpv
