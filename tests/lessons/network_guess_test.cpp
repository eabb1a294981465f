// The Network page's "predict first" grading and real-link command (course/network_guess.h): a
// guess is graded by how far it lands from the measured step, the model's own miss is reported
// beside it, bad guesses are refused, and the command says what the controls chose.
#include <gtest/gtest.h>

#include "course/network_guess.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace {

netmodel::PointSummary summary(double measured_s, double predicted_s) {
  netmodel::PointSummary s;
  s.steps_measured = 4;
  s.step_s = measured_s;
  s.predicted_step_s = predicted_s;
  return s;
}

TEST(NetworkGuess, GradesByTheDistanceFromTheMeasurement) {
  const netmodel::PointSummary s = summary(0.100, 0.080);
  EXPECT_EQ(grade_step_guess(0.110, s).verdict, GuessVerdict::Close);
  EXPECT_EQ(grade_step_guess(0.081, s).verdict, GuessVerdict::Close);
  EXPECT_EQ(grade_step_guess(0.140, s).verdict, GuessVerdict::Near);
  EXPECT_EQ(grade_step_guess(0.050, s).verdict, GuessVerdict::Near);
  EXPECT_EQ(grade_step_guess(0.200, s).verdict, GuessVerdict::Far);
  EXPECT_EQ(grade_step_guess(0.010, s).verdict, GuessVerdict::Far);
  const GuessGrade g = grade_step_guess(0.090, s);
  EXPECT_NEAR(g.guess_error, -0.10, 1e-12);
  EXPECT_NEAR(g.model_error, -0.20, 1e-12);
  EXPECT_TRUE(g.guess_beat_model);
  EXPECT_FALSE(grade_step_guess(0.130, s).guess_beat_model);
}

TEST(NetworkGuess, TheSentenceCarriesTheGradesNumbers) {
  const std::string text = guess_grade_text(grade_step_guess(0.012, summary(0.010, 0.011)));
  EXPECT_EQ(text, "Close: you guessed 12.0 ms, the step took 10.0 ms (your guess 20% over); "
                  "the cost model predicted 11.0 ms (10% over).");
}

TEST(NetworkGuess, RefusesAGuessOrARunWithoutATime) {
  EXPECT_THROW(grade_step_guess(0, summary(0.01, 0.01)), Error);
  EXPECT_THROW(grade_step_guess(-1, summary(0.01, 0.01)), Error);
  EXPECT_THROW(grade_step_guess(0.01, summary(0, 0.01)), Error);
}

TEST(NetworkGuess, TheRealLinkCommandFollowsTheSetup) {
  NetworkLabSetup setup;
  setup.model = preset_model("mlp-bn");
  setup.world = 4;
  setup.bucket_cap_mb = 0.5;
  setup.comm_hook.kind = CommHookKind::PowerSgd;
  EXPECT_EQ(real_link_command(setup, "mlp-bn", {0.002, 100e6 / 8}),
            "sudo dpv lab network --nproc-per-node 2 --rate 100mbit --delay 2ms --bucket-cap-mb 0.5 "
            "--comm-hook powersgd -- train --ddp --preset mlp-bn --batch 64 --steps 6 --seed 0");
  setup.world = 3;
  EXPECT_THROW(real_link_command(setup, "mlp-bn", {0, 1e6}), Error);
}

}  // namespace
}  // namespace dpv::course
