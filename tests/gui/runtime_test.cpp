// gui/runtime: the one way off the GUI thread. A one-shot job's value arrives on the owner's thread,
// a job still running when its owner goes is waited for and its value dropped, a generation tells
// stale replies from current ones, and a worker thread stops cleanly.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QThread>
#include <atomic>
#include <memory>

#include "gui/runtime/generation.h"
#include "gui/runtime/run_off_thread.h"
#include "gui/runtime/worker_thread.h"
#include "gui_test_support.h"

namespace gui {

namespace {

// A worker that records the thread its slot ran on and whether its shutdown ran.
class EchoWorker : public QObject {
 public:
  explicit EchoWorker(std::atomic<bool>* shutDown) : shutDown_(shutDown) {}
  void shutdown() { shutDown_->store(true); }
  QThread* ranOn = nullptr;

 private:
  std::atomic<bool>* shutDown_;
};

}  // namespace

TEST(RuntimeTest, OneShotJobRunsOffThreadAndDeliversOnTheOwnersThread) {
  QObject owner;
  auto* runner = new OffThreadRunner(&owner);
  QThread* jobThread = nullptr;
  QThread* doneThread = nullptr;
  int value = 0;
  ASSERT_TRUE(runner->run(
      [&jobThread] {
        jobThread = QThread::currentThread();
        return 42;
      },
      [&](int v) {
        doneThread = QThread::currentThread();
        value = v;
      }));
  EXPECT_TRUE(runner->busy());
  EXPECT_FALSE(runner->run([] { return 0; }, [](int) {})) << "one job at a time";
  ASSERT_TRUE(waitUntil([&] { return value == 42; }));
  EXPECT_NE(jobThread, QThread::currentThread());
  EXPECT_EQ(doneThread, QThread::currentThread());
  EXPECT_FALSE(runner->busy());
}

TEST(RuntimeTest, OwnerDestroyedWhileTheJobRunsDropsTheValue) {
  auto called = std::make_shared<bool>(false);
  std::atomic<bool> release{false};
  {
    QObject owner;
    auto* runner = new OffThreadRunner(&owner);
    runner->run(
        [&release] {
          while (!release.load()) QThread::msleep(1);
          return 1;
        },
        [called](int) { *called = true; });
    release = true;  // the owner's destructor waits for the job to end
  }
  QCoreApplication::processEvents();
  EXPECT_FALSE(*called);
}

TEST(RuntimeTest, GenerationTellsStaleRepliesFromCurrentOnes) {
  Generation g;
  EXPECT_EQ(g.current(), 0u);
  const quint64 first = g.next();
  EXPECT_TRUE(g.isCurrent(first));
  const quint64 second = g.next();
  EXPECT_GT(second, first);
  EXPECT_FALSE(g.isCurrent(first));
  EXPECT_TRUE(g.isCurrent(second));
}

TEST(RuntimeTest, WorkerThreadRunsTheWorkerOffThreadAndStopsWithItsShutdown) {
  std::atomic<bool> shutDown{false};
  WorkerThread<EchoWorker> thread(QStringLiteral("echo"), &shutDown);
  thread.start();
  EchoWorker* worker = thread.worker();
  QMetaObject::invokeMethod(worker, [worker] { worker->ranOn = QThread::currentThread(); }, Qt::BlockingQueuedConnection);
  EXPECT_NE(worker->ranOn, nullptr);
  EXPECT_NE(worker->ranOn, QThread::currentThread());
  thread.stop(&EchoWorker::shutdown);
  EXPECT_TRUE(shutDown.load());
  EXPECT_FALSE(thread.running());
  EXPECT_EQ(thread.worker(), nullptr);
  thread.stop(&EchoWorker::shutdown);  // idempotent
}

}  // namespace gui
