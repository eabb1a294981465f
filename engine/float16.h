#pragma once
// IEEE binary16 (torch.float16, c10::Half) as its 16-bit pattern. The engine has no float16 dtype:
// float16 values live only where a 16-bit collective moves them (fp16_compress_hook's bucket), so
// they are held as uint16_t bit patterns and converted with c10's own rules.
#include <cstdint>

namespace dpv {

// float32 -> the nearest float16's bits: c10/util/Half.h fp16_ieee_from_fp32_value (round to
// nearest even, overflow to infinity, a NaN becomes 0x7E00 with its sign).
uint16_t float16_bits_from_float(float x);

// float16 bits -> the float32 that value is exactly (c10's fp16_ieee_to_fp32_value: a NaN keeps its
// sign and payload, so 0x7E00 gives the float32 quiet NaN 0x7FC00000).
float float_from_float16_bits(uint16_t half);

// float32 -> the nearest float16 (c10::Half's conversion: round to nearest even, overflow to
// infinity), returned as the float32 that value is exactly.
inline float round_to_float16(float x) { return float_from_float16_bits(float16_bits_from_float(x)); }

}  // namespace dpv
