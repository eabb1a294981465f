#pragma once
// Convolution lowering: x [N, C, H, W] -> col [N, C*kh*kw, OH*OW] (zero padding), and back:
// col2im writes dx [N, C, H, W] = the sum of every col entry that read each input pixel
// (dx is overwritten, not accumulated into). Row index of col: (c*kh + ki)*kw + kj.
#include "kernels/launch.h"
#include "kernels/math/indexing.h"

namespace dpv::kernels {

using ConvShape = math::ConvShape;  // index helpers: kernels/math/indexing.h

int im2col(const float* x, float* col, const ConvShape& g, void* stream);
int im2col(const double* x, double* col, const ConvShape& g, void* stream);
int col2im(const float* col, float* dx, const ConvShape& g, void* stream);
int col2im(const double* col, double* dx, const ConvShape& g, void* stream);

}  // namespace dpv::kernels
