// NumPy's legacy randint and torch's CPU randn for float32 (see torch_random.h).
#include "engine/ddp/comm_hooks/torch_random.h"

#include <bit>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace dpv {

int64_t numpy_legacy_randint(std::mt19937& engine, int64_t high) {
  check(high > 0 && high <= (int64_t{1} << 32), "randint: high must be in 1 .. 2**32", ErrorClass::ValueError);
  const uint32_t range = static_cast<uint32_t>(high - 1);
  if (range == 0) return 0;
  // buffered_bounded_masked_uint32: the smallest all-ones mask covering the range, rejection.
  uint32_t mask = range;
  for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
  uint32_t value = 0;
  do value = static_cast<uint32_t>(engine()) & mask;
  while (value > range);
  return value;
}

TorchCpuGenerator::TorchCpuGenerator(uint64_t seed) : engine_(static_cast<uint32_t>(seed & 0xffffffffu)) {}

float TorchCpuGenerator::uniform_float() {
  const uint32_t bits = static_cast<uint32_t>(engine_()) & ((1u << 24) - 1);
  return static_cast<float>(bits) * (1.0f / static_cast<float>(1u << 24));
}

double TorchCpuGenerator::uniform_double() {
  // random64(): the first draw is the high word.
  const uint64_t hi = static_cast<uint32_t>(engine_());
  const uint64_t lo = static_cast<uint32_t>(engine_());
  const uint64_t bits = ((hi << 32) | lo) & ((uint64_t{1} << 53) - 1);
  return static_cast<double>(bits) * (1.0 / static_cast<double>(uint64_t{1} << 53));
}

double TorchCpuGenerator::normal_double() {
  if (has_next_double_normal_) {
    has_next_double_normal_ = false;
    return next_double_normal_;
  }
  const double u1 = uniform_double();
  const double u2 = uniform_double();
  const double r = std::sqrt(-2.0 * std::log(1.0 - u2));
  const double theta = 2.0 * std::numbers::pi * u1;
  next_double_normal_ = r * std::sin(theta);
  has_next_double_normal_ = true;
  return r * std::cos(theta);
}

namespace {

// avx_mathfun.h (Julien Pommier's Cephes port that ATen's AVX2 build uses), one lane. ATen's AVX2
// kernels are compiled with -mfma and GCC contracts each multiply feeding an add into one FMA, so
// those steps are fmaf here (checked bit for bit against torch.randn); every other step is a
// separate float operation, as the intrinsics are.
constexpr float kSqrtHalf = 0.707106781186547524f;
constexpr float kLogP[9] = {7.0376836292E-2f,  -1.1514610310E-1f, 1.1676998740E-1f,
                            -1.2420140846E-1f, +1.4249322787E-1f, -1.6668057665E-1f,
                            +2.0000714765E-1f, -2.4999993993E-1f, +3.3333331174E-1f};
constexpr float kLogQ1 = -2.12194440e-4f, kLogQ2 = 0.693359375f;
constexpr float kMinNormPos = 1.17549435e-38f;

// Stops this compiler from fusing a product into a later add where ATen's build does not.
inline float rounded(float x) {
  volatile float v = x;
  return v;
}

}  // namespace

float avx_mathfun_log(float x) {
  const bool invalid = !(x > 0.0f);
  x = std::fmax(x, kMinNormPos);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f);
  x = std::bit_cast<float>((bits & ~0x7f800000u) | std::bit_cast<uint32_t>(0.5f));
  e = e + 1.0f;
  const bool below = x < kSqrtHalf;
  const float tmp0 = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + tmp0;
  const float z = rounded(x * x);
  float y = kLogP[0];
  for (int i = 1; i < 9; ++i) y = std::fma(y, x, kLogP[i]);
  y = rounded(y * x);
  y = rounded(y * z);
  y = std::fma(e, kLogQ1, y);
  y = std::fma(-z, 0.5f, y);
  x = x + y;
  x = std::fma(e, kLogQ2, x);
  return invalid ? std::bit_cast<float>(0xffffffffu) : x;  // or-ed with an all-ones mask: NaN
}

void avx_mathfun_sincos(float x, float& sine, float& cosine) {
  uint32_t sign_sin = std::bit_cast<uint32_t>(x) & 0x80000000u;
  x = std::fabs(x);
  const float scaled = rounded(x * 1.27323954473516f);  // 4 / pi
  int32_t j = static_cast<int32_t>(scaled);             // truncation (cvttps)
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(j & 4) << 29;
  const bool first_poly_for_cos = (j & 2) == 0;  // poly_mask
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const uint32_t sign_cos = static_cast<uint32_t>(~(j - 2) & 4) << 29;
  sign_sin ^= swap_sign_sin;
  const float z = rounded(x * x);
  float c = 2.443315711809948E-005f;
  c = std::fma(c, z, -1.388731625493765E-003f);
  c = std::fma(c, z, 4.166664568298827E-002f);
  c = rounded(c * z);
  c = rounded(c * z);
  c = std::fma(-z, 0.5f, c);
  c = c + 1.0f;
  float s = -1.9515295891E-4f;
  s = std::fma(s, z, 8.3321608736E-3f);
  s = std::fma(s, z, -1.6666654611E-1f);
  s = rounded(s * z);
  s = std::fma(s, x, x);
  // (mask & a) + (~mask & b): the selected one plus +0.
  const float sin_value = first_poly_for_cos ? 0.0f + s : c + 0.0f;
  const float cos_value = first_poly_for_cos ? c - 0.0f + 0.0f : s + 0.0f;
  sine = std::bit_cast<float>(std::bit_cast<uint32_t>(sin_value) ^ sign_sin);
  cosine = std::bit_cast<float>(std::bit_cast<uint32_t>(cos_value) ^ sign_cos);
}

std::vector<float> TorchCpuGenerator::randn_float(int64_t count) {
  check(count >= 0, "randn: negative size", ErrorClass::ValueError);
  std::vector<float> data(static_cast<size_t>(count));
  if (count < 16) {
    for (float& v : data) v = static_cast<float>(normal_double());
    return data;
  }
  for (float& v : data) v = uniform_float();
  const float two_pi = static_cast<float>(2.0 * std::numbers::pi);
  auto fill16 = [two_pi](float* d) {  // normal_fill_16_AVX2 with mean 0, std 1
    for (int j = 0; j < 8; ++j) {
      const float u1 = 1.0f - d[j];
      const float u2 = d[j + 8];
      const float radius = std::sqrt(rounded(-2.0f * avx_mathfun_log(u1)));
      const float theta = rounded(two_pi * u2);
      float s = 0, c = 0;
      avx_mathfun_sincos(theta, s, c);
      d[j] = rounded(radius * c) * 1.0f + 0.0f;  // fmadd(n, std, mean): exact with std 1, mean 0
      d[j + 8] = rounded(radius * s) * 1.0f + 0.0f;
    }
  };
  for (int64_t i = 0; i + 16 <= count; i += 16) fill16(data.data() + i);
  if (count % 16 != 0) {
    float* last = data.data() + count - 16;
    for (int i = 0; i < 16; ++i) last[i] = uniform_float();
    fill16(last);
  }
  return data;
}

}  // namespace dpv
