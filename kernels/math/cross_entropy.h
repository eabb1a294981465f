#pragma once
// Row math of CrossEntropyLoss (reduction mean, ignore_index -100) and the layout of the kernel's
// device workspace, shared by the CPU backend and the kernels.
#include <cmath>
#include <cstdint>

#include "kernels/math/hd.h"

namespace dpv::kernels::math {

// nn.CrossEntropyLoss's default ignore_index: a row with this target is left out of the loss.
constexpr int64_t kIgnoreIndex = -100;

enum class TargetKind { Counted, Ignored, OutOfRange };

// What a target means for K classes: a class in [0, K), the ignore index, or an error.
DPV_HD inline TargetKind classify_target(int64_t target, int64_t K) {
  if (target == kIgnoreIndex) return TargetKind::Ignored;
  return target >= 0 && target < K ? TargetKind::Counted : TargetKind::OutOfRange;
}

// Loss of one counted row: logsumexp(row) - row[target].
DPV_HD inline double ce_row_loss(double logsumexp, double target_logit) { return logsumexp - target_logit; }

// Gradient of one logit: (softmax - onehot) * scale, scale = grad_scale / counted rows.
DPV_HD inline double ce_grad(double logit, double logsumexp, bool is_target, double scale) {
  return (std::exp(logit - logsumexp) - (is_target ? 1.0 : 0.0)) * scale;
}

// The mean over the counted rows. None counted (every row ignored, or no rows) is 0/0 = nan, as
// PyTorch's mean reduction gives.
DPV_HD inline double ce_mean(double total, int64_t counted) { return total / static_cast<double>(counted); }

// The kernel's workspace: row_loss[N] (double), then CeInfo, 16-byte aligned.
struct CeInfo {
  int64_t bad_row;     // first row whose target is out of range, -1 when none
  int64_t bad_target;  // that row's target
  int64_t counted;     // rows that count (not ignored)
  int64_t unused;
};
DPV_HD inline int64_t ce_info_offset(int64_t N) { return (N * 8 + 15) / 16 * 16; }
DPV_HD inline int64_t ce_workspace_bytes(int64_t N) {
  return ce_info_offset(N) + static_cast<int64_t>(sizeof(CeInfo));
}

}  // namespace dpv::kernels::math
