#pragma once
// The training progress line of `dpv train`: on a terminal one line redrawn in place with a
// carriage return (at most ten times a second); otherwise plain lines at regular step intervals,
// so logs and pipes stay readable.
#include <chrono>
#include <cstdint>
#include <ostream>
#include <string>

namespace dpv::cli {

struct ProgressSample {
  int64_t step = 0;          // steps done
  double loss = 0;           // mean over the recent window
  double accuracy = 0;       // fraction in [0, 1] over the recent window
  double samples_per_s = 0;  // since training began
};

class ProgressReporter {
 public:
  // `interactive`: redraw one line (a TTY); otherwise print about `lines` plain lines in all.
  ProgressReporter(std::ostream& out, int64_t total_steps, bool interactive, int lines = 10);
  void update(const ProgressSample& s);
  // Prints the final state (always) and ends the line.
  void finish(const ProgressSample& s);
  static bool stdout_is_terminal();

 private:
  std::string bar(int64_t step) const;
  std::string text(const ProgressSample& s) const;
  std::ostream& out_;
  int64_t total_;
  bool interactive_;
  int64_t every_;
  std::chrono::steady_clock::time_point last_draw_{};
  int64_t last_printed_ = -1;
};

}  // namespace dpv::cli
