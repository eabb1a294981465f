#pragma once
// Light and dark themes: the application palette and style sheet, and the colours the custom
// drawing (scene, charts) uses, so both follow the theme.
#include <QColor>
#include <QString>

#include "engine/observer.h"

class QApplication;

namespace gui {

struct SceneColors {
  QColor background, panel, panelBorder, text, subtext, accent, accentText;
  QColor idleFill, idleText, failed, memoryTrack, memoryFill, memoryPeak;
  QColor chipInput, chipTarget, chipParam, chipActivation, chipOutput, chipLoss, chipGrad, chipOptimizer, chipText;
  QColor layerPill, layerActive, layerActiveText;
  QColor chipFor(dpv::TensorRole role) const;
  // A part of a memory bar: the colour of the chips that hold that memory.
  QColor memoryFor(dpv::MemoryKind kind) const;
};

// "light", "dark" or "system" (the platform's palette decides).
QString resolveTheme(const QString& requested);
// Applies Fusion, the palette and resources/styles/<theme>.qss; returns the resolved theme name.
QString applyTheme(QApplication& app, const QString& requested);
const SceneColors& sceneColors(const QString& theme);
// Colour of a stage kind in charts and the stage strip.
QColor stageColor(int stageKind, const QString& theme);
// Loads the Qt resources of dpviz_lib (icons, style sheets); safe to call more than once.
void initDpvizResources();

}  // namespace gui
