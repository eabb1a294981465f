#pragma once
// Mean cross-entropy of logits [N, K] against int64 targets [N] (CrossEntropyLoss, reduction mean):
//   loss_out[0] = mean over rows of (logsumexp(row) - row[target])
//   dlogits = (softmax - onehot(target)) * grad_scale / N
// Both computed in double per row. The workspace holds the per-row losses and a report of the
// first target outside [0, K): info[0] = its row (-1 when every target is valid), info[1] = its
// value. The caller copies info back after the launch and raises the error there, since a kernel
// cannot throw.
#include "kernels/launch.h"

namespace dpv::kernels {

// Bytes of device workspace cross_entropy needs for N rows (16-byte aligned pointer).
int64_t cross_entropy_workspace_bytes(int64_t N);
// Where, inside the workspace, the two int64 values of `info` are.
int64_t* cross_entropy_info(void* workspace, int64_t N);

int cross_entropy(const float* logits, const int64_t* target, float* loss_out, float* dlogits, int64_t N, int64_t K,
                  double grad_scale, void* workspace, void* stream);
int cross_entropy(const double* logits, const int64_t* target, double* loss_out, double* dlogits, int64_t N,
                  int64_t K, double grad_scale, void* workspace, void* stream);

}  // namespace dpv::kernels
