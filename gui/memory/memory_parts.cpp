#include "gui/memory/memory_parts.h"

#include <QCoreApplication>
#include <QLocale>

#include "gui/common/theme.h"

namespace gui {

const QList<BreakdownPart>& breakdownParts() {
  using K = dpv::MemoryKind;
  using B = dpv::MemoryBreakdown;
  auto tr = [](const char* text) { return QCoreApplication::translate("gui::MemoryPage", text); };
  static const QList<BreakdownPart> parts = {
      {K::Parameters, tr("parameters"), &B::parameters},
      {K::Gradients, tr("gradients"), &B::gradients},
      {K::Optimizer, tr("optimizer state"), &B::optimizer},
      {K::Buckets, tr("DDP buckets"), &B::buckets},
      {K::Gathered, tr("gathered parameters"), &B::gathered},
      {K::Batch, tr("batch"), &B::batch},
      {K::Activations, tr("activations"), &B::activations},
      {K::Output, tr("output and loss"), &B::output},
      {std::nullopt, tr("other"), &B::other},
  };
  return parts;
}

QColor breakdownPartColour(const BreakdownPart& part, const QString& theme) {
  const SceneColors& colours = sceneColors(theme);
  if (part.kind) return colours.memoryFor(*part.kind);
  QColor faded = colours.text;
  faded.setAlpha(95);
  return faded;
}

QString exactBytes(int64_t bytes) {
  return QCoreApplication::translate("gui::MemoryPage", "%1 B").arg(QLocale(QLocale::English).toString(static_cast<qlonglong>(bytes)));
}

}  // namespace gui
