#include "course/network_guess.h"

#include <cmath>
#include <cstdio>
#include <string>

#include "course/network_real.h"
#include "engine/error.h"

namespace dpv::course {

namespace {

std::string ms_text(double seconds) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms", seconds * 1e3);
  return text;
}

std::string percent_text(double fraction) {
  char text[48];
  std::snprintf(text, sizeof text, "%.0f%% %s", std::abs(fraction) * 100, fraction < 0 ? "under" : "over");
  return text;
}

const char* verdict_word(GuessVerdict verdict) {
  switch (verdict) {
    case GuessVerdict::Close: return "Close";
    case GuessVerdict::Near: return "Near";
    case GuessVerdict::Far: return "Far off";
  }
  return "Far off";
}

}  // namespace

GuessGrade grade_step_guess(double guess_s, const netmodel::PointSummary& summary) {
  check(std::isfinite(guess_s) && guess_s > 0, "a guess of the step time must be above 0 ms", ErrorClass::ValueError);
  check(summary.step_s > 0, "the run measured no step to grade the guess against: run the point again",
        ErrorClass::ValueError);
  GuessGrade grade;
  grade.guess_s = guess_s;
  grade.measured_s = summary.step_s;
  grade.predicted_s = summary.predicted_step_s;
  grade.guess_error = (guess_s - summary.step_s) / summary.step_s;
  grade.model_error = (summary.predicted_step_s - summary.step_s) / summary.step_s;
  const double miss = std::abs(grade.guess_error);
  grade.verdict = miss <= kCloseFraction ? GuessVerdict::Close : miss <= kNearFraction ? GuessVerdict::Near : GuessVerdict::Far;
  grade.guess_beat_model = miss < std::abs(grade.model_error);
  return grade;
}

std::string guess_grade_text(const GuessGrade& grade) {
  std::string text = std::string(verdict_word(grade.verdict)) + ": you guessed " + ms_text(grade.guess_s) +
                     ", the step took " + ms_text(grade.measured_s) + " (your guess " +
                     percent_text(grade.guess_error) + "); the cost model predicted " + ms_text(grade.predicted_s) +
                     " (" + percent_text(grade.model_error) + ").";
  if (grade.guess_beat_model) text += " Your guess was nearer than the model's.";
  return text;
}

std::string real_link_command(const NetworkLabSetup& setup, const std::string& preset, const netmodel::Link& link) {
  return "sudo " + shell_command("dpv", lab_network_arguments(setup, preset, link, ""));
}

}  // namespace dpv::course
