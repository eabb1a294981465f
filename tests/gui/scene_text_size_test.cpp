// The Iteration scene keeps its text readable when the view has to shrink it (a 1024x640 window):
// no text is drawn under 9 pt on screen (larger text first, then a larger picture that scrolls),
// and at full size it is not enlarged.
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

TEST(SceneTextSize, SmallViewsNeverDrawTextUnderNinePoints) {
  for (int n : {4, 8}) {
    IterationScene scene;
    scene.setInfo(devices(n));
    SceneView view(&scene);
    view.resize(520, 420);  // the scene's share of the Iteration page in a 1024x640 window
    view.show();
    ASSERT_TRUE(waitUntil([&] { return view.isVisible(); }, 2000));
    view.fit();
    const qreal fitted = view.transform().m11();
    // The items record what they drew; the view then shows the scene large enough (scrolling).
    ASSERT_TRUE(waitUntil([&] {
      view.viewport()->grab();
      const qreal smallest = smallestSceneTextPx(&scene);
      return smallest > 0 && smallest * view.transform().m11() >= view.minimumScreenTextPx() - 0.25;
    }, 3000)) << n << " devices: smallest text " << smallestSceneTextPx(&scene) * view.transform().m11() << " px on screen";
    EXPECT_GT(sceneTextScale(&scene), 1.0) << n << " devices: the text is drawn larger first";
    EXPECT_GE(view.transform().m11(), fitted) << n << " devices";
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
