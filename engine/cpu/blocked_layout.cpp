#include "engine/cpu/blocked_layout.h"

#include <algorithm>

#if defined(__x86_64__)
#include <immintrin.h>
#define DPV_UNBLOCK_AVX2 1
#endif

namespace dpv::cpu {

namespace {

constexpr int64_t kBlock = 16;  // channels per nChw16c block

// One block ([HW, 16]) into its channels' rows (out + c * HW, c < channels), element by element.
void block_scalar(const float* in, float* out, int64_t channels, int64_t HW, int64_t from) {
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t p = from; p < HW; ++p) out[c * HW + p] = in[p * kBlock + c];
}

#if DPV_UNBLOCK_AVX2
// 8 pixels x 8 channels (rows of `in`, kBlock apart) to 8 channels x 8 pixels (rows of `out`,
// `stride` apart): the usual unpack / shuffle / lane-permute transpose.
__attribute__((target("avx2"))) inline void transpose8x8(const float* in, float* out, int64_t stride) {
  __m256 r[8], t[8], s[8];
  for (int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(in + i * kBlock);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);      // [a0 b0 a1 b1 | a4 b4 a5 b5]
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);  // [a2 b2 a3 b3 | a6 b6 a7 b7]
  }
  for (int i = 0; i < 8; i += 4) {
    s[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));          // channels 0 | 4
    s[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));      // channels 1 | 5
    s[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));  // channels 2 | 6
    s[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));  // channels 3 | 7
  }
  for (int c = 0; c < 4; ++c) {
    _mm256_storeu_ps(out + c * stride, _mm256_permute2f128_ps(s[c], s[c + 4], 0x20));
    _mm256_storeu_ps(out + (c + 4) * stride, _mm256_permute2f128_ps(s[c], s[c + 4], 0x31));
  }
}

__attribute__((target("avx2"))) void block_avx2(const float* in, float* out, int64_t channels, int64_t HW) {
  const int64_t whole = channels / 8 * 8;  // channels in whole groups of 8
  int64_t p = 0;
  for (; p + 8 <= HW; p += 8)
    for (int64_t c = 0; c < whole; c += 8) transpose8x8(in + p * kBlock + c, out + c * HW + p, HW);
  block_scalar(in, out, whole, HW, p);  // the last pixels
  block_scalar(in + whole, out + whole * HW, channels - whole, HW, 0);  // the last channels
}
#endif

}  // namespace

void nchw16c_to_nchw(const float* src, float* dst, int64_t N, int64_t C, int64_t HW) {
#if DPV_UNBLOCK_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
#endif
  const int64_t blocks = (C + kBlock - 1) / kBlock;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t b = 0; b < blocks; ++b) {
      const float* in = src + (n * blocks + b) * HW * kBlock;  // [HW, 16]
      float* out = dst + (n * C + b * kBlock) * HW;            // [channels, HW]
      const int64_t channels = std::min(kBlock, C - b * kBlock);
#if DPV_UNBLOCK_AVX2
      if (avx2) {
        block_avx2(in, out, channels, HW);
        continue;
      }
#endif
      block_scalar(in, out, channels, HW, 0);
    }
}

}  // namespace dpv::cpu
