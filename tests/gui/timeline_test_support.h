#pragma once
// Opening a trace on the Timeline page, which reads it on a thread of its own: the tests start the
// load and wait (bounded) on the event loop for the page's traceLoadFinished().
#include <QString>
#include <memory>

#include "gui/timeline/page.h"
#include "gui_test_support.h"

namespace gui {

struct TraceLoadResult {
  bool ended = false;
  TimelinePage::TraceLoadEnd end = TimelinePage::TraceLoadEnd::Failed;
  QString error;
  bool shown() const { return ended && end == TimelinePage::TraceLoadEnd::Shown; }
};

// Waits for the next traceLoadFinished() of `page` after `start` ran (which starts a load).
template <typename Start>
TraceLoadResult waitForTraceLoad(TimelinePage* page, Start start, int ms = 60000) {
  auto result = std::make_shared<TraceLoadResult>();
  const QMetaObject::Connection c = QObject::connect(
      page, &TimelinePage::traceLoadFinished, page, [result](TimelinePage::TraceLoadEnd end, const QString& error) {
        result->ended = true;
        result->end = end;
        result->error = error;
      });
  start();
  waitUntil([&] { return result->ended; }, ms);
  QObject::disconnect(c);
  return *result;
}

// Opens `path` and waits for it: "" when the trace is shown, else the error (or "cancelled").
inline QString openTraceAndWait(TimelinePage* page, const QString& path) {
  bool started = false;
  const TraceLoadResult r = waitForTraceLoad(page, [&] { started = page->openTrace(path); });
  if (!started) return QStringLiteral("not started: another trace is loading");
  if (!r.ended) return QStringLiteral("the load never ended");
  if (r.end == TimelinePage::TraceLoadEnd::Cancelled) return QStringLiteral("cancelled");
  return r.error;
}

}  // namespace gui
