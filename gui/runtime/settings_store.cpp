#include "gui/runtime/settings_store.h"

namespace gui {

namespace {

const QString kStrategyKey = QStringLiteral("engine/strategy");
const QString kLegacyDdpKey = QStringLiteral("engine/ddp");  // before the strategy switch: a bool

}  // namespace

std::optional<dpv::StrategyKind> strategyFromShortName(const QString& name) {
  for (dpv::StrategyKind kind : kAllStrategies)
    if (name == QLatin1String(dpv::strategy_short_name(kind))) return kind;
  return std::nullopt;
}

AppSettings readSettings(const QSettings& store, AppSettings a) {
  a.devices = store.value(QStringLiteral("engine/devices"), a.devices).toString();
  a.preset = store.value(QStringLiteral("engine/preset"), a.preset).toString();
  a.batchSize = store.value(QStringLiteral("engine/batch"), a.batchSize).toInt();
  a.syncBatchNorm = store.value(QStringLiteral("engine/syncBatchNorm"), a.syncBatchNorm).toBool();
  a.learningRate = store.value(QStringLiteral("engine/lr"), a.learningRate).toDouble();
  a.seed = store.value(QStringLiteral("engine/seed"), a.seed).toULongLong();
  if (store.contains(kStrategyKey)) {
    if (const auto kind = strategyFromShortName(store.value(kStrategyKey).toString())) a.strategy = *kind;
  } else if (store.contains(kLegacyDdpKey)) {
    a.strategy = store.value(kLegacyDdpKey).toBool() ? dpv::StrategyKind::DistributedDataParallel : dpv::StrategyKind::DataParallel;
  }
  return a;
}

void writeSettings(QSettings& store, const AppSettings& a) {
  store.setValue(QStringLiteral("engine/devices"), a.devices);
  store.setValue(QStringLiteral("engine/preset"), a.preset);
  store.setValue(QStringLiteral("engine/batch"), a.batchSize);
  store.setValue(QStringLiteral("engine/syncBatchNorm"), a.syncBatchNorm);
  store.setValue(QStringLiteral("engine/lr"), a.learningRate);
  store.setValue(QStringLiteral("engine/seed"), static_cast<qulonglong>(a.seed));
  store.setValue(kStrategyKey, QString::fromLatin1(dpv::strategy_short_name(a.strategy)));
  store.remove(kLegacyDdpKey);  // the strategy key says it now
}

}  // namespace gui
