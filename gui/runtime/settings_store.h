#pragma once
// The settings the app remembers between sessions (QSettings' "engine/..." keys), read and
// written in one place. The strategy is stored by its short name ("DDP", "ZeRO-2"); a settings
// file from before the strategy switch had only "engine/ddp" (true: DDP), which still loads.
#include <QSettings>
#include <optional>

#include "gui/runtime/settings.h"

namespace gui {

// `defaults` with every key `store` holds read over it; an unknown strategy name keeps the default.
AppSettings readSettings(const QSettings& store, AppSettings defaults);
void writeSettings(QSettings& store, const AppSettings& settings);

// The strategy whose dpv::strategy_short_name is `name`; nullopt for none.
std::optional<dpv::StrategyKind> strategyFromShortName(const QString& name);
// Every strategy the Iteration page offers, in the switch's order.
inline constexpr dpv::StrategyKind kAllStrategies[] = {dpv::StrategyKind::DataParallel, dpv::StrategyKind::DistributedDataParallel,
                                                       dpv::StrategyKind::Zero1, dpv::StrategyKind::Zero2,
                                                       dpv::StrategyKind::Zero3};

}  // namespace gui
