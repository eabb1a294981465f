#include "engine/float16.h"

#include <bit>
#include <cmath>

namespace dpv {

uint16_t float16_bits_from_float(float x) {
  // c10/util/Half.h fp16_ieee_from_fp32_value, word for word: the scalings round the mantissa in
  // float32 hardware, so the bits follow the FPU's round-to-nearest-even.
  const float scale_to_inf = 0x1.0p+112f, scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(x) * scale_to_inf) * scale_to_zero;
  const uint32_t w = std::bit_cast<uint32_t>(x);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  return static_cast<uint16_t>((sign >> 16) |
                               (shl1_w > 0xFF000000u ? 0x7E00u : ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu)));
}

float float_from_float16_bits(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1Fu, mantissa = half & 0x3FFu;
  if (exponent == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));  // inf, NaN
  // Normal: mantissa | 0x400 times 2^(exponent - 25); subnormal: mantissa times 2^-24. Both exact.
  const float magnitude = exponent == 0 ? std::ldexp(static_cast<float>(mantissa), -24)
                                        : std::ldexp(static_cast<float>(mantissa | 0x400u), static_cast<int>(exponent) - 25);
  return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
}

}  // namespace dpv
