#pragma once
// What the engine runs: the settings bar's values as one plain value. It lives in gui/runtime
// (not gui/app), so the engine worker and controller take it without knowing about the app; the
// app's AppContext holds the current one and hands it to the engine (AppContext::setEngine).
#include <QMetaType>
#include <QString>

#include "engine/strategy.h"

namespace gui {

struct AppSettings {
  QString devices = QStringLiteral("cpu:4");   // a dpv device spec
  QString preset = QStringLiteral("simple");   // a dpv::preset_model name
  int batchSize = 10;
  bool syncBatchNorm = false;
  double learningRate = 0.01;
  quint64 seed = 0;
  // What the Iteration page runs: DataParallel, or one in-process rank per device under DDP or
  // ZeRO-1/2/3 (dpv::runs_ranks). Set by the page's strategy switch, not by the settings bar.
  dpv::StrategyKind strategy = dpv::StrategyKind::DataParallel;
  bool operator==(const AppSettings&) const = default;
};

}  // namespace gui

Q_DECLARE_METATYPE(gui::AppSettings)
