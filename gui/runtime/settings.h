#pragma once
// What the engine runs: the settings bar's values as one plain value. It lives in gui/runtime
// (not gui/app), so the engine worker and controller take it without knowing about the app; the
// app's AppContext holds the current one and hands it to the engine (AppContext::setEngine).
#include <QMetaType>
#include <QString>

namespace gui {

struct AppSettings {
  QString devices = QStringLiteral("cpu:4");   // a dpv device spec
  QString preset = QStringLiteral("simple");   // a dpv::preset_model name
  int batchSize = 10;
  bool syncBatchNorm = false;
  double learningRate = 0.01;
  quint64 seed = 0;
  // The Iteration page runs DistributedDataParallel (one in-process rank per device) instead of
  // DataParallel. Set by the page's mode switch, not by the settings bar.
  bool ddp = false;
  bool operator==(const AppSettings&) const = default;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::AppSettings)
