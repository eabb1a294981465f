#pragma once
// Runs the memory comparison (course/zero_memory.h compare_memory: DDP and ZeRO-1/2/3 on the same
// model, two iterations each) on its own QThread for the Memory page. The page talks to it only
// through queued signals and slots carrying values: a request carries the generation it was made
// in, and the worker skips a request whose generation is already stale (the learner pressed Cancel
// or Run again) before doing the work. compare_memory cannot be interrupted once it has started,
// so a cancelled run finishes on this thread and its reply is dropped by the page.
#include <QObject>
#include <QString>
#include <functional>
#include <memory>

#include "course/zero_memory.h"
#include "engine/run/run_spec.h"
#include "gui/memory/memory_parts.h"
#include "gui/runtime/generation.h"

namespace gui {

class MemoryWorker : public QObject {
  Q_OBJECT
 public:
  // What the worker runs: course::compare_memory in the app; a test may give its own.
  using Runner = std::function<dpv::course::MemoryComparison(const dpv::RunSpec&)>;
  // `generation` is the page's, read (never changed) here to skip stale requests; it outlives
  // the worker (the page stops the thread before it is destroyed).
  MemoryWorker(Runner runner, const Generation* generation);
  // Registers the value types for queued connections (call once before connecting).
  static void registerTypes();

 public slots:
  void run(const dpv::RunSpec& spec, quint64 generation);

 signals:
  void finished(const gui::MemoryResult& result, quint64 generation);
  // The engine's own text (dpv::Error::full()): what was wrong and what to do.
  void failed(const QString& message, quint64 generation);

 private:
  Runner runner_;
  const Generation* generation_;
};

}  // namespace gui

Q_DECLARE_METATYPE(dpv::RunSpec)
Q_DECLARE_METATYPE(gui::MemoryResult)
