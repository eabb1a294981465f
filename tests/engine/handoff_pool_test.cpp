// The device threads' hand-off (HandoffPool, DeviceSet::run_parallel): every job runs exactly once
// per run on its own thread (job 0 on the caller), jobs really run at the same time (they can wait
// for each other, as DDP ranks do), nested and concurrent runs neither deadlock nor mix, small
// independent work runs inline, an idle pool parks instead of spinning, independent jobs whose
// thread the scheduler does not run are run by the caller, and jobs that wait for one another are not.
// Also run under ThreadSanitizer in CI (the tsan preset).
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <ctime>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/handoff_pool.h"
#include "engine/spin_wait.h"
#include "quiet_machine.h"

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
  // Three threads spinning through a 300 ms window would use about 0.9 s of CPU; parked ones use
  // none. Libraries' threads started with the process can be busy in the first window (OpenBLAS's
  // spin for about 2^28 cycles after start-up used 0.106 s of one on a loaded machine), so the test
  // waits up to five windows for a quiet one; a spinning pool never has one.
  double used = 0;
  for (int window = 0; window < 5; ++window) {
    const double before = process_cpu_seconds();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    used = process_cpu_seconds() - before;
    if (used < 0.1) break;
  }
  EXPECT_LT(used, 0.1) << "the idle pool used CPU in every 300 ms window";
}

TEST(DeviceSetRunParallel, SmallIndependentWorkRunsInlineLargeWorkOnTheDevices) {
  dpv::testing::QuietMachine quiet;  // a free core per device: independent work spreads over all of them
  auto devs = DeviceSet::create("cpu:4");
  const auto caller = std::this_thread::get_id();
  auto threads_used = [&](int64_t bytes_moved, bool handed_off) {
    std::vector<std::thread::id> ids(4);
    // Handed off, job 0 waits (up to 10 s) until the others have started, so that the caller, done
    // with job 0, finds none left to run itself: independent jobs run on their devices' threads.
    std::atomic<int> started{0};
    devs->run_parallel(4, [&](int i) {
      ids[static_cast<size_t>(i)] = std::this_thread::get_id();
      if (i > 0) started.fetch_add(1);
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (handed_off && i == 0 && started.load() < 3 && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }, bytes_moved);
    return std::set<std::thread::id>(ids.begin(), ids.end());
  };
  EXPECT_EQ(threads_used(88, false), std::set<std::thread::id>{caller});
  EXPECT_EQ(threads_used(DeviceSet::kInlineBytes - 1, false), std::set<std::thread::id>{caller});
  EXPECT_EQ(threads_used(DeviceSet::kInlineBytes, true).size(), 4u);
  EXPECT_EQ(threads_used(DeviceSet::kIndependentWork, true).size(), 4u);
  EXPECT_EQ(threads_used(-1, true).size(), 4u);  // jobs that wait for each other
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

namespace {

// Holds one thread still in a signal handler until released: a device thread that the scheduler
// does not run, as on a machine with more runnable threads than free cores. A watchdog releases it
// after `patience` so that a run waiting for it ends (and the test can tell that it waited).
// ThreadSanitizer defers a signal to a thread parked in the futex until it wakes, so there the
// thread cannot be held on demand: the tests that hold one skip themselves.
#if defined(__SANITIZE_THREAD__)
constexpr bool kCanHoldThreads = false;
#else
constexpr bool kCanHoldThreads = true;
#endif

class HeldThread {
 public:
  HeldThread(pthread_t thread, std::chrono::milliseconds patience) {
    held_.store(false);
    released_.store(false);
    struct sigaction action {};
    action.sa_handler = [](int) {
      held_.store(true);
      const timespec nap{0, 100'000};
      while (!released_.load()) nanosleep(&nap, nullptr);
      held_.store(false);
    };
    sigemptyset(&action.sa_mask);
    sigaction(SIGUSR2, &action, &previous_);
    pthread_kill(thread, SIGUSR2);
    while (!held_.load()) std::this_thread::yield();
    watchdog_ = std::thread([this, patience] {
      std::unique_lock lock(mutex_);
      if (!done_cv_.wait_for(lock, patience, [this] { return done_; })) released_by_watchdog_.store(true);
      released_.store(true);
    });
  }
  ~HeldThread() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    done_cv_.notify_one();
    watchdog_.join();
    while (held_.load()) std::this_thread::yield();  // the thread has left the handler
    sigaction(SIGUSR2, &previous_, nullptr);
  }
  bool released_by_watchdog() const { return released_by_watchdog_.load(); }

 private:
  static inline std::atomic<bool> held_{false}, released_{false};
  struct sigaction previous_ {};
  std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::atomic<bool> released_by_watchdog_{false};
  std::thread watchdog_;
};

// Which thread ran each job of one run, and how often each job ran.
struct RunRecord {
  std::vector<std::atomic<int>> hits = std::vector<std::atomic<int>>(4);
  std::vector<std::thread::id> ids = std::vector<std::thread::id>(4);
  std::function<void(int)> job() {
    return [this](int i) {
      hits[static_cast<size_t>(i)].fetch_add(1);
      ids[static_cast<size_t>(i)] = std::this_thread::get_id();
    };
  }
};

// The pthread of each pool thread, by job index (job i runs on pool thread i - 1 when not stolen).
std::vector<pthread_t> pool_threads(const std::function<void(const std::function<void(int)>&)>& run_on_devices) {
  std::vector<pthread_t> threads(4);
  run_on_devices([&](int i) { threads[static_cast<size_t>(i)] = pthread_self(); });
  return threads;
}

}  // namespace

TEST(HandoffPool, CallerRunsIndependentJobsWhoseThreadHasNotStarted) {
  if (!kCanHoldThreads) GTEST_SKIP() << "ThreadSanitizer defers the signal that holds a thread";
  HandoffPool pool(3);
  const auto threads = pool_threads([&](const std::function<void(int)>& job) { pool.run(4, job); });
  RunRecord record;
  {
    HeldThread held(threads[2], std::chrono::seconds(5));
    pool.run(4, record.job(), /*caller_may_steal=*/true);
    EXPECT_FALSE(held.released_by_watchdog()) << "the run waited for a thread that the scheduler did not run";
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(record.hits[static_cast<size_t>(i)].load(), 1) << "job " << i;
  EXPECT_EQ(record.ids[2], std::this_thread::get_id());
  EXPECT_EQ(record.ids[0], std::this_thread::get_id());
  // The held thread woke to a job already run: it did not run it again, and takes the next runs.
  for (int run = 0; run < 500; ++run) {
    RunRecord next;
    pool.run(4, next.job());
    for (int i = 0; i < 4; ++i) ASSERT_EQ(next.hits[static_cast<size_t>(i)].load(), 1) << "run " << run;
    ASSERT_EQ(std::set<std::thread::id>(next.ids.begin(), next.ids.end()).size(), 4u) << "run " << run;
  }
}

TEST(HandoffPool, StealingRunsEveryJobOnceUnderContention) {
  // Many short stealing runs: whichever thread claims a job, it runs exactly once.
  HandoffPool pool(3);
  for (int run = 0; run < 3000; ++run) {
    const int count = 2 + run % 3;
    RunRecord record;
    pool.run(count, record.job(), true);
    for (int i = 0; i < 4; ++i) ASSERT_EQ(record.hits[static_cast<size_t>(i)].load(), i < count ? 1 : 0) << "run " << run;
  }
}

TEST(DeviceSetRunParallel, OnlyIndependentWorkIsRunByTheCallerWhenADeviceThreadIsLate) {
  if (!kCanHoldThreads) GTEST_SKIP() << "ThreadSanitizer defers the signal that holds a thread";
  auto devs = DeviceSet::create("cpu:3");
  const auto threads = pool_threads([&](const std::function<void(int)>& job) { devs->run_parallel(3, job); });
  {
    // Independent replica work: the caller runs device 1's job itself.
    RunRecord record;
    HeldThread held(threads[1], std::chrono::seconds(5));
    devs->run_parallel(3, record.job(), DeviceSet::kIndependentWork);
    EXPECT_FALSE(held.released_by_watchdog());
    EXPECT_EQ(record.ids[1], std::this_thread::get_id());
  }
  {
    // Jobs that may wait for one another (DDP ranks in a collective) each keep their own thread.
    RunRecord record;
    HeldThread held(threads[1], std::chrono::milliseconds(200));
    devs->run_parallel(3, record.job());
    EXPECT_TRUE(held.released_by_watchdog());
    EXPECT_NE(record.ids[1], std::this_thread::get_id());
    EXPECT_EQ(record.hits[1].load(), 1);
  }
}

TEST(SpinPolicy, TwoLostCoresInAShortWhileParkWaitersAtOnceForAWhile) {
  using Clock = SpinPolicy::Clock;
  SpinPolicy::reset();
  const auto t = Clock::now();
  EXPECT_TRUE(SpinPolicy::spinning_pays(t));
  SpinPolicy::note_turn(t, kSpinBeforePark / 4);  // a normal turn: a pause or an uncontended yield
  EXPECT_TRUE(SpinPolicy::spinning_pays(t));
  EXPECT_FALSE(SpinPolicy::note_turn(t, 2 * kSpinBeforePark));  // an interrupt: this waiter's budget is gone
  EXPECT_FALSE(SpinPolicy::note_turn(t, 2 * kSpinBeforePark));  // however often
  EXPECT_TRUE(SpinPolicy::spinning_pays(t));
  EXPECT_FALSE(SpinPolicy::note_turn(t, 2 * kLostCoreGap));  // another thread had this core: this waiter parks
  EXPECT_TRUE(SpinPolicy::spinning_pays(t));  // one lost core may be an interrupt: the others spin on
  const auto later = t + kLostCoresWithin + std::chrono::milliseconds(1);
  EXPECT_FALSE(SpinPolicy::note_turn(later, 2 * kLostCoreGap));  // a second, but not soon after
  EXPECT_TRUE(SpinPolicy::spinning_pays(later));
  {
    // Our own communication thread's burst is not counted, however often it takes a core.
    const SpinPolicy::HelperRunning helper;
    EXPECT_FALSE(SpinPolicy::note_turn(later, 2 * kLostCoreGap));
    EXPECT_FALSE(SpinPolicy::note_turn(later, 2 * kLostCoreGap));
    EXPECT_TRUE(SpinPolicy::spinning_pays(later));
  }
  const auto soon = later + kLostCoresWithin / 2;
  EXPECT_FALSE(SpinPolicy::note_turn(soon, 2 * kLostCoreGap));  // two within kLostCoresWithin: short of cores
  EXPECT_FALSE(SpinPolicy::spinning_pays(soon));
  EXPECT_FALSE(SpinPolicy::spinning_pays(soon + kParkAtOnceFor / 2));
  EXPECT_TRUE(SpinPolicy::spinning_pays(soon + kParkAtOnceFor));
  // Parked waiters still see every change.
  HandoffPool pool(3);
  for (int run = 0; run < 200; ++run) {
    SpinPolicy::lost_core(Clock::now());
    RunRecord record;
    pool.run(4, record.job());
    for (int i = 0; i < 4; ++i) ASSERT_EQ(record.hits[static_cast<size_t>(i)].load(), 1);
  }
  SpinPolicy::reset();
}
