// torch.linalg.qr's Q for PowerSGD's ranks above 2 (LAPACK geqrf + orgqr, see powersgd.h).
#include <cmath>

#include "engine/ddp/comm_hooks/powersgd.h"

namespace dpv {

void orthogonalize_householder_qr(std::vector<float>& matrix, int64_t rows, int64_t cols) {
  // In double, each step as LAPACK's unblocked geqr2 and org2r (the same reflectors, so the same
  // signs: column j of Q points away from the sign of the diagonal element it reflected).
  std::vector<double> a(matrix.begin(), matrix.end());  // [rows, cols]
  auto at = [&](int64_t i, int64_t k) -> double& { return a[static_cast<size_t>(i * cols + k)]; };
  std::vector<double> tau(static_cast<size_t>(cols), 0.0);
  for (int64_t j = 0; j < cols; ++j) {
    // slarfg: H = I - tau v v^T with v[j] = 1 turns column j below the diagonal into zeros.
    const double alpha = at(j, j);
    double xnorm = 0;
    for (int64_t i = j + 1; i < rows; ++i) xnorm += at(i, j) * at(i, j);
    xnorm = std::sqrt(xnorm);
    if (xnorm == 0) continue;  // tau 0: H = I
    const double beta = -std::copysign(std::hypot(alpha, xnorm), alpha);
    tau[static_cast<size_t>(j)] = (beta - alpha) / beta;
    for (int64_t i = j + 1; i < rows; ++i) at(i, j) /= alpha - beta;
    at(j, j) = beta;
    for (int64_t k = j + 1; k < cols; ++k) {  // apply H to the columns on the right
      double w = at(j, k);
      for (int64_t i = j + 1; i < rows; ++i) w += at(i, j) * at(i, k);
      w *= tau[static_cast<size_t>(j)];
      at(j, k) -= w;
      for (int64_t i = j + 1; i < rows; ++i) at(i, k) -= w * at(i, j);
    }
  }
  // org2r: Q = H_0 H_1 ... H_{cols-1} applied to the first cols columns of the identity.
  std::vector<double> q(static_cast<size_t>(rows * cols), 0.0);  // [rows, cols]
  auto qat = [&](int64_t i, int64_t k) -> double& { return q[static_cast<size_t>(i * cols + k)]; };
  for (int64_t k = 0; k < cols; ++k) qat(k, k) = 1.0;
  for (int64_t j = cols - 1; j >= 0; --j) {
    const double t = tau[static_cast<size_t>(j)];
    if (t == 0) continue;
    for (int64_t k = j; k < cols; ++k) {
      double w = qat(j, k);
      for (int64_t i = j + 1; i < rows; ++i) w += at(i, j) * qat(i, k);
      w *= t;
      qat(j, k) -= w;
      for (int64_t i = j + 1; i < rows; ++i) qat(i, k) -= w * at(i, j);
    }
  }
  for (size_t i = 0; i < q.size(); ++i) matrix[i] = static_cast<float>(q[i]);
}

}  // namespace dpv
