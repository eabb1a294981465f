// The Iteration page's SimpleModel preset trains on the seed program's data (torch.randn inputs,
// random labels in [0, 2)), the same batch every iteration of a run, so its first loss is the
// program's (near ln 2), not that of blob data (0.0009 or 7, depending on the seed).
#include "gui_test_support.h"

#include "course/sample_program.h"

namespace gui {

namespace {

struct PresetRun {
  double firstLoss = -1;
  std::vector<std::vector<double>> inputHeads;  // per iteration
};

// `iterations` whole iterations of `preset` through the app's engine controller.
PresetRun runIterations(const QString& preset, int batch, uint64_t seed, int iterations) {
  EngineController engine;
  AppSettings settings = settingsFor(QStringLiteral("cpu:4"), preset, batch);
  settings.seed = seed;
  engine.applySettings(settings);
  PresetRun run;
  for (int i = 1; i <= iterations; ++i) {
    engine.requestIteration();
    const bool done = waitUntil([&] { return !engine.busy() && engine.lastCompletedInfo().iteration == i; });
    EXPECT_TRUE(done) << "iteration " << i << " never finished: " << engine.lastError().toStdString();
    if (!done) break;
    run.inputHeads.push_back(engine.lastCompletedInfo().inputHead);
    if (i == 1) {
      for (const auto& event : engine.lastCompleted()) {
        if (event.loss) run.firstLoss = *event.loss;
      }
    }
  }
  return run;
}

}  // namespace

TEST(SamplePreset, FirstLossIsTheSeedProgramsForEverySeed) {
  // Linear(10, 2) at initialisation on N(0, 1) inputs gives logits of about +-0.5, and random
  // labels give a cross entropy near ln 2 = 0.69; 0.4 to 1.2 holds for any seed at batch 10.
  for (uint64_t seed : {0, 1, 2, 3, 7, 42}) {
    const PresetRun run = runIterations(QStringLiteral("simple"), 10, seed, 1);
    EXPECT_GT(run.firstLoss, 0.4) << "seed " << seed;
    EXPECT_LT(run.firstLoss, 1.2) << "seed " << seed;
  }
}

TEST(SamplePreset, TrainsOnTheSeedProgramsDataEveryIteration) {
  const uint64_t seed = 3;
  const PresetRun run = runIterations(QStringLiteral("simple"), 10, seed, 3);
  ASSERT_EQ(run.inputHeads.size(), 3u);
  const std::vector<double> program = dpv::course::sample_data(10, seed).inputs.to_doubles(6);
  EXPECT_EQ(run.inputHeads[0], program) << "the first batch is the program's torch.randn inputs";
  EXPECT_EQ(run.inputHeads[1], run.inputHeads[0]) << "the same batch in every iteration of a run";
  EXPECT_EQ(run.inputHeads[2], run.inputHeads[0]);
}

TEST(SamplePreset, SeedProgramsLabelsAreZeroOrOne) {
  const dpv::Dataset data = dpv::course::sample_data(64, 5);
  ASSERT_EQ(data.inputs.shape(), (dpv::Shape{64, 10}));
  bool seen[2] = {false, false};
  for (int64_t label : data.targets.to_int64()) {
    ASSERT_TRUE(label == 0 || label == 1) << label;
    seen[label] = true;
  }
  EXPECT_TRUE(seen[0] && seen[1]) << "64 random labels hold both classes";
}

}  // namespace gui
