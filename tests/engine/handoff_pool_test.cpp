// The device threads' hand-off (HandoffPool, DeviceSet::run_parallel): every job runs exactly once
// per run on its own thread (job 0 on the caller), jobs really run at the same time (they can wait
// for each other, as DDP ranks do), nested and concurrent runs neither deadlock nor mix, small
// independent work runs inline, and an idle pool parks instead of spinning.
// Also run under ThreadSanitizer in CI (the tsan preset).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <set>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/handoff_pool.h"

using namespace dpv;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

TEST(HandoffPool, EveryJobRunsOnceOnItsOwnThreadJobZeroOnTheCaller) {
  HandoffPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  for (int run = 0; run < 2000; ++run) {
    const int count = 1 + run % 4;
    std::vector<std::atomic<int>> hits(4);
    std::vector<std::thread::id> ids(4);
    pool.run(count, [&](int i) {
      hits[static_cast<size_t>(i)].fetch_add(1);
      ids[static_cast<size_t>(i)] = std::this_thread::get_id();
    });
    for (int i = 0; i < 4; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), i < count ? 1 : 0) << "run " << run;
    ASSERT_EQ(ids[0], std::this_thread::get_id());
    std::set<std::thread::id> distinct(ids.begin(), ids.begin() + count);
    ASSERT_EQ(distinct.size(), static_cast<size_t>(count)) << "run " << run;
  }
}

TEST(HandoffPool, JobsRunAtTheSameTime) {
  // Every job waits until all of them have started: only possible when they run concurrently.
  HandoffPool pool(3);
  for (int run = 0; run < 200; ++run) {
    std::atomic<int> started{0};
    pool.run(4, [&](int) {
      started.fetch_add(1);
      while (started.load() < 4) std::this_thread::yield();
    });
    ASSERT_EQ(started.load(), 4);
  }
}

TEST(HandoffPool, NestedRunRunsInline) {
  HandoffPool pool(1);
  std::atomic<int> inner{0};
  pool.run(2, [&](int) { pool.run(2, [&](int) { inner.fetch_add(1); }); });
  EXPECT_EQ(inner.load(), 4);
}

TEST(HandoffPool, ConcurrentCallersTakeTurns) {
  HandoffPool pool(2);
  std::atomic<int> total{0};
  auto caller = [&] {
    for (int run = 0; run < 500; ++run) pool.run(3, [&](int i) { total.fetch_add(i + 1); });
  };
  std::thread a(caller), b(caller);
  a.join();
  b.join();
  EXPECT_EQ(total.load(), 2 * 500 * (1 + 2 + 3));
}

TEST(HandoffPool, IdlePoolParksInsteadOfSpinning) {
  HandoffPool pool(3);
  for (int run = 0; run < 100; ++run) pool.run(4, [](int) {});
  const double before = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Three threads spinning through the sleep would use about 0.9 s of CPU; parked ones use none.
  EXPECT_LT(process_cpu_seconds() - before, 0.1);
}

TEST(DeviceSetRunParallel, SmallIndependentWorkRunsInlineLargeWorkOnTheDevices) {
  auto devs = DeviceSet::create("cpu:4");
  const auto caller = std::this_thread::get_id();
  auto threads_used = [&](int64_t bytes_moved) {
    std::vector<std::thread::id> ids(4);
    devs->run_parallel(4, [&](int i) { ids[static_cast<size_t>(i)] = std::this_thread::get_id(); }, bytes_moved);
    return std::set<std::thread::id>(ids.begin(), ids.end());
  };
  EXPECT_EQ(threads_used(88), std::set<std::thread::id>{caller});
  EXPECT_EQ(threads_used(DeviceSet::kInlineBytes - 1), std::set<std::thread::id>{caller});
  EXPECT_EQ(threads_used(DeviceSet::kInlineBytes).size(), 4u);
  EXPECT_EQ(threads_used(-1).size(), 4u);  // unknown work, or jobs that wait for each other
}

TEST(DeviceSetRunParallel, LowestFailingIndexIsRethrownAfterEveryJobFinished) {
  auto devs = DeviceSet::create("cpu:4");
  for (int64_t bytes : {int64_t{-1}, int64_t{0}}) {
    std::atomic<int> finished{0};
    try {
      devs->run_parallel(4, [&](int i) {
        finished.fetch_add(1);
        if (i >= 2) throw Error("job " + std::to_string(i) + " failed");
      }, bytes);
      FAIL() << "no exception";
    } catch (const Error& e) {
      EXPECT_STREQ(e.what(), "job 2 failed");
    }
    EXPECT_EQ(finished.load(), 4);
    auto errors = devs->run_parallel_collect(4, [&](int i) {
      if (i == 1) throw Error("one");
    }, bytes);
    EXPECT_FALSE(errors[0]);
    EXPECT_TRUE(errors[1]);
    EXPECT_FALSE(errors[2]);
  }
}
