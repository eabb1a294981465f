// engine/float16.h: c10's float <-> float16 conversions, over every one of the 65536 patterns.
#include "engine/float16.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include <gtest/gtest.h>

namespace dpv {
namespace {

TEST(Float16, EveryPatternRoundTripsThroughFloat) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    const uint16_t half = static_cast<uint16_t>(h);
    const float f = float_from_float16_bits(half);
    const bool nan = (half & 0x7C00) == 0x7C00 && (half & 0x3FF) != 0;
    ASSERT_EQ(std::isnan(f), nan) << std::hex << h;
    ASSERT_EQ(std::signbit(f), (half & 0x8000) != 0) << std::hex << h;
    if (!nan) ASSERT_EQ(float16_bits_from_float(f), half) << std::hex << h;  // exact both ways
  }
}

TEST(Float16, KnownValues) {
  EXPECT_EQ(float16_bits_from_float(1.0f), 0x3C00);
  EXPECT_EQ(float16_bits_from_float(-2.0f), 0xC000);
  EXPECT_EQ(float16_bits_from_float(65504.0f), 0x7BFF);                      // the largest half
  EXPECT_EQ(float16_bits_from_float(65520.0f), 0x7C00);                      // a tie past it: infinity
  EXPECT_EQ(float16_bits_from_float(0x1.0p-24f), 0x0001);                    // the smallest subnormal
  EXPECT_EQ(float16_bits_from_float(1.0f + 0x1.0p-11f), 0x3C00);             // a tie goes to even
  EXPECT_EQ(float16_bits_from_float(std::bit_cast<float>(0xFFC00000u)), 0xFE00);  // c10's NaN keeps the sign
  EXPECT_EQ(std::bit_cast<uint32_t>(float_from_float16_bits(0x7E00)), 0x7FC00000u);
  EXPECT_EQ(float_from_float16_bits(0x0001), 0x1.0p-24f);
  EXPECT_EQ(float_from_float16_bits(0x3555), 0x1.554p-2f);
}

}  // namespace
}  // namespace dpv
