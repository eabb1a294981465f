#include "gui/common/theme.h"

#include <QApplication>
#include <QFile>
#include <QPalette>
#include <QStyle>
#include <QStyleFactory>

static void initResourcesOutsideNamespace() { Q_INIT_RESOURCE(dpviz); }

namespace gui {

void initDpvizResources() {
  static bool done = false;
  if (!done) {
    initResourcesOutsideNamespace();
    done = true;
  }
}

namespace {

SceneColors makeLight() {
  SceneColors c;
  c.background = QColor(0xf5, 0xf6, 0xf8);
  c.panel = QColor(0xff, 0xff, 0xff);
  c.panelBorder = QColor(0xb8, 0xbf, 0xca);
  c.text = QColor(0x1d, 0x23, 0x2b);
  c.subtext = QColor(0x5b, 0x64, 0x70);
  c.accent = QColor(0x2f, 0x6f, 0xd6);
  c.accentText = Qt::white;
  c.idleFill = QColor(0xe6, 0xe8, 0xeb);
  c.idleText = QColor(0x80, 0x86, 0x8f);
  c.failed = QColor(0xc6, 0x28, 0x28);
  c.memoryTrack = QColor(0xe3, 0xe6, 0xea);
  c.memoryFill = QColor(0x4c, 0x9a, 0x5a);
  c.memoryPeak = QColor(0xd9, 0x7b, 0x1e);
  c.chipInput = QColor(0xf9, 0xc8, 0x6b);
  c.chipTarget = QColor(0xf3, 0xde, 0xa8);
  c.chipParam = QColor(0x9d, 0xbf, 0xf2);
  c.chipActivation = QColor(0xa6, 0xdd, 0xb4);
  c.chipOutput = QColor(0xc9, 0xb3, 0xf0);
  c.chipLoss = QColor(0xf2, 0xa5, 0xa5);
  c.chipGrad = QColor(0xf5, 0xa9, 0x7f);
  c.chipOptimizer = QColor(0xb9, 0xc3, 0xcf);
  c.chipText = QColor(0x1d, 0x23, 0x2b);
  c.layerPill = QColor(0xe8, 0xec, 0xf2);
  c.layerActive = c.accent;
  c.layerActiveText = Qt::white;
  return c;
}

SceneColors makeDark() {
  SceneColors c;
  c.background = QColor(0x1c, 0x1f, 0x24);
  c.panel = QColor(0x26, 0x2a, 0x31);
  c.panelBorder = QColor(0x4a, 0x52, 0x5e);
  c.text = QColor(0xe8, 0xeb, 0xef);
  c.subtext = QColor(0xa3, 0xab, 0xb6);
  c.accent = QColor(0x5b, 0x9b, 0xff);
  c.accentText = QColor(0x10, 0x14, 0x1a);
  c.idleFill = QColor(0x2e, 0x31, 0x36);
  c.idleText = QColor(0x8a, 0x90, 0x98);
  c.failed = QColor(0xff, 0x6b, 0x6b);
  c.memoryTrack = QColor(0x3a, 0x3f, 0x47);
  c.memoryFill = QColor(0x5f, 0xb8, 0x6e);
  c.memoryPeak = QColor(0xf0, 0x9a, 0x3e);
  c.chipInput = QColor(0xb8, 0x86, 0x2b);
  c.chipTarget = QColor(0x9c, 0x85, 0x4a);
  c.chipParam = QColor(0x3d, 0x6c, 0xb8);
  c.chipActivation = QColor(0x3b, 0x8a, 0x52);
  c.chipOutput = QColor(0x75, 0x58, 0xb5);
  c.chipLoss = QColor(0xb0, 0x4a, 0x4a);
  c.chipGrad = QColor(0xb8, 0x62, 0x35);
  c.chipOptimizer = QColor(0x5d, 0x68, 0x75);
  c.chipText = QColor(0xf4, 0xf6, 0xf8);
  c.layerPill = QColor(0x35, 0x3a, 0x43);
  c.layerActive = c.accent;
  c.layerActiveText = QColor(0x10, 0x14, 0x1a);
  return c;
}

QPalette darkPalette() {
  QPalette p;
  const QColor window(0x23, 0x26, 0x2c), base(0x1c, 0x1f, 0x24), text(0xe8, 0xeb, 0xef);
  p.setColor(QPalette::Window, window);
  p.setColor(QPalette::WindowText, text);
  p.setColor(QPalette::Base, base);
  p.setColor(QPalette::AlternateBase, QColor(0x2a, 0x2e, 0x35));
  p.setColor(QPalette::ToolTipBase, QColor(0x32, 0x37, 0x3f));
  p.setColor(QPalette::ToolTipText, text);
  p.setColor(QPalette::PlaceholderText, QColor(0x8a, 0x90, 0x98));
  p.setColor(QPalette::Text, text);
  p.setColor(QPalette::Button, QColor(0x30, 0x34, 0x3b));
  p.setColor(QPalette::ButtonText, text);
  p.setColor(QPalette::BrightText, QColor(0xff, 0x6b, 0x6b));
  p.setColor(QPalette::Highlight, QColor(0x5b, 0x9b, 0xff));
  p.setColor(QPalette::HighlightedText, QColor(0x10, 0x14, 0x1a));
  p.setColor(QPalette::Link, QColor(0x7a, 0xb0, 0xff));
  p.setColor(QPalette::Mid, QColor(0x4a, 0x52, 0x5e));
  p.setColor(QPalette::Dark, QColor(0x16, 0x18, 0x1c));
  p.setColor(QPalette::Light, QColor(0x3a, 0x3f, 0x47));
  p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x6f, 0x76, 0x80));
  p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x6f, 0x76, 0x80));
  p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(0x6f, 0x76, 0x80));
  return p;
}

QPalette lightPalette() {
  QPalette p = QStyleFactory::create(QStringLiteral("Fusion"))->standardPalette();
  p.setColor(QPalette::Window, QColor(0xee, 0xf0, 0xf3));
  p.setColor(QPalette::Base, Qt::white);
  p.setColor(QPalette::AlternateBase, QColor(0xf5, 0xf6, 0xf8));
  p.setColor(QPalette::Highlight, QColor(0x2f, 0x6f, 0xd6));
  p.setColor(QPalette::HighlightedText, Qt::white);
  p.setColor(QPalette::Text, QColor(0x1d, 0x23, 0x2b));
  p.setColor(QPalette::WindowText, QColor(0x1d, 0x23, 0x2b));
  p.setColor(QPalette::ButtonText, QColor(0x1d, 0x23, 0x2b));
  return p;
}

QPalette& systemPalette() {
  static QPalette palette = QApplication::palette();  // captured before the first theme is applied
  return palette;
}

}  // namespace

QColor SceneColors::chipFor(dpv::TensorRole role) const {
  switch (role) {
    case dpv::TensorRole::Input: return chipInput;
    case dpv::TensorRole::Target: return chipTarget;
    case dpv::TensorRole::Param:
    case dpv::TensorRole::Buffer: return chipParam;
    case dpv::TensorRole::Activation: return chipActivation;
    case dpv::TensorRole::Output: return chipOutput;
    case dpv::TensorRole::Loss: return chipLoss;
    case dpv::TensorRole::Grad: return chipGrad;
    case dpv::TensorRole::Optimizer: return chipOptimizer;
  }
  return layerPill;
}

QColor SceneColors::memoryFor(dpv::MemoryKind kind) const {
  switch (kind) {
    case dpv::MemoryKind::Batch: return chipInput;
    case dpv::MemoryKind::Parameters: return chipParam;
    case dpv::MemoryKind::Gradients: return chipGrad;
    case dpv::MemoryKind::Activations: return chipActivation;
    case dpv::MemoryKind::Optimizer: return chipOptimizer;
    case dpv::MemoryKind::Output: return chipOutput;
    case dpv::MemoryKind::Buckets: return chipLoss;  // DDP's all-reduce buffers: their own colour
    // FSDP's gathered full parameters: a violet of their own beside the parameters' blue.
    case dpv::MemoryKind::Gathered: return background.lightness() < 128 ? QColor(0x7a, 0x5c, 0xc0) : QColor(0xa9, 0x8c, 0xe6);
  }
  return memoryFill;
}

QString resolveTheme(const QString& requested) {
  if (requested == QLatin1String("dark") || requested == QLatin1String("light")) return requested;
  // "system": a dark window colour in the platform palette means a dark desktop.
  return systemPalette().color(QPalette::Window).lightness() < 128 ? QStringLiteral("dark") : QStringLiteral("light");
}

QString applyTheme(QApplication& app, const QString& requested) {
  initDpvizResources();
  (void)systemPalette();
  const QString theme = resolveTheme(requested);
  app.setStyle(QStyleFactory::create(QStringLiteral("Fusion")));
  app.setPalette(theme == QLatin1String("dark") ? darkPalette() : lightPalette());
  QFile qss(QStringLiteral(":/styles/%1.qss").arg(theme));
  if (qss.open(QIODevice::ReadOnly)) app.setStyleSheet(QString::fromUtf8(qss.readAll()));
  return theme;
}

const SceneColors& sceneColors(const QString& theme) {
  static const SceneColors light = makeLight();
  static const SceneColors dark = makeDark();
  return theme == QLatin1String("dark") ? dark : light;
}

QColor stageColor(int stageKind, const QString& theme) {
  // In dpv::StageKind order: DataParallel's nine stages, then DDP's own (construct, sample,
  // broadcast buffers, finalize).
  static const QColor lightColors[] = {QColor(0xe0, 0x9a, 0x2b), QColor(0x3d, 0x7e, 0xdb), QColor(0x3f, 0xa3, 0x5b),
                                       QColor(0x8e, 0x5c, 0xd9), QColor(0xd4, 0x4b, 0x4b), QColor(0xc7, 0x7d, 0x3a),
                                       QColor(0x2b, 0x9e, 0x9e), QColor(0xb0, 0x4f, 0x9a), QColor(0x6b, 0x74, 0x80),
                                       QColor(0x8a, 0x6d, 0x4e), QColor(0xc9, 0xa2, 0x27), QColor(0x4f, 0x62, 0xb8),
                                       QColor(0xd8, 0x7f, 0xbf)};
  constexpr int kLast = static_cast<int>(sizeof(lightColors) / sizeof(lightColors[0])) - 1;
  QColor c = lightColors[qBound(0, stageKind, kLast)];
  if (theme == QLatin1String("dark")) c = c.lighter(115);
  return c;
}

}  // namespace gui
