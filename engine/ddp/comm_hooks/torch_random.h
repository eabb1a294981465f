#pragma once
// The random numbers PowerSGD draws, bit for bit as PyTorch 1.13 and NumPy make them on a CPU:
//  - PowerSGDState.rng = np.random.RandomState(random_seed); each fresh Q takes the seed
//    rng.randint(1_000_000_000) (NumPy's legacy MT19937, masked rejection sampling);
//  - torch.manual_seed(that) seeds the CPU generator (mt19937), and torch.randn(*q.shape) fills Q.
// torch.randn on a float32 CPU tensor (aten/src/ATen/native/cpu/DistributionKernels.cpp):
//  - 16 or more elements: every element first takes a uniform float (24 random bits of one draw),
//    then each block of 16 turns into normals by Box-Muller, 8 pairs (data[j], data[j + 8]), with
//    the AVX2 build's avx_mathfun.h log256_ps / sincos256_ps (Cephes polynomials; ATen's CPU
//    capability on an AVX2 or AVX-512 machine). A size that is not a multiple of 16 draws 16
//    fresh uniforms for the LAST 16 elements and transforms them again;
//  - fewer: one double normal per element (two 53-bit uniforms, Box-Muller in double, libm), the
//    sine half kept in the generator for the next element (at::normal_distribution<double>).
#include <cstdint>
#include <random>
#include <vector>

namespace dpv {

// np.random.RandomState(seed).randint(high) for 0 < high <= 2**32: the next value of a
// RandomState whose state is `engine` (legacy seeding is std::mt19937's).
int64_t numpy_legacy_randint(std::mt19937& engine, int64_t high);

// torch's default CPU generator after torch.manual_seed(seed), for float32 randn.
class TorchCpuGenerator {
 public:
  explicit TorchCpuGenerator(uint64_t seed);
  // torch.randn(count, dtype=torch.float32) (any shape with `count` elements, row-major).
  std::vector<float> randn_float(int64_t count);

 private:
  float uniform_float();    // at::uniform_real_distribution<float>(0, 1)
  double uniform_double();  // at::uniform_real_distribution<double>(0, 1)
  double normal_double();   // at::normal_distribution<double>(0, 1), with the cached second value

  std::mt19937 engine_;
  bool has_next_double_normal_ = false;
  double next_double_normal_ = 0;
};

// avx_mathfun.h's log256_ps and sincos256_ps on one lane (for the tests).
float avx_mathfun_log(float x);
void avx_mathfun_sincos(float x, float& sine, float& cosine);

}  // namespace dpv
