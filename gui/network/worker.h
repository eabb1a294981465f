#pragma once
// Runs one network point for the Network page on its own QThread. The simulated link runs in
// process (course/network_lab.h run_simulated_network_point; a run under way cannot be
// interrupted: it finishes and the page drops its reply). The real shaped link runs `dpv lab
// network` (course/network_real.h: the arguments, the plan, the report's reader) as a child
// QProcess owned by this thread, driven by its signals (no waiting loop): stop() sends it SIGTERM,
// and the lab stops its job and removes its namespaces before it exits. The page talks to the
// worker only through queued signals carrying values; a request carries the generation it was
// made in, and one already stale when the worker reaches it is skipped.
#include <QObject>
#include <QProcess>
#include <QString>
#include <QTemporaryDir>
#include <functional>
#include <memory>

#include "course/network_lab.h"
#include "course/network_real.h"
#include "gui/runtime/generation.h"

namespace gui {

// What "Run" asks for: the lab's setup, the link it runs over, and whether the real link was chosen.
struct NetworkRequest {
  dpv::course::NetworkLabSetup setup;
  dpv::netmodel::Link link;
  bool real = false;   // the learner's choice; the worker plans it (course::plan_network_run)
  std::string preset;  // setup.model by its preset name, for the lab's train command
};

// A finished point, shared (never copied) between the worker's thread and the page.
using NetworkResult = std::shared_ptr<const dpv::course::NetworkLabPoint>;

class NetworkWorker : public QObject {
  Q_OBJECT
 public:
  // What runs a simulated point: course::run_simulated_network_point in the app; a test may give its own.
  using Runner = std::function<dpv::course::NetworkLabPoint(const dpv::course::NetworkLabSetup&, const dpv::netmodel::Link&)>;
  // `facts`: the privilege and the dpv binary, found by the page; the worker adds netem once a lab
  // reported it. `generation` is the page's, only read here; it outlives the worker.
  NetworkWorker(Runner runner, dpv::course::RealLinkFacts facts, const Generation* generation);
  ~NetworkWorker() override;
  static void registerTypes();  // the value types of the queued connections (once, before connecting)

 public slots:
  void run(const gui::NetworkRequest& request, quint64 generation);
  void stop();      // SIGTERM to the lab's child, if one runs; its reply is stopped()
  void shutdown();  // before the thread ends: stops the child and waits for it (bounded)

 signals:
  void finished(const gui::NetworkResult& result, quint64 generation);
  void failed(const QString& message, quint64 generation);  // the engine's or the lab's own text
  void stopped(quint64 generation);                          // the lab's child ended by stop()
  // What runs now, shell-quoted; `probe`: the one-step run that asks the lab whether netem is here.
  void realLabStarted(const QString& command, bool probe, quint64 generation);

 private:
  void runSimulated(const NetworkRequest& request, quint64 generation, const std::string& reason);
  void startLab(bool probe);  // the lab (or its netem probe) for request_, as a child
  void onLabFinished(int exitCode, QProcess::ExitStatus status);
  void afterProbe(const dpv::course::LabNetworkReport& report);
  void endChild();  // SIGTERM, a bounded wait, then SIGKILL

  Runner runner_;
  dpv::course::RealLinkFacts facts_;
  const Generation* generation_;
  // The real run under way: its request, generation, child and the folder of its report.
  NetworkRequest request_;
  quint64 requestGeneration_ = 0;
  std::unique_ptr<QProcess> child_;
  std::unique_ptr<QTemporaryDir> folder_;
  bool probing_ = false;
  bool stopping_ = false;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::NetworkRequest)
Q_DECLARE_METATYPE(gui::NetworkResult)
