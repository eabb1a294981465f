#pragma once
// The Network page's "predict first" mode and its command line, in the course layer so they are
// typed and testable: the learner's guess of the step time graded against the measured step (and
// shown beside the cost model's own prediction), and the `sudo dpv lab network` command that runs
// the same point over a real shaped link (docs/cli-lab-network.md).
#include <string>

#include "course/network_lab.h"

namespace dpv::course {

enum class GuessVerdict { Close, Near, Far };

// Within kCloseFraction of the measurement is close; within kNearFraction near; farther is far.
inline constexpr double kCloseFraction = 0.20;
inline constexpr double kNearFraction = 0.50;

struct GuessGrade {
  GuessVerdict verdict = GuessVerdict::Far;
  double guess_s = 0;
  double measured_s = 0;
  double predicted_s = 0;        // the cost model's step for the same run
  double guess_error = 0;        // (guess - measured) / measured: negative when the guess was short
  double model_error = 0;        // (predicted - measured) / measured
  bool guess_beat_model = false; // the guess landed nearer the measurement than the model did
};

// Grades `guess_s` against `summary`'s measured step. Throws dpv::Error (ValueError) for a guess
// that is not above 0 or a summary without a measured step.
GuessGrade grade_step_guess(double guess_s, const netmodel::PointSummary& summary);

// One sentence for the learner, written from the grade's numbers ("Close: you guessed 12.0 ms, the
// step took 11.2 ms (7% over); the model predicted 10.9 ms.").
std::string guess_grade_text(const GuessGrade& grade);

// The command that measures `setup` on a real link shaped to `link` (needs root): two nodes of
// world/2 ranks each. Throws dpv::Error (ValueError) for an odd world (the lab puts the same number
// of ranks on each of its two nodes).
std::string real_link_command(const NetworkLabSetup& setup, const std::string& preset, const netmodel::Link& link);

}  // namespace dpv::course
