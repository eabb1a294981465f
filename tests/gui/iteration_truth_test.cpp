// The Iteration page tells what the engine did, with the engine's numbers: at every stage each
// device's chips list exactly the tensors the engine's snapshot lists (none twice), its memory bar
// splits the engine's byte count into the same parts, discarded replicas are said to be discarded,
// the chunks name their samples, Reduce and Step show one weight's numbers, the lesson follows the
// settings and lights up the chips it talks about, the inspector draws small tensors as heat maps
// and the code is not wrapped.
#include "gui_test_support.h"
#include "course/sample_program.h"

#include <QPlainTextEdit>
#include <QSplitter>
#include <QTextBlock>
#include <QTreeWidget>

#include "gui/common/code_view.h"
#include "gui/common/lesson_panel.h"
#include "gui/iteration/tensor_inspector.h"

namespace gui {

namespace {

QString num(double v) { return QString::number(v, 'g', 4); }

std::multiset<std::string> chipTensorNames(IterationScene* scene, int device) {
  std::multiset<std::string> names;
  for (ChipItem* chip : scene->chipsOn(device))
    for (const auto& t : chip->view().tensors) names.insert(t.name);
  return names;
}

ChipItem* chipWithRole(IterationScene* scene, int device, dpv::TensorRole role) {
  for (ChipItem* chip : scene->chipsOn(device))
    if (chip->view().role == role) return chip;
  return nullptr;
}

}  // namespace

TEST_F(IterationPageTest, EveryStageDrawsExactlyWhatTheEngineHoldsAndItsMemoryByPart) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  const IterationInfo info = engine_->info();
  IterationScene* scene = page_->scene();
  // Before the first stage the batch is on GPU 0 already (`.cuda()`), and the host says so.
  EXPECT_TRUE(scene->hostBox()->lines().value(0).contains(QLatin1String("GPU 0"))) << scene->hostBox()->lines().value(0).toStdString();
  EXPECT_TRUE(chipTensorNames(scene, 0).count("inputs"));
  EXPECT_EQ(scene->deviceBox(0)->view().memoryBytes, info.devicesBefore.at(0).memory_bytes);
  EXPECT_GT(scene->deviceBox(0)->view().memory.batch, 0);

  const int stages = static_cast<int>(info.plan.size());
  bool freed = false;
  qsizetype moduleTensors = 0;
  for (int i = 0; i < stages; ++i) {
    ASSERT_TRUE(stepTo(i)) << "stage " << i;
    const dpv::StageEvent& ev = engine_->events().at(i);
    freed = freed || ev.stage.kind == dpv::StageKind::ReduceGrads;
    for (const auto& ds : ev.devices) {
      const std::string at = "stage " + std::to_string(i) + " (" + ev.stage.title + ") device " + std::to_string(ds.device);
      // The chips hold the engine's tensors, each once: nothing drawn twice, nothing made up.
      std::multiset<std::string> engineNames;
      // Parameters, buffers and their gradients by the code panel's program's names (SimpleModel's
      // self.linear): "grad linear.weight" for the engine's "grad 0.weight" of entry "0.weight".
      for (const auto& t : ds.tensors) {
        if (t.role == dpv::TensorRole::Param || t.role == dpv::TensorRole::Buffer) { EXPECT_EQ(t.state_entry, t.name) << at; }
        std::string name = t.name;
        if (!t.state_entry.empty())
          name.replace(name.find(t.state_entry), t.state_entry.size(), dpv::course::program_parameter_name(info.preset, t.state_entry));
        engineNames.insert(name);
      }
      EXPECT_EQ(chipTensorNames(scene, ds.device), engineNames) << at;
      // The bar's parts are the engine's accounting and add up to its byte count.
      DeviceBox* box = scene->deviceBox(ds.device);
      qint64 parts = 0;
      for (const MemoryPart& p : memoryParts(box->view())) parts += p.bytes;
      EXPECT_EQ(parts, ds.memory_bytes) << at;
      EXPECT_EQ(box->view().memory.output, ds.memory.output) << at;
      EXPECT_EQ(ds.memory.other, 0) << at;
      // Replicate gives each device one input chunk, not a second chip that repeats it.
      if (ev.stage.kind == dpv::StageKind::Replicate && ds.device > 0) {
        int chunkChips = 0;
        for (ChipItem* chip : scene->chipsOn(ds.device)) chunkChips += chip->view().text.contains(QLatin1String("sample"));
        EXPECT_EQ(chunkChips, 1) << at;
        EXPECT_EQ(chipWithRole(scene, ds.device, dpv::TensorRole::Activation), nullptr) << at;
      }
      if (ds.device > 0) {
        if (freed) {
          EXPECT_TRUE(box->replicaTitle().contains(QLatin1String("discarded"))) << at << ": " << box->replicaTitle().toStdString();
          EXPECT_EQ(box->view().memoryBytes, 0) << at;
          EXPECT_TRUE(scene->chipsOn(ds.device).isEmpty()) << at;
        } else if (ev.stage.kind != dpv::StageKind::Scatter) {
          EXPECT_FALSE(box->replicaTitle().contains(QLatin1String("no replica"))) << at;
        }
      }
    }
    // GPU 0 holds the gathered output from Gather on, and its bar shows that part.
    if (ev.stage.kind == dpv::StageKind::Gather) {
      EXPECT_GT(scene->deviceBox(0)->view().memory.output, 0);
    }
    // Step: the module's parameters once on GPU 0 (replica 0 is the module, not a second copy).
    ChipItem* paramChip = chipWithRole(scene, 0, dpv::TensorRole::Param);
    ASSERT_NE(paramChip, nullptr);
    if (i == 0) moduleTensors = paramChip->view().tensors.size();
    EXPECT_EQ(paramChip->view().tensors.size(), moduleTensors) << "stage " << i << ": the module's tensors, once";
  }
  EXPECT_TRUE(freed);
}

TEST_F(IterationPageTest, ScatterNamesTheSamplesEachDeviceGot) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  ASSERT_TRUE(stepTo(0));
  IterationScene* scene = page_->scene();
  EXPECT_TRUE(chipWithRole(scene, 1, dpv::TensorRole::Input)->view().text.contains(QLatin1String("samples 3, 4, 5")));
  EXPECT_TRUE(chipWithRole(scene, 3, dpv::TensorRole::Input)->view().text.contains(QLatin1String("sample 9")));
  EXPECT_TRUE(chipWithRole(scene, 0, dpv::TensorRole::Input)->view().text.contains(QLatin1String("samples 0, 1, 2")));
  ASSERT_TRUE(scene->card()->isVisible());
  EXPECT_TRUE(scene->card()->lines().join(QLatin1Char(' ')).contains(QLatin1String("GPU 3: 9")));
}

TEST_F(IterationPageTest, ReduceAndStepShowOneWeightWithTheEnginesNumbers) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  const IterationInfo info = engine_->info();
  int reduce = -1, step = -1;
  for (int i = 0; i < static_cast<int>(info.plan.size()); ++i) {
    if (info.plan[static_cast<size_t>(i)].kind == dpv::StageKind::ReduceGrads) reduce = i;
    if (info.plan[static_cast<size_t>(i)].kind == dpv::StageKind::Step) step = i;
  }
  bool done = false;
  page_->seekTo(reduce, [&] { done = true; });
  ASSERT_TRUE(waitUntil([&] { return done; }));
  const dpv::StageEvent& ev = engine_->events().at(reduce);
  ASSERT_TRUE(ev.weight.has_value());
  InfoCard* card = page_->scene()->card();
  ASSERT_TRUE(card->isVisible());
  EXPECT_TRUE(card->title().contains(QLatin1String("g0 + g1 + g2 + g3 = g"))) << card->title().toStdString();
  const QString text = card->lines().join(QLatin1Char('\n'));
  // Every number to the same decimals, enough for the shown terms to add up to the shown sum.
  const int decimals = text.section(QStringLiteral("= "), 1).section(QLatin1Char('\n'), 0, 0).section(QLatin1Char('.'), 1).size();
  ASSERT_GE(decimals, 4) << text.toStdString();
  auto shown = [decimals](double v) { return QString::number(v, 'f', decimals); };
  for (double g : ev.weight->replica_grads) { EXPECT_TRUE(text.contains(shown(g))) << text.toStdString(); }
  EXPECT_TRUE(text.contains(QLatin1String("= ") + shown(ev.weight->grad))) << text.toStdString();
  ASSERT_TRUE(ev.weight->single_device_grad.has_value());
  EXPECT_TRUE(text.contains(QLatin1String("one device, whole batch: ") + shown(*ev.weight->single_device_grad))) << text.toStdString();

  ASSERT_TRUE(stepTo(step));
  const dpv::StageEvent& st = engine_->events().at(step);
  ASSERT_TRUE(st.weight && st.weight->weight_before && st.weight->weight_after);
  EXPECT_TRUE(card->lines().value(0).contains(num(*st.weight->weight_before)));
  EXPECT_TRUE(card->lines().value(0).contains(num(*st.weight->weight_after)));
  EXPECT_NE(*st.weight->weight_before, *st.weight->weight_after);
}

TEST_F(IterationPageTest, TheLessonFollowsTheSettingsAndLightsUpTheChipsItNames) {
  start(settingsFor(QStringLiteral("cpu:8"), QStringLiteral("simple"), 10));
  ASSERT_EQ(engine_->info().chunks, (std::vector<int64_t>{2, 2, 2, 2, 2}));
  ASSERT_TRUE(stepTo(0));
  const QString md = page_->lessonPanel()->lastMarkdown();
  EXPECT_FALSE(md.contains(QLatin1String("3, 3, 3, 1"))) << "10 samples on 8 devices are not 3, 3, 3, 1";
  EXPECT_FALSE(md.contains(QLatin1String("{{")));
  EXPECT_TRUE(md.contains(QStringLiteral("a batch of 10 on 8 devices becomes 2, 2, 2, 2, 2, and GPUs 5–7 get nothing")))
      << md.toStdString();
  ASSERT_TRUE(md.contains(QLatin1String("chip:batch")));
  // The mouse over the sentence's link outlines the input chips, and only those.
  emit page_->lessonPanel()->highlighted(QUrl(QStringLiteral("chip:batch")));
  IterationScene* scene = page_->scene();
  int lit = 0;
  for (int d = 0; d < scene->deviceCount(); ++d) {
    for (ChipItem* chip : scene->chipsOn(d)) {
      EXPECT_EQ(chip->highlighted(), chip->view().role == dpv::TensorRole::Input) << chip->view().text.toStdString();
      lit += chip->highlighted();
    }
  }
  EXPECT_EQ(lit, 5);
  emit page_->lessonPanel()->highlighted(QUrl());
  for (ChipItem* chip : scene->chipsOn(0)) { EXPECT_FALSE(chip->highlighted()); }
}

TEST_F(IterationPageTest, HoverCardsSayValuesBytesAndWhy) {
  start(settingsFor(QStringLiteral("cpu:2"), QStringLiteral("simple"), 8));
  ASSERT_TRUE(stepTo(0));
  ASSERT_TRUE(stepTo(1));
  ChipItem* params = chipWithRole(page_->scene(), 1, dpv::TensorRole::Param);
  ASSERT_NE(params, nullptr);
  const QString tip = params->toolTip();
  const dpv::TensorInfo& first = params->view().tensors.front();
  EXPECT_TRUE(tip.contains(QString::fromStdString(first.why).toHtmlEscaped())) << tip.toStdString();
  EXPECT_TRUE(tip.contains(formatBytes(static_cast<double>(first.bytes))));
  EXPECT_TRUE(tip.contains(QString::number(first.head.front(), 'g', 4)));
}

TEST_F(IterationPageTest, TheInspectorIsAResizablePanelWithAHeatMapForSmallTensors) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  ASSERT_NE(page_->splitter(), nullptr);
  EXPECT_EQ(page_->splitter()->count(), 2);
  ASSERT_NE(page_->sidePanels(), nullptr);
  EXPECT_TRUE(page_->sidePanels()->isAncestorOf(page_->inspector()));
  ASSERT_TRUE(stepTo(0));
  ASSERT_TRUE(page_->inspectChip(1, dpv::TensorRole::Input));
  TensorInspector* inspector = page_->inspector();
  ASSERT_EQ(inspector->rowCount(), 1);
  EXPECT_TRUE(inspector->whyText().contains(QLatin1String("rows 3-5"))) << inspector->whyText().toStdString();
  // [3, 10]: 30 values, all kept by the snapshot, drawn as 3 rows of 10 cells.
  HeatMap* heat = inspector->heatMap();
  EXPECT_EQ(heat->rows(), 3);
  EXPECT_EQ(heat->columns(), 10);
  const auto& t = engine_->events().at(0).devices.at(1).tensors.front();
  ASSERT_EQ(t.head.size(), 30u);
  for (int c = 0; c < 10; ++c) {
    const QColor color = heat->cellColor(0, c);
    if (t.head[static_cast<size_t>(c)] > 0) {
      EXPECT_GT(color.red(), color.blue()) << c;
    } else if (t.head[static_cast<size_t>(c)] < 0) {
      EXPECT_GT(color.blue(), color.red()) << c;
    }
  }
  EXPECT_GE(inspector->tree()->font().pixelSize(), 13);
}

TEST_F(IterationPageTest, TheCodeIsNotWrappedAndScrollsToTheCurrentLine) {
  start(settingsFor(QStringLiteral("cpu:4"), QStringLiteral("simple"), 10));
  page_->resize(1024, 560);
  CodeView* code = page_->codeView();
  for (int tab = 0; tab < 2; ++tab) { EXPECT_EQ(code->editor(tab)->lineWrapMode(), QPlainTextEdit::NoWrap); }
  const int stages = static_cast<int>(engine_->info().plan.size());
  bool done = false;
  page_->seekTo(stages - 1, [&] { done = true; });  // Step: the last lines of both programs
  ASSERT_TRUE(waitUntil([&] { return done; }));
  for (int tab = 0; tab < 2; ++tab) {
    code->setCurrentIndex(tab);
    QPlainTextEdit* edit = code->editor(tab);
    ASSERT_GE(code->highlightedLine(tab), 0);
    auto lineInView = [&] {
      const QRect line = edit->cursorRect(QTextCursor(edit->document()->findBlockByNumber(code->highlightedLine(tab))));
      return edit->viewport()->rect().intersects(line);
    };
    EXPECT_TRUE(waitUntil(lineInView, 5000)) << "tab " << tab << ": the highlighted line is out of view";
  }
}

}  // namespace gui
