#include "gui/memory/worker.h"

#include <exception>

#include "engine/error.h"

namespace gui {

MemoryWorker::MemoryWorker(Runner runner, const Generation* generation)
    : runner_(std::move(runner)), generation_(generation) {}

void MemoryWorker::registerTypes() {
  qRegisterMetaType<dpv::RunSpec>("dpv::RunSpec");
  qRegisterMetaType<MemoryResult>("gui::MemoryResult");
}

void MemoryWorker::run(const dpv::RunSpec& spec, quint64 generation) {
  if (!generation_->isCurrent(generation)) return;  // cancelled or replaced while it waited
  try {
    emit finished(std::make_shared<const dpv::course::MemoryComparison>(runner_(spec)), generation);
  } catch (const dpv::Error& e) {
    emit failed(QString::fromStdString(e.full()), generation);
  } catch (const std::exception& e) {
    emit failed(QString::fromStdString(e.what()), generation);
  }
}

}  // namespace gui
