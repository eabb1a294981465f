// The Iteration scene keeps its text readable when the view has to shrink it (a 1024x640 window):
// the body text is never drawn smaller than about 9.5 px on screen, and at full size it is not
// enlarged.
#include <gtest/gtest.h>

#include "gui/iteration/scene.h"
#include "gui/common/scene_items.h"
#include "gui_test_support.h"

namespace gui {
namespace {

IterationInfo devices(int n) {
  IterationInfo info;
  for (int d = 0; d < n; ++d) {
    info.deviceLabels << QStringLiteral("GPU %1 (simulated on CPU)").arg(d);
    info.deviceTitles.push_back({QStringLiteral("GPU %1").arg(d), QStringLiteral("simulated on CPU"), true});
  }
  info.layerNames << QStringLiteral("Linear");
  info.layerKinds.push_back(dpv::LayerKind::Linear);
  for (int d = 0; d < n; ++d) info.chunks.push_back(1);
  return info;
}

TEST(SceneTextSize, SmallViewsDrawTheTextLargerSoItStaysReadable) {
  for (int n : {4, 8}) {
    IterationScene scene;
    scene.setInfo(devices(n));
    SceneView view(&scene);
    view.resize(520, 420);  // the scene's share of the Iteration page in a 1024x640 window
    view.show();
    ASSERT_TRUE(waitUntil([&] { return view.isVisible(); }, 2000));
    view.fit();
    const qreal scale = view.transform().m11();
    EXPECT_LT(scale, 0.8) << n << " devices: the scene is shrunk at this size";
    EXPECT_GE(11 * scale * sceneTextScale(&scene), 9.5 - 1e-6) << n << " devices: body text on screen in px";
  }
}

TEST(SceneTextSize, ALargeViewKeepsTheDesignSize) {
  IterationScene scene;
  scene.setInfo(devices(4));
  SceneView view(&scene);
  view.resize(1400, 900);
  view.show();
  ASSERT_TRUE(waitUntil([&] { return view.isVisible(); }, 2000));
  view.fit();
  EXPECT_DOUBLE_EQ(sceneTextScale(&scene), 1.0);
}

}  // namespace
}  // namespace gui
