// The NCCL process group's control flow without a GPU (engine/process_groups/comm_control.h), driven
// by fake polls and a fake abort: an operation pending for ever fails at its deadline (joining the
// group and a collective alike) with a message that says which one, after how long and what to
// check; a failure aborts once and names the library's words; every call after an abort says why
// the group was aborted; the teardown runs the communicator, then the buffers, then the stream.
#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/process_groups/comm_control.h"

namespace dpv {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kTimeout{100};

struct Fake {
  int aborts = 0;
  std::vector<std::string> log;
  CommControl control{"nccl", 1, 2, kTimeout, [this] {
                        ++aborts;
                        log.push_back("abort");
                      }};
};

Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "no dpv::Error was thrown";
  return Error("");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

TEST(CommControl, WaitReturnsOnceTheOperationIsDone) {
  Fake f;
  int polls = 0;
  f.control.wait("all_reduce", f.control.deadline_from_now(),
                 [&] { return ++polls < 3 ? CommPoll::pending() : CommPoll::done(); }, "check the peers");
  EXPECT_EQ(polls, 3);
  EXPECT_EQ(f.aborts, 0);
  EXPECT_FALSE(f.control.aborted());
  f.control.check_usable("broadcast");  // still usable
}

TEST(CommControl, ACollectivePendingForEverFailsAtTheDeadline) {
  Fake f;
  const Clock::time_point deadline = f.control.deadline_from_now();  // before the enqueue, as the group takes it
  int polls = 0;
  const Error e = error_of([&] {
    f.control.wait("all_reduce", deadline, [&] { return ++polls, CommPoll::pending(); }, "check that every rank is alive");
  });
  EXPECT_GE(Clock::now(), deadline);  // it waited the whole timeout, not less
  EXPECT_GT(polls, 1);
  EXPECT_EQ(f.aborts, 1);
  EXPECT_TRUE(f.control.aborted());
  const std::string m = e.what();
  EXPECT_TRUE(contains(m, "nccl all_reduce on rank 1 of 2 timed out after 0.1 s waiting for its peers")) << m;
  EXPECT_TRUE(contains(m, "check that every rank is alive")) << m;
  EXPECT_TRUE(contains(m, "restart the job")) << m;
  EXPECT_EQ(e.settings(), std::vector<std::string>{"DPV_TIMEOUT"});
}

TEST(CommControl, ARankThatNeverJoinsFailsTheInitAtTheDeadline) {
  Fake f;
  const Error e = error_of([&] {
    f.control.wait("ncclCommInitRank (joining the group)", f.control.deadline_from_now(),
                   [] { return CommPoll::pending(); }, "check that all ranks were started");
  });
  EXPECT_EQ(f.aborts, 1);
  const std::string m = e.what();
  EXPECT_TRUE(contains(m, "nccl ncclCommInitRank (joining the group) on rank 1 of 2 timed out after 0.1 s")) << m;
  EXPECT_TRUE(contains(m, "check that all ranks were started")) << m;
}

TEST(CommControl, AnAsyncErrorAbortsOnceAndKeepsTheLibrarysWords) {
  Fake f;
  const Error e = error_of([&] {
    f.control.wait("broadcast", f.control.deadline_from_now(),
                   [] { return CommPoll::failed("NCCL: remote process exited or there was a network error (peer 0)"); },
                   "check the peers");
  });
  EXPECT_EQ(f.aborts, 1);
  const std::string m = e.what();
  EXPECT_TRUE(contains(m, "nccl broadcast failed on rank 1 of 2 after ")) << m;
  EXPECT_TRUE(contains(m, "remote process exited or there was a network error (peer 0)")) << m;
}

TEST(CommControl, EveryCallAfterAnAbortSaysWhyTheGroupWasAborted) {
  Fake f;
  error_of([&] {
    f.control.wait("all_reduce", f.control.deadline_from_now(), [] { return CommPoll::pending(); }, "check");
  });
  const Error later = error_of([&] { f.control.check_usable("broadcast"); });
  const std::string m = later.what();
  EXPECT_TRUE(contains(m, "nccl broadcast on rank 1 of 2: the NCCL group was aborted after all_reduce timed out "
                          "after 0.1 s; restart the job")) << m;
  EXPECT_EQ(later.reason(), ErrorReason::GroupAborted);
  // A wait after the abort neither polls the dead communicator nor aborts it again.
  int polls = 0;
  const Error again = error_of([&] {
    f.control.wait("all_gather", f.control.deadline_from_now(), [&] { return ++polls, CommPoll::done(); }, "check");
  });
  EXPECT_EQ(polls, 0);
  EXPECT_EQ(f.aborts, 1);
  EXPECT_TRUE(contains(again.what(), "the NCCL group was aborted after all_reduce timed out")) << again.what();
}

TEST(CommControl, AnEnqueueErrorAbortsAndLaterCallsNameIt) {
  Fake f;
  const Error e = f.control.abort_after("all_gather", "NCCL: invalid argument (wrong count)");
  EXPECT_TRUE(contains(e.what(), "nccl all_gather failed on rank 1 of 2: NCCL: invalid argument (wrong count)"))
      << e.what();
  EXPECT_EQ(f.aborts, 1);
  const Error later = error_of([&] { f.control.check_usable("barrier"); });
  EXPECT_TRUE(contains(later.what(), "aborted after all_gather failed (NCCL: invalid argument (wrong count))"))
      << later.what();
}

CommTeardown logging_teardown(Fake& f, std::function<CommPoll()> poll) {
  CommTeardown t;
  t.finalize = [&f] { f.log.push_back("finalize"); };
  t.poll = [&f, poll] {
    if (f.log.back() != "poll") f.log.push_back("poll");
    return poll();
  };
  t.destroy_comm = [&f] { f.log.push_back("destroy_comm"); };
  t.free_buffers = [&f] { f.log.push_back("free_buffers"); };
  t.destroy_stream = [&f] { f.log.push_back("destroy_stream"); };
  return t;
}

TEST(CommControl, TeardownDestroysTheCommunicatorBeforeTheBuffersAndTheStream) {
  Fake f;
  f.control.close(logging_teardown(f, [] { return CommPoll::done(); }));
  EXPECT_EQ(f.log, (std::vector<std::string>{"finalize", "poll", "destroy_comm", "free_buffers", "destroy_stream"}));
  EXPECT_EQ(f.aborts, 0);
}

TEST(CommControl, TeardownAfterAnAbortLeavesTheCommunicatorAlone) {
  Fake f;
  (void)f.control.abort_after("all_reduce", "NCCL: unhandled system error");
  f.control.close(logging_teardown(f, [] { return CommPoll::done(); }));
  EXPECT_EQ(f.log, (std::vector<std::string>{"abort", "free_buffers", "destroy_stream"}));
}

TEST(CommControl, TeardownOnAnErrorAbortsInsteadOfWaitingForThePeers) {
  Fake f;
  f.control.close(logging_teardown(f, [] { return CommPoll::pending(); }), /*on_error=*/true);
  EXPECT_EQ(f.log, (std::vector<std::string>{"abort", "free_buffers", "destroy_stream"}));
}

TEST(CommControl, AFinalizeThatNeverEndsIsAbortedAtTheDeadline) {
  Fake f;
  f.control.close(logging_teardown(f, [] { return CommPoll::pending(); }));
  EXPECT_EQ(f.log, (std::vector<std::string>{"finalize", "poll", "abort", "free_buffers", "destroy_stream"}));
  EXPECT_EQ(f.aborts, 1);
}

TEST(CommControl, HostMemoryIsRejectedAndADeviceTensorPasses) {
  const Error e = error_of([] { require_device_tensor(Tensor::zeros({2}, DType::Float32), "broadcast"); });
  EXPECT_TRUE(contains(e.what(), "nccl broadcast: the tensor must be on this rank's GPU")) << e.what();
  EXPECT_EQ(e.settings(), std::vector<std::string>{"DPV_BACKEND"});
  const std::shared_ptr<DeviceSet> devices = DeviceSet::create("cpu:1");
  require_device_tensor(Tensor::zeros({2}, DType::Float32, devices->shared(0)), "broadcast");
}

}  // namespace
}  // namespace dpv
