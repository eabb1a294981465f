// Free cores (engine/free_cores.h) and what the engine does with them: the figure from the process's
// own threads' CPU time and run-queue wait, the hand-off pool's thread limit, independent device work
// on at most a thread per usable CPU, and stepped DDP ranks on one CPU (with and without a
// communication hook) with the same results, bit for bit, as ranks that run through on their own threads.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include "dp_test_support.h"
#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_output.h"
#include "engine/device.h"
#include "engine/free_cores.h"
#include "engine/handoff_pool.h"
#include "quiet_machine.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

// A process on `usable` CPUs whose threads, every 100 ms of the test's own clock, ran `running` CPUs
// and waited for `waiting` more on average.
class ScriptedLoad {
 public:
  explicit ScriptedLoad(unsigned usable) : usable_(usable) {
    FreeCores::set_reader_for_testing([this] { return CoreSample{usable_, wall_, cpu_, wait_, true}; });
  }
  ~ScriptedLoad() { FreeCores::set_reader_for_testing(nullptr); }
  // Another 100 ms with this load, then a sample.
  CoreLoad next(double running, double waiting) {
    constexpr int64_t kStep = 100'000'000;
    wall_ += kStep;
    cpu_ += static_cast<int64_t>(running * kStep);
    wait_ += static_cast<int64_t>(waiting * kStep);
    return FreeCores::sample_now();
  }

 private:
  unsigned usable_;
  int64_t wall_ = 1, cpu_ = 0, wait_ = 0;
};

// A process that may run on one CPU only (an affinity mask of one).
class OneCpu {
 public:
  OneCpu() { FreeCores::set_reader_for_testing([] { return CoreSample{1, 0, 0, 0, false}; }); }
  ~OneCpu() { FreeCores::set_reader_for_testing(nullptr); }
};

std::set<std::thread::id> threads_of_run(HandoffPool& pool, int count, int max_threads) {
  std::vector<std::thread::id> ids(static_cast<size_t>(count));
  pool.run(count, [&](int i) { ids[static_cast<size_t>(i)] = std::this_thread::get_id(); }, true, max_threads);
  return {ids.begin(), ids.end()};
}

}  // namespace

TEST(FreeCores, ThreadsWaitingForACpuCutTheFreeCoresToTheCpusTheProcessGot) {
  ScriptedLoad load(2);
  EXPECT_EQ(load.next(0, 0).free_cores(), 2u);          // the first sample knows nothing yet
  EXPECT_EQ(load.next(1.9, 0.02).free_cores(), 2u);     // two threads busy, next to nothing waits
  // Four threads of its own on two CPUs: they wait for each other, but the process gets both CPUs.
  const CoreLoad own = load.next(1.95, 2.0);
  EXPECT_EQ(own.free_cores(), 2u);
  EXPECT_FALSE(own.cores_taken());
  const CoreLoad busy = load.next(1.3, 0.7);             // another process took a core's worth
  EXPECT_NEAR(busy.waiting, 0.7, 1e-6);
  EXPECT_NEAR(busy.running, 1.3, 1e-6);
  EXPECT_EQ(busy.free_cores(), 1u);
  EXPECT_TRUE(busy.cores_taken());
  EXPECT_EQ(busy.threads_for(4), 2);  // threads follow the usable CPUs; the free cores are reported
  // One thread now: it runs without waiting, but that says nothing of the second core until a second
  // has passed; then both are tried again, and cut again if the threads wait.
  for (int i = 0; i < 9; ++i) EXPECT_EQ(load.next(1.0, 0.0).free_cores(), 1u) << i;
  EXPECT_EQ(load.next(1.0, 0.0).free_cores(), 2u);
  EXPECT_EQ(load.next(1.3, 0.7).free_cores(), 1u);
  // A little waiting (a compiler now and then) keeps what was decided.
  for (int i = 0; i < 12; ++i) EXPECT_EQ(load.next(1.0, 0.1).free_cores(), 1u) << i;
}

TEST(FreeCores, ThreadCountsAndManyCores) {
  ScriptedLoad load(16);
  load.next(0, 0);
  const CoreLoad got = load.next(12.6, 3.0);  // 16 threads busy, 12.6 CPUs' worth granted
  EXPECT_EQ(got.free_cores(), 13u);
  EXPECT_TRUE(got.cores_taken());
  EXPECT_EQ(got.threads_for(4), 4);
  EXPECT_EQ(got.threads_for(32), 16);
  EXPECT_EQ((CoreLoad{2, 1, 0, 0}).threads_for(0), 1);  // never none
}

TEST(FreeCores, TheRealReadingSeesThisThreadsCpuTime) {
  const CoreSample before = FreeCores::read_machine();
  EXPECT_GE(before.usable, 1u);
  if (!before.readable) GTEST_SKIP() << "no /proc/self/task/*/schedstat on this kernel";
  volatile double x = 0;  // a few milliseconds of CPU
  for (int i = 0; i < 3'000'000; ++i) x = x + 1.0 / (i + 1);
  const CoreSample after = FreeCores::read_machine();
  EXPECT_GT(after.cpu_ns, before.cpu_ns);
  EXPECT_GE(after.wait_ns, before.wait_ns);
  EXPECT_GT(after.wall_ns, before.wall_ns);
}

TEST(HandoffPool, ALimitedStealableRunUsesAtMostThatManyThreads) {
  HandoffPool pool(3);
  const auto caller = std::this_thread::get_id();
  for (int run = 0; run < 200; ++run) {
    EXPECT_EQ(threads_of_run(pool, 4, 1), std::set<std::thread::id>{caller});
    EXPECT_LE(threads_of_run(pool, 4, 2).size(), 2u);
    EXPECT_LE(threads_of_run(pool, 3, 3).size(), 3u);
  }
  // Jobs that may wait for one another keep a thread each, whatever the limit.
  std::atomic<int> arrived{0};
  pool.run(3, [&](int) {
    arrived.fetch_add(1);
    while (arrived.load() < 3) std::this_thread::yield();
  }, false, 1);
  EXPECT_EQ(arrived.load(), 3);
}

TEST(DeviceSetRunParallel, IndependentWorkRunsOnTheCallerOnOneCpu) {
  auto devs = DeviceSet::create("cpu:2");
  std::vector<std::thread::id> ids(2);
  auto record = [&](int i) { ids[static_cast<size_t>(i)] = std::this_thread::get_id(); };
  {
    OneCpu one_cpu;  // two devices, one CPU: one thread runs both jobs
    for (int run = 0; run < 50; ++run) {
      devs->run_parallel(2, record, DeviceSet::kIndependentWork);
      ASSERT_EQ(ids[1], std::this_thread::get_id()) << "run " << run;
    }
  }
  {
    QuietMachine quiet;
    // Job 0 waits (up to 10 s) for job 1 to start, so the caller, done with job 0, finds nothing
    // left to steal: with a free core each, device 1's job runs on device 1's thread.
    std::atomic<bool> started{false};
    devs->run_parallel(2, [&](int i) {
      record(i);
      if (i == 1) started = true;
      const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (i == 0 && !started.load() && std::chrono::steady_clock::now() < give_up) std::this_thread::yield();
    }, DeviceSet::kIndependentWork);
    EXPECT_NE(ids[1], std::this_thread::get_id());
  }
}

// Stepped (as the app steps an iteration), the ranks' independent stages run on at most a thread per
// CPU. A hook's collectives run inside the backward on the ranks' own threads: on one CPU the
// backward must still give every rank its own thread, or rank 0 would wait in the hook's
// all-reduce for rank 1, whose backward the same thread would run only after it. Same bits as ranks
// that run through on many CPUs, with and without a hook.
TEST(Ddp, SteppedRanksOnOneCpuEqualRanksRunThroughEvenWithACommHook) {
  for (const CommHookKind kind : {CommHookKind::None, CommHookKind::AllReduce, CommHookKind::PowerSgd}) {
    DdpOptions o;
    o.optimizer.lr = 0.05;
    o.optimizer.momentum = 0.9;
    o.comm_hook.kind = kind;
    o.comm_hook.powersgd.start_powerSGD_iter = 2;  // compresses from the second iteration
    const auto spec = mlp_bn(DType::Float32);
    const TensorMap state = Model(spec).initial_state(5);
    const Batch batch = random_batch(12, 4, 3, 9, DType::Float32);
    auto run = [&](bool busy) {
      std::unique_ptr<OneCpu> busy_machine;
      std::unique_ptr<QuietMachine> quiet_machine;
      if (busy)
        busy_machine = std::make_unique<OneCpu>();
      else
        quiet_machine = std::make_unique<QuietMachine>();
      DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), state, o);
      for (int s = 0; s < 3; ++s) {
        DdpIteration it(trainer, batch.input, batch.target);
        if (busy)
          while (!it.finished()) it.step();
        else
          it.run_to_end();
      }
      return ddp_step_output(trainer.results(), DType::Float32);
    };
    const auto quiet = run(false);
    const auto busy = run(true);
    ASSERT_EQ(quiet.tensors.names(), busy.tensors.names());
    for (const auto& [name, t] : quiet.tensors.items())
      EXPECT_EQ(t.to_doubles(), busy.tensors.at(name).to_doubles()) << comm_hook_name(kind) << " " << name;
  }
}
