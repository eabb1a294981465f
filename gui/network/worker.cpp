#include "gui/network/worker.h"

#include <exception>

#include "engine/error.h"

namespace gui {

NetworkWorker::NetworkWorker(Runner runner, const Generation* generation)
    : runner_(std::move(runner)), generation_(generation) {}

void NetworkWorker::registerTypes() {
  qRegisterMetaType<NetworkRequest>("gui::NetworkRequest");
  qRegisterMetaType<NetworkResult>("gui::NetworkResult");
}

void NetworkWorker::run(const NetworkRequest& request, quint64 generation) {
  if (!generation_->isCurrent(generation)) return;  // replaced while it waited
  try {
    emit finished(std::make_shared<const dpv::course::NetworkLabPoint>(runner_(request.setup, request.link)), generation);
  } catch (const dpv::Error& e) {
    emit failed(QString::fromStdString(e.full()), generation);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()), generation);
  }
}

}  // namespace gui
