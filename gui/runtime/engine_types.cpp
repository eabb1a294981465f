#include "gui/runtime/engine_types.h"

#include "gui/app/context.h"

namespace gui {

void registerEngineMetaTypes() {
  qRegisterMetaType<dpv::StageEvent>("dpv::StageEvent");
  qRegisterMetaType<dpv::TensorInfo>("dpv::TensorInfo");
  qRegisterMetaType<IterationInfo>("IterationInfo");
  qRegisterMetaType<AppSettings>("AppSettings");
}

QString stageLessonId(dpv::StageKind kind) {
  switch (kind) {
    case dpv::StageKind::Scatter: return QStringLiteral("scatter");
    case dpv::StageKind::Replicate: return QStringLiteral("replicate");
    case dpv::StageKind::Forward: return QStringLiteral("forward");
    case dpv::StageKind::Gather: return QStringLiteral("gather");
    case dpv::StageKind::Loss: return QStringLiteral("loss");
    case dpv::StageKind::GradScatter: return QStringLiteral("grad_scatter");
    case dpv::StageKind::Backward: return QStringLiteral("backward");
    case dpv::StageKind::ReduceGrads: return QStringLiteral("reduce_grads");
    case dpv::StageKind::Step: return QStringLiteral("step");
  }
  return QStringLiteral("unknown");
}

QString stageShortTitle(dpv::StageKind kind) {
  switch (kind) {
    case dpv::StageKind::Scatter: return QObject::tr("Scatter");
    case dpv::StageKind::Replicate: return QObject::tr("Replicate");
    case dpv::StageKind::Forward: return QObject::tr("Forward");
    case dpv::StageKind::Gather: return QObject::tr("Gather");
    case dpv::StageKind::Loss: return QObject::tr("Loss");
    case dpv::StageKind::GradScatter: return QObject::tr("Grad scatter");
    case dpv::StageKind::Backward: return QObject::tr("Backward");
    case dpv::StageKind::ReduceGrads: return QObject::tr("Reduce grads");
    case dpv::StageKind::Step: return QObject::tr("Step");
  }
  return QStringLiteral("?");
}

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
