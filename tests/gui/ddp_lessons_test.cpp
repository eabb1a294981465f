// The four DDP topic lessons are shown where they belong: the sampler from the DDP Sample stage,
// buckets from a Backward stage (a "More: ..." link in the lesson panel, with a way back), the
// ring on the Ring page, DP against DDP on the comparison page. Each check reads the lesson's
// title from its file, so renaming a lesson cannot leave a stale expectation here.
#include "gui_test_support.h"

#include <QFile>

#include "gui/compare/page.h"
#include "gui/common/lesson_panel.h"
#include "gui/ring/page.h"

namespace gui {
namespace {

// The "# Title" line of lessons/<id>.md, without the "# ".
QString lessonTitle(const QString& id) {
  QFile f(QStringLiteral(DPV_LESSONS_SOURCE_DIR) + QLatin1Char('/') + id + QStringLiteral(".md"));
  if (!f.open(QIODevice::ReadOnly)) return QStringLiteral("<cannot open %1>").arg(f.fileName());
  return QString::fromUtf8(f.readLine()).trimmed().remove(0, 2);
}

bool shows(const LessonPanel* panel, const QString& text) { return panel->toPlainText().contains(text); }

// Sets the lessons folder for the pages built while it lives.
struct LessonsFromSource {
  LessonsFromSource() { qputenv("DPVIZ_LESSONS", QByteArray(DPV_LESSONS_SOURCE_DIR)); }
  ~LessonsFromSource() { qunsetenv("DPVIZ_LESSONS"); }
};

class DdpLessonsTest : public IterationPageTest {};

TEST_F(DdpLessonsTest, SampleAndBackwardStagesLinkToTheirTopicLessonsAndBack) {
  LessonsFromSource lessons;
  AppSettings s = settingsFor(QStringLiteral("cpu:2"), QStringLiteral("mlp-bn"), 6);
  s.strategy = dpv::StrategyKind::DistributedDataParallel;
  start(s);
  LessonPanel* panel = page_->lessonPanel();
  const QString sampler = lessonTitle(QStringLiteral("ddp/sampler"));
  const QString buckets = lessonTitle(QStringLiteral("ddp/buckets"));
  ASSERT_FALSE(sampler.startsWith(QLatin1Char('<'))) << sampler.toStdString();

  int sampleStage = -1, backwardStage = -1;
  const auto& plan = engine_->info().plan;
  for (int i = 0; i < static_cast<int>(plan.size()); ++i) {
    if (plan[static_cast<size_t>(i)].kind == dpv::StageKind::Sample && sampleStage < 0) sampleStage = i;
    if (plan[static_cast<size_t>(i)].kind == dpv::StageKind::Backward && backwardStage < 0) backwardStage = i;
  }
  ASSERT_GE(sampleStage, 0);
  ASSERT_GT(backwardStage, sampleStage);

  for (int i = 0; i <= sampleStage; ++i) ASSERT_TRUE(stepTo(i));
  EXPECT_TRUE(panel->lastMarkdown().contains(QLatin1String("(lesson:ddp/sampler)")));
  EXPECT_FALSE(shows(panel, sampler));
  const QString stageText = panel->toPlainText();
  emit panel->anchorClicked(QUrl(QStringLiteral("lesson:ddp/sampler")));
  EXPECT_TRUE(shows(panel, sampler)) << panel->toPlainText().toStdString();
  EXPECT_FALSE(panel->lessonMissing());
  emit panel->anchorClicked(QUrl(QStringLiteral("back:stage")));
  EXPECT_EQ(panel->toPlainText().toStdString(), stageText.toStdString());

  for (int i = sampleStage + 1; i <= backwardStage; ++i) ASSERT_TRUE(stepTo(i));
  EXPECT_TRUE(panel->lastMarkdown().contains(QLatin1String("(lesson:ddp/buckets)")));
  EXPECT_FALSE(panel->lastMarkdown().contains(QLatin1String("(lesson:ddp/sampler)")));
  emit panel->anchorClicked(QUrl(QStringLiteral("lesson:ddp/buckets")));
  EXPECT_TRUE(shows(panel, buckets));
}

TEST(DdpLessons, RingPageShowsTheRingLesson) {
  LessonsFromSource lessons;
  AppContext context;
  RingPage page(&context);
  ASSERT_NE(page.lessonPanel(), nullptr);
  EXPECT_FALSE(page.lessonPanel()->lessonMissing());
  EXPECT_TRUE(shows(page.lessonPanel(), lessonTitle(QStringLiteral("ddp/ring"))));
}

TEST(DdpLessons, ComparePageShowsTheDpVersusDdpLesson) {
  LessonsFromSource lessons;
  AppContext context;
  ComparePage page(&context);
  ASSERT_NE(page.lessonPanel(), nullptr);
  EXPECT_FALSE(page.lessonPanel()->lessonMissing());
  EXPECT_TRUE(shows(page.lessonPanel(), lessonTitle(QStringLiteral("ddp/dp-vs-ddp"))));
}

}  // namespace
}  // namespace gui
