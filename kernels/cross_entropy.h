#pragma once
// Mean cross-entropy of logits [N, K] against int64 targets [N] (CrossEntropyLoss, reduction mean,
// ignore_index -100): with n the rows whose target is not -100,
//   loss_out[0] = (sum over those rows of logsumexp(row) - row[target]) / n   (nan when n = 0)
//   dlogits = (softmax - onehot(target)) * grad_scale / n, and 0 on ignored rows
// Both computed in double per row (row math: kernels/math/cross_entropy.h). The workspace holds
// the per-row losses and a math::CeInfo: the first target outside [0, K) other than -100 (its row,
// -1 when none, and its value) and n. The caller copies the first two values back after the
// launch and raises the error there, since a kernel cannot throw.
#include "kernels/launch.h"
#include "kernels/math/cross_entropy.h"

namespace dpv::kernels {

// Bytes of device workspace cross_entropy needs for N rows (16-byte aligned pointer).
inline int64_t cross_entropy_workspace_bytes(int64_t N) { return math::ce_workspace_bytes(N); }
// Where, inside the workspace, the report (bad row, bad target) is: two int64 values.
inline int64_t* cross_entropy_info(void* workspace, int64_t N) {
  return reinterpret_cast<int64_t*>(static_cast<char*>(workspace) + math::ce_info_offset(N));
}

int cross_entropy(const float* logits, const int64_t* target, float* loss_out, float* dlogits, int64_t N, int64_t K,
                  double grad_scale, void* workspace, void* stream);
int cross_entropy(const double* logits, const int64_t* target, double* loss_out, double* dlogits, int64_t N,
                  int64_t K, double grad_scale, void* workspace, void* stream);

}  // namespace dpv::kernels
