// gui/runtime knows nothing of gui/app: the app hands its settings to the engine (AppContext::
// setEngine), and stage titles shown to the learner go through Qt's translation.
#include <gtest/gtest.h>

#include <QCoreApplication>
#include <QTranslator>

#include "gui/common/context.h"
#include "gui/runtime/engine_controller.h"
#include "gui/runtime/engine_types.h"
#include "gui_test_support.h"

namespace gui {
namespace {

class UpperCaseStages : public QTranslator {
 public:
  QString translate(const char* context, const char* source, const char*, int) const override {
    if (QLatin1String(context) != QLatin1String("gui::Stage")) return QString();
    return QString::fromLatin1(source).toUpper();
  }
  bool isEmpty() const override { return false; }
};

TEST(StageTitles, GoThroughTheInstalledTranslator) {
  EXPECT_EQ(stageShortTitle(dpv::StageKind::GradScatter), QStringLiteral("Grad scatter"));
  UpperCaseStages translator;
  ASSERT_TRUE(QCoreApplication::installTranslator(&translator));
  EXPECT_EQ(stageShortTitle(dpv::StageKind::GradScatter), QStringLiteral("GRAD SCATTER"));
  EXPECT_EQ(stageShortTitle(dpv::StageKind::Step), QStringLiteral("STEP"));
  QCoreApplication::removeTranslator(&translator);
  EXPECT_EQ(stageShortTitle(dpv::StageKind::Step), QStringLiteral("Step"));
}

TEST(RuntimeBoundary, TheContextHandsItsSettingsToTheEngine) {
  AppContext context;
  context.setSettings(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 6));
  EngineController engine;
  context.setEngine(&engine);
  EXPECT_EQ(engine.settings().devices, QStringLiteral("cpu:2")) << "the current settings are applied at once";
  context.setSettings(settingsFor(QStringLiteral("cpu:3"), QStringLiteral("simple"), 9));
  EXPECT_EQ(engine.settings().devices, QStringLiteral("cpu:3"));
  EXPECT_EQ(engine.settings().batchSize, 9);
  context.setEngine(nullptr);
  context.setSettings(settingsFor(QStringLiteral("cpu:1"), QStringLiteral("simple"), 4));
  EXPECT_EQ(engine.settings().devices, QStringLiteral("cpu:3")) << "a detached engine keeps its settings";
}

}  // namespace
}  // namespace gui
