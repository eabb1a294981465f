// The end of a job: each rank says it is done under its own key in dpv's store, and the rank that
// hosts the store waits for all of them. A stranger's write to a shared key (any client of the
// store may write any key) must neither end the wait early nor make it fail.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/process_groups/multiprocess/init_process_group.h"
#include "engine/process_groups/multiprocess/tcp_store.h"
#include "engine/error.h"
#include "tests/support/errors.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;

RankEnv rank_env(int rank, int port) {
  RankEnv e;
  e.rank = rank;
  e.world_size = 2;
  e.local_rank = rank;
  e.local_world_size = 2;
  e.master_addr = "127.0.0.1";
  e.master_port = port;
  e.launcher = "torchrun";
  return e;
}

TEST(DistSessionShutdown, AStrangersWriteToDoneNeitherEndsNorBreaksIt) {
  DistOptions options;
  options.timeout = milliseconds(20000);
  const int port = check_store_port("127.0.0.1", 0);
  std::unique_ptr<DistSession> rank0, rank1;
  std::thread host([&] { rank0 = init_process_group(rank_env(0, port), options); });
  rank1 = init_process_group(rank_env(1, port), options);
  host.join();
  ASSERT_TRUE(rank0 && rank1);

  // What one stray client did to the old shared counter: bumped it, then made it no integer.
  TcpStore stranger("127.0.0.1", port, 2, milliseconds(5000));
  stranger.add("dpv/done", 1);
  stranger.set("dpv/done", to_bytes("not a number"));

  std::atomic<bool> rank1_finishing{false};
  bool rank1_had_begun = false;
  std::string rank0_error;
  std::thread finisher([&] {
    rank0_error = testing::error_of([&] { rank0->shutdown(); });
    rank1_had_begun = rank1_finishing.load();
  });
  rank1_finishing = true;
  EXPECT_EQ(testing::error_of([&] { rank1->shutdown(); }), testing::kNoError);
  finisher.join();
  EXPECT_EQ(rank0_error, testing::kNoError);
  EXPECT_TRUE(rank1_had_begun) << "the host's shutdown returned before rank 1 said it was done";
  rank1.reset();
  rank0.reset();
}

}  // namespace
}  // namespace dpv::dist
