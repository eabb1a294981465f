#pragma once
// The one way a long-lived worker runs off the GUI thread: WorkerThread<Worker> owns a QThread and a Worker
// (a QObject) living on it. The owner talks to the worker only through queued signals and slots
// carrying plain values. stop() (also run by the destructor) optionally runs a shutdown slot on the
// worker's thread and waits for it, then ends the thread's event loop and waits; the worker is
// deleted on its own thread as the loop ends. Used by the engine controller and the BatchNorm lab.
#include <QThread>
#include <utility>

namespace gui {

template <typename Worker>
class WorkerThread {
 public:
  // `name` shows in debuggers and profilers; `args` go to the worker's constructor.
  template <typename... Args>
  explicit WorkerThread(const QString& name, Args&&... args) : worker_(new Worker(std::forward<Args>(args)...)) {
    thread_.setObjectName(name);
    worker_->moveToThread(&thread_);
    QObject::connect(&thread_, &QThread::finished, worker_, &QObject::deleteLater);
  }
  ~WorkerThread() { stop(); }
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Starts the thread; connect the worker's signals and slots first.
  void start() { thread_.start(); }
  Worker* worker() const { return worker_; }
  bool running() const { return thread_.isRunning(); }

  // Runs `shutdown` (if given) on the worker's thread and waits for it, then quits the thread and
  // waits for the work in progress to end. Idempotent; the worker is gone afterwards.
  void stop(void (Worker::*shutdown)() = nullptr) {
    if (!worker_) return;
    if (thread_.isRunning()) {
      if (shutdown) QMetaObject::invokeMethod(worker_, shutdown, Qt::BlockingQueuedConnection);
      thread_.quit();
      thread_.wait();
    } else {
      delete worker_;  // never started: no event loop will delete it
    }
    worker_ = nullptr;
  }

 private:
  QThread thread_;
  Worker* worker_;
};

}  // namespace gui
