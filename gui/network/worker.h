#pragma once
// Runs one simulated network point (course/network_lab.h run_simulated_network_point: DDP's
// in-process ranks over a simulated link) on its own QThread for the Network page. The page talks
// to it only through queued signals carrying values; a request carries the generation it was made
// in, and a request already stale when the worker reaches it is skipped (a run under way cannot be
// interrupted: it finishes and the page drops its reply).
#include <QObject>
#include <QString>
#include <functional>
#include <memory>

#include "course/network_lab.h"
#include "gui/runtime/generation.h"

namespace gui {

// What "Run" asks for: the lab's setup and the link it runs over.
struct NetworkRequest {
  dpv::course::NetworkLabSetup setup;
  dpv::netmodel::Link link;
};

// A finished point, shared (never copied) between the worker's thread and the page.
using NetworkResult = std::shared_ptr<const dpv::course::NetworkLabPoint>;

class NetworkWorker : public QObject {
  Q_OBJECT
 public:
  // What the worker runs: course::run_simulated_network_point in the app; a test may give its own.
  using Runner = std::function<dpv::course::NetworkLabPoint(const dpv::course::NetworkLabSetup&, const dpv::netmodel::Link&)>;
  // `generation` is the page's, only read here; it outlives the worker (the page stops the thread first).
  NetworkWorker(Runner runner, const Generation* generation);
  static void registerTypes();  // the value types of the queued connections (once, before connecting)

 public slots:
  void run(const gui::NetworkRequest& request, quint64 generation);

 signals:
  void finished(const gui::NetworkResult& result, quint64 generation);
  void failed(const QString& message, quint64 generation);  // the engine's own text (dpv::Error::full())

 private:
  Runner runner_;
  const Generation* generation_;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::NetworkRequest)
Q_DECLARE_METATYPE(gui::NetworkResult)
