#pragma once
// From oneDNN's blocked nChw16c layout back to NCHW, for the convolutions' outputs (OnednnConv).
// oneDNN's own reorder out of nChw16c is its generic one when the channels are zero-padded to the
// block (8 channels in a block of 16: 0.19 ms for [32, 8, 32, 32], about as long as the
// convolution that wrote it), so the CNN's first convolution ran its slower AVX2 kernel into
// nChw8c instead. This copy lets it keep oneDNN's AVX-512 kernel.
#include <cstdint>

namespace dpv::cpu {

// dst[N, C, HW] = src in nChw16c ([N, ceil(C / 16), HW, 16], the last block's channels padded):
// an exact copy (no arithmetic), 8 channels x 8 pixels at a time transposed in AVX registers
// where the CPU has AVX2, element by element otherwise.
void nchw16c_to_nchw(const float* src, float* dst, int64_t N, int64_t C, int64_t HW);

}  // namespace dpv::cpu
