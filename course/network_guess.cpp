#include "course/network_guess.h"

#include <cmath>
#include <cstdio>
#include <string>

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

// `dpv train --comm-hook`'s names for the hooks the lab sweeps.
std::string hook_flag(const CommHookOptions& hook) {
  switch (hook.kind) {
    case CommHookKind::None: return "";
    case CommHookKind::AllReduce: return " --comm-hook allreduce";
    case CommHookKind::Fp16Compress: return " --comm-hook fp16";
    case CommHookKind::Bf16Compress: return " --comm-hook bf16";
    case CommHookKind::PowerSgd: return " --comm-hook powersgd";
  }
  return "";
}

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
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
  check(setup.world >= 2 && setup.world % 2 == 0,
        "the real lab puts the same number of ranks on each of its two nodes: choose an even number of ranks, got " +
            std::to_string(setup.world),
        ErrorClass::ValueError);
  return "sudo dpv lab network --nproc-per-node " + std::to_string(setup.world / 2) + " --rate " +
         netmodel::rate_text(link.bandwidth_bytes_per_s * 8) + " --delay " + netmodel::delay_text(link.latency_s) +
         " --bucket-cap-mb " + number_text(setup.bucket_cap_mb) + hook_flag(setup.comm_hook) +
         " -- train --ddp --preset " + preset + " --batch " + std::to_string(setup.batch) + " --steps " +
         std::to_string(setup.steps) + " --seed " + std::to_string(setup.seed);
}

}  // namespace dpv::course
