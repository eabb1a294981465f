// sceneStateFor: the scene's content from a snapshot alone (no engine needed).
#include <gtest/gtest.h>

#include <set>

#include "gui/common/scene_model.h"

#include <cmath>

namespace gui {

namespace {

IterationInfo fourDevices() {
  IterationInfo info;
  for (int d = 0; d < 4; ++d) {
    info.deviceLabels << QStringLiteral("GPU %1 (simulated on CPU)").arg(d);
    info.deviceTitles.push_back({QStringLiteral("GPU %1").arg(d), QStringLiteral("simulated on CPU"), true});
  }
  info.chunks = {2, 2, 2};
  return info;
}

dpv::TensorInfo tensor(const std::string& name, dpv::TensorRole role, int device, dpv::Shape shape) {
  dpv::TensorInfo t;
  t.name = name;
  t.role = role;
  t.device = device;
  t.shape = shape;
  t.bytes = 4 * static_cast<size_t>(dpv::Shape(shape).empty() ? 1 : shape[0]);
  return t;
}

}  // namespace

TEST(SceneModel, BeforeTheFirstStageNothingIsOnTheDevices) {
  const SceneState s = sceneStateFor(fourDevices(), nullptr);
  EXPECT_FALSE(s.started);
  ASSERT_EQ(s.devices.size(), 4);
  for (const auto& d : s.devices) {
    EXPECT_TRUE(d.chips.isEmpty());
    EXPECT_FALSE(d.idle) << "nothing is idle before the batch is split";
  }
  EXPECT_EQ(s.devices[1].title, QStringLiteral("GPU 1"));
  EXPECT_EQ(s.devices[1].subtitle, QStringLiteral("simulated on CPU"));
  EXPECT_TRUE(s.devices[0].subtitle.contains(QLatin1String("output device")));
}

TEST(SceneModel, TitlesAndTheirShortFormsComeFromTheDevicesTitles) {
  IterationInfo info = fourDevices();
  info.deviceTitles[1] = {QStringLiteral("GPU 1"), QStringLiteral("virtual, on H200 #0"), false};
  const SceneState s = sceneStateFor(info, nullptr);
  EXPECT_EQ(s.devices[0].title, QStringLiteral("GPU 0"));
  EXPECT_EQ(s.devices[0].subtitle, QStringLiteral("simulated on CPU · output device"));
  EXPECT_EQ(s.devices[0].shorterSubtitles,
            (QStringList{QStringLiteral("output device"), QStringLiteral("simulated on CPU"), QStringLiteral("output"), QStringLiteral("on CPU")}));
  EXPECT_EQ(s.devices[1].subtitle, QStringLiteral("virtual, on H200 #0"));
  EXPECT_TRUE(s.devices[1].shorterSubtitles.isEmpty()) << "not simulated: no \"on CPU\"";
  EXPECT_EQ(s.devices[2].shorterSubtitles, QStringList{QStringLiteral("on CPU")});
}

TEST(SceneModel, ScatterGivesChunksAndLeavesTheDeviceWithoutOneIdle) {
  dpv::StageEvent ev;
  ev.stage.kind = dpv::StageKind::Scatter;
  ev.chunk_sizes = {2, 2, 2};
  for (int d = 0; d < 4; ++d) {
    dpv::DeviceState ds;
    ds.device = d;
    ds.chunk_rows = d < 3 ? 2 : 0;
    if (d < 3) {
      ds.tensors.push_back(tensor("input chunk", dpv::TensorRole::Input, d, {2, 10}));
      ds.tensors.back().first_row = 2 * d;
    }
    ev.devices.push_back(ds);
  }
  const SceneState s = sceneStateFor(fourDevices(), &ev);
  for (int d = 0; d < 3; ++d) {
    ASSERT_EQ(s.devices[d].chips.size(), 1) << d;
    EXPECT_EQ(s.devices[d].chips[0].role, dpv::TensorRole::Input);
    EXPECT_EQ(s.devices[d].chips[0].text, QStringLiteral("samples %1, %2 · [2, 10]").arg(2 * d).arg(2 * d + 1));
    EXPECT_EQ(s.devices[d].chips[0].shorterTexts, QStringList{QStringLiteral("samples %1, %2").arg(2 * d).arg(2 * d + 1)});
    EXPECT_EQ(s.devices[d].chips[0].device, d);
    EXPECT_FALSE(s.devices[d].idle);
  }
  EXPECT_TRUE(s.devices[3].idle);
  EXPECT_TRUE(s.devices[3].chips.isEmpty());
  // The card's lines name each device's rows by number; its title may drop "(torch.chunk)".
  EXPECT_EQ(s.cardLines.join(QLatin1Char('|')), QStringLiteral("GPU 0: 0, 1  ·  GPU 1: 2, 3|GPU 2: 4, 5|GPU 3: no chunk, idle"));
  EXPECT_EQ(s.cardTitleShorter, QStringList{QStringLiteral("Which samples went where")});
}

TEST(SceneModel, ParametersAndBuffersShareOneChipAndGradsGetTheirOwn) {
  dpv::StageEvent ev;
  ev.stage.kind = dpv::StageKind::ReduceGrads;
  dpv::DeviceState ds;
  ds.device = 0;
  ds.has_replica = true;
  ds.chunk_rows = 3;
  ds.tensors = {tensor("0.weight", dpv::TensorRole::Param, 0, {16, 2}), tensor("1.running_mean", dpv::TensorRole::Buffer, 0, {16}),
                tensor("grad 0.weight", dpv::TensorRole::Grad, 0, {16, 2})};
  ds.tensors[0].memory = ds.tensors[1].memory = dpv::MemoryKind::Parameters;
  ds.tensors[2].memory = dpv::MemoryKind::Gradients;
  ev.devices.push_back(ds);
  IterationInfo info;
  info.deviceLabels << QStringLiteral("GPU 0 (simulated on CPU)");
  info.deviceTitles.push_back({QStringLiteral("GPU 0"), QStringLiteral("simulated on CPU"), true});
  const SceneState s = sceneStateFor(info, &ev);
  const auto& chips = s.devices[0].chips;
  // The snapshot is the whole truth: no chip is made up for the chunk rows it does not list.
  ASSERT_EQ(chips.size(), 2);
  EXPECT_EQ(chips[0].role, dpv::TensorRole::Param);
  EXPECT_EQ(chips[0].tensors.size(), 2);
  EXPECT_EQ(chips[1].role, dpv::TensorRole::Grad);
  EXPECT_TRUE(s.devices[0].note.contains(QLatin1String("summed")));
}

}  // namespace gui

// Issue 26: the chips and the numbers card tell the truth in the code panel's words.
namespace gui {
namespace {

dpv::TensorInfo parameterPart(const std::string& name, dpv::TensorRole role) {
  dpv::TensorInfo t = tensor(name, role, 0, {4});
  t.memory = dpv::MemoryKind::Parameters;
  t.state_entry = name;  // as the engine's snapshots say
  return t;
}

// A ReduceGrads event of `replicaGrads` summed into `sum`, beside one device's whole-batch gradient.
dpv::StageEvent reduceEvent(std::vector<double> replicaGrads, double sum) {
  dpv::StageEvent ev;
  ev.stage.kind = dpv::StageKind::ReduceGrads;
  dpv::WeightElement w;
  w.param = "0.weight";
  w.index = 3;
  w.replica_grads = std::move(replicaGrads);
  w.grad = sum;
  w.single_device_grad = sum / 2;
  w.difference = sum / 2;
  ev.weight = w;
  return ev;
}

bool mentionsBatchNorm(const SceneState& s) {
  return s.cardLines.join(QLatin1Char('|')).contains(QLatin1String("BatchNorm"));
}

}  // namespace

TEST(SceneModel, ParametersAndBuffersAreCountedApart) {
  dpv::StageEvent ev;
  ev.stage.kind = dpv::StageKind::Replicate;
  dpv::DeviceState d;
  d.device = 0;
  d.tensors = {parameterPart("0.weight", dpv::TensorRole::Param), parameterPart("0.bias", dpv::TensorRole::Param),
               parameterPart("1.running_mean", dpv::TensorRole::Buffer)};
  ev.devices = {d};
  const SceneState s = sceneStateFor(fourDevices(), &ev);
  ASSERT_EQ(s.devices[0].chips.size(), 1);
  EXPECT_TRUE(s.devices[0].chips[0].text.startsWith(QStringLiteral("params ×2 · buffers ×1"))) << s.devices[0].chips[0].text.toStdString();
  for (const QString& shorter : s.devices[0].chips[0].shorterTexts)
    EXPECT_TRUE(shorter.contains(QStringLiteral("buffers ×1"))) << "a short chip keeps the buffers: " << shorter.toStdString();
}

TEST(SceneModel, TheSamplePresetsNamesAreTheProgramsAndSequentialsStayAsTheyAre) {
  dpv::StageEvent ev = reduceEvent({0.25, 0.5}, 0.75);
  dpv::DeviceState d;
  d.device = 0;
  d.tensors = {parameterPart("0.weight", dpv::TensorRole::Param)};
  ev.devices = {d};
  IterationInfo info = fourDevices();
  info.preset = "simple";  // SimpleModel: self.linear
  SceneState s = sceneStateFor(info, &ev);
  EXPECT_TRUE(s.cardTitle.startsWith(QStringLiteral("grad of linear.weight[3]"))) << s.cardTitle.toStdString();
  EXPECT_EQ(s.devices[0].chips[0].tensors[0].name, "linear.weight");
  // Its gradient and momentum too: "grad linear.weight", never "grad 0.weight" beside the card.
  dpv::TensorInfo grad = tensor("grad 0.weight", dpv::TensorRole::Grad, 0, {4});
  grad.memory = dpv::MemoryKind::Gradients;
  grad.state_entry = "0.weight";
  dpv::TensorInfo momentum = tensor("momentum 0.weight", dpv::TensorRole::Optimizer, 0, {4});
  momentum.memory = dpv::MemoryKind::Optimizer;
  momentum.state_entry = "0.weight";
  ev.devices[0].tensors = {parameterPart("0.weight", dpv::TensorRole::Param), grad, momentum};
  s = sceneStateFor(info, &ev);
  std::set<std::string> names;
  for (const auto& chip : s.devices[0].chips)
    for (const auto& t : chip.tensors) names.insert(t.name);
  EXPECT_EQ(names, (std::set<std::string>{"linear.weight", "grad linear.weight", "momentum linear.weight"}));
  ev.devices[0].tensors = {parameterPart("0.weight", dpv::TensorRole::Param)};
  info.preset = "mlp-bn";  // an nn.Sequential: its own names
  s = sceneStateFor(info, &ev);
  EXPECT_TRUE(s.cardTitle.startsWith(QStringLiteral("grad of 0.weight[3]"))) << s.cardTitle.toStdString();
  EXPECT_EQ(s.devices[0].chips[0].tensors[0].name, "0.weight");
}

TEST(SceneModel, TheReduceCardSaysPerChunkBatchNormIsWhyTheSumDiffers) {
  const dpv::StageEvent ev = reduceEvent({0.25, 0.5}, 0.75);
  // The run's fact (course::lesson_facts: BatchNorm, not synchronised, more than one replica;
  // tests/lessons checks it against the engine's gradients) decides, as it does for the lesson.
  IterationInfo info = fourDevices();
  info.lessonFacts.bn_breaks_sum = true;
  EXPECT_TRUE(mentionsBatchNorm(sceneStateFor(info, &ev))) << sceneStateFor(info, &ev).cardLines.join(QLatin1Char('|')).toStdString();
  info.lessonFacts.bn_breaks_sum = false;  // SyncBatchNorm's whole-batch statistics, or no BatchNorm
  EXPECT_FALSE(mentionsBatchNorm(sceneStateFor(info, &ev)));
  info.lessonFacts.bn_breaks_sum = true;
  const dpv::StageEvent one = reduceEvent({0.75}, 0.75);  // one replica in the event: nothing summed
  EXPECT_FALSE(mentionsBatchNorm(sceneStateFor(info, &one)));
  info.lessonFacts.bn_breaks_sum = false;
  EXPECT_FALSE(mentionsBatchNorm(sceneStateFor(info, &ev)));
  // Five replicas take two lines for the sum: the reason still fits the card's three lines.
  info.lessonFacts.bn_breaks_sum = true;
  const dpv::StageEvent fiveReplicas = reduceEvent({0.1, 0.1, 0.1, 0.1, 0.1}, 0.5);
  const SceneState s5 = sceneStateFor(info, &fiveReplicas);
  EXPECT_LE(s5.cardLines.size(), 3);
  EXPECT_TRUE(mentionsBatchNorm(s5)) << s5.cardLines.join(QLatin1Char('|')).toStdString();
}

TEST(SceneModel, TheShownTermsAddUpToTheShownSum) {
  // 0.15004 three times is 0.45012: at four digits the terms read 0.15 (or 0.1500) and the sum 0.4501.
  for (const auto& [terms, sum] : std::vector<std::pair<std::vector<double>, double>>{
           {{0.15004, 0.15004, 0.15004}, 0.45012}, {{-0.0123456, 0.0223456}, 0.01}, {{1.25, 2.5}, 3.75}}) {
    const dpv::StageEvent ev = reduceEvent(terms, sum);
    const SceneState s = sceneStateFor(fourDevices(), &ev);
    ASSERT_FALSE(s.cardLines.isEmpty());
    const QStringList sides = s.cardLines[0].split(QStringLiteral(" = "));
    ASSERT_EQ(sides.size(), 2) << s.cardLines[0].toStdString();
    const QStringList shownTerms = sides[0].split(QStringLiteral(" + "));
    ASSERT_EQ(shownTerms.size(), static_cast<int>(terms.size()));
    const int decimals = sides[1].section(QLatin1Char('.'), 1).size();
    double added = 0;
    for (const QString& t : shownTerms) {
      EXPECT_EQ(t.section(QLatin1Char('.'), 1).size(), decimals) << "every number to the same decimals: " << s.cardLines[0].toStdString();
      added += t.toDouble();
    }
    EXPECT_NEAR(added, sides[1].toDouble(), 0.5 * std::pow(10.0, -decimals)) << s.cardLines[0].toStdString();
  }
}

}  // namespace gui
