#include "gui/runtime/engine_types.h"

#include <QCoreApplication>

#include "gui/runtime/settings.h"


namespace gui {

void registerEngineMetaTypes() {
  qRegisterMetaType<dpv::StageEvent>("dpv::StageEvent");
  qRegisterMetaType<dpv::TensorInfo>("dpv::TensorInfo");
  qRegisterMetaType<IterationInfo>("IterationInfo");
  qRegisterMetaType<EngineFailure>("EngineFailure");
  qRegisterMetaType<AppSettings>("AppSettings");
}

QString stageLessonId(dpv::StageKind kind) { return QString::fromLatin1(dpv::stage_kind_name(kind)); }

// The engine's English title is the source text; the installed translator (if any) gives the
// learner's language. The table itself stays in the engine (engine/observer.cpp).
QString stageShortTitle(dpv::StageKind kind) { return QCoreApplication::translate("gui::Stage", dpv::stage_kind_title(kind)); }

QString formatBytes(double bytes) {
  static const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  return unit == 0 ? QStringLiteral("%1 B").arg(static_cast<qint64>(bytes))
                   : QStringLiteral("%1 %2").arg(bytes, 0, 'f', 1).arg(QLatin1String(units[unit]));
}

QString formatShape(const dpv::Shape& shape) {
  QStringList parts;
  for (int64_t d : shape) parts << QString::number(d);
  return QLatin1Char('[') + parts.join(QStringLiteral(", ")) + QLatin1Char(']');
}

}  // namespace gui
