// nchw16c_to_nchw (engine/cpu/blocked_layout.h) against the layout's definition, element by
// element: whole and partial blocks of channels, pixel counts with and without a tail of fewer
// than 8, and the padding channels never read into the output.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "engine/cpu/blocked_layout.h"

namespace dpv::cpu {
namespace {

struct Case {
  int64_t N, C, HW;
};

TEST(BlockedLayout, Nchw16cToNchwMatchesTheLayoutsDefinition) {
  for (const Case c : {Case{2, 8, 1024}, Case{1, 16, 64}, Case{3, 3, 7}, Case{2, 19, 13}, Case{1, 40, 9},
                       Case{4, 8, 1}, Case{2, 24, 16}}) {
    SCOPED_TRACE(testing::Message() << "N" << c.N << " C" << c.C << " HW" << c.HW);
    const int64_t blocks = (c.C + 15) / 16;
    // Every element's value encodes where it sits; padding channels hold NaN, which must not show.
    std::vector<float> src(static_cast<size_t>(c.N * blocks * c.HW * 16));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t p = 0; p < c.HW; ++p)
          for (int64_t i = 0; i < 16; ++i) {
            const int64_t ch = b * 16 + i;
            src[static_cast<size_t>(((n * blocks + b) * c.HW + p) * 16 + i)] =
                ch < c.C ? static_cast<float>((n * c.C + ch) * c.HW + p) : std::numeric_limits<float>::quiet_NaN();
          }
    std::vector<float> dst(static_cast<size_t>(c.N * c.C * c.HW), -1.0f);
    nchw16c_to_nchw(src.data(), dst.data(), c.N, c.C, c.HW);
    for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], static_cast<float>(i)) << "element " << i;
  }
}

}  // namespace
}  // namespace dpv::cpu
