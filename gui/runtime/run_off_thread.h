#pragma once
// The one way a one-shot job runs off the GUI thread: OffThreadRunner::run(job, done) runs `job` on
// a thread of its own and calls `done(value)` with what it returned on the owner's (GUI) thread,
// through a queued call. One job at a time. The runner is a child of the page that owns it:
// destroying the page waits for a job in progress and drops its value, so `done` never runs on a
// page that is gone. Pair it with a Generation (generation.h) when a later action makes a result
// stale. Used by the Quiz page's "run it" scenarios.
#include <QObject>
#include <QThread>
#include <utility>

namespace gui {

class OffThreadRunner : public QObject {
 public:
  explicit OffThreadRunner(QObject* owner) : QObject(owner) {}
  ~OffThreadRunner() override { finish(); }

  bool busy() const { return thread_ != nullptr; }

  // Starts `job` (callable with no arguments, returning a value) unless one is running; returns
  // whether it started. `job` must not touch GUI objects; `done` runs on this runner's thread.
  template <typename Job, typename Done>
  bool run(Job job, Done done) {
    if (thread_) return false;
    thread_ = QThread::create([this, job = std::move(job), done = std::move(done)]() mutable {
      auto value = job();
      QMetaObject::invokeMethod(
          this,
          [this, done = std::move(done), value = std::move(value)]() mutable {
            finish();
            done(std::move(value));
          },
          Qt::QueuedConnection);
    });
    thread_->start();
    return true;
  }

 private:
  void finish() {
    if (!thread_) return;
    thread_->wait();
    delete thread_;
    thread_ = nullptr;
  }
  QThread* thread_ = nullptr;
};

}  // namespace gui
