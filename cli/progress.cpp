#include "cli/progress.h"

#include <unistd.h>

#include <algorithm>

#include "cli/format.h"

namespace dpv::cli {

ProgressReporter::ProgressReporter(std::ostream& out, int64_t total_steps, bool interactive, int lines)
    : out_(out), total_(std::max<int64_t>(total_steps, 1)), interactive_(interactive),
      every_(std::max<int64_t>(1, total_ / std::max(lines, 1))) {}

bool ProgressReporter::stdout_is_terminal() { return isatty(STDOUT_FILENO) == 1; }

std::string ProgressReporter::bar(int64_t step) const {
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(kWidth * std::min(step, total_) / total_);
  std::string s = "[";  // appended piecewise: GCC 12 warns (-Wrestrict, a false positive) on "[" + std::string(...)
  s.append(static_cast<size_t>(filled), '#');
  s.append(static_cast<size_t>(kWidth - filled), '.');
  s += ']';
  return s;
}

std::string ProgressReporter::text(const ProgressSample& s) const {
  const int width = static_cast<int>(std::to_string(total_).size());
  return strf("step %*lld/%lld  loss %s  acc %5.1f%%  %.0f samples/s", width, static_cast<long long>(s.step),
              static_cast<long long>(total_), py_fixed(s.loss, 4).c_str(), 100.0 * s.accuracy, s.samples_per_s);
}

void ProgressReporter::update(const ProgressSample& s) {
  if (interactive_) {
    auto now = std::chrono::steady_clock::now();
    if (now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    out_ << "\r" << bar(s.step) << " " << text(s) << std::flush;
    return;
  }
  if (s.step % every_ == 0 && s.step != total_) {
    out_ << text(s) << "\n" << std::flush;
    last_printed_ = s.step;
  }
}

void ProgressReporter::finish(const ProgressSample& s) {
  if (interactive_) {
    out_ << "\r" << bar(s.step) << " " << text(s) << "\n" << std::flush;
  } else if (last_printed_ != s.step) {
    out_ << text(s) << "\n" << std::flush;
  }
}

}  // namespace dpv::cli
