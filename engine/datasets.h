#pragma once
// Built-in data sets generated from a seed, so `dpv train` and the app need no downloads.
#include <cstdint>
#include <string>

#include "engine/tensor.h"

namespace dpv {

struct Dataset {
  Tensor inputs;   // [N, ...] float32 or float64
  Tensor targets;  // [N] int64
  int classes = 0;
  std::string name;
};

// Two-dimensional spiral: `classes` interleaved arms, `n` points in all, with noise.
Dataset make_spiral(int64_t n, int classes, uint64_t seed, DType dtype = DType::Float32);
// Gaussian blobs in `features` dimensions.
Dataset make_blobs(int64_t n, int classes, int64_t features, uint64_t seed, DType dtype = DType::Float32);
// Random images [n, c, h, w] with class-dependent means (for the CNN preset).
Dataset make_images(int64_t n, int classes, int64_t c, int64_t h, int64_t w, uint64_t seed, DType dtype = DType::Float32);
// Rows [begin, begin+count) as a host batch (copies).
Dataset take_batch(const Dataset& data, int64_t begin, int64_t count);
// The same rows sorted by class, so per-device chunks see different classes (the BatchNorm lab's "skewed" option).
Dataset sort_by_class(const Dataset& data);

// Deterministic generator shared by data sets and initialisation (splitmix64 / xoshiro-style).
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  double uniform();                  // [0, 1)
  double uniform(double lo, double hi);
  double normal();                   // standard normal (Box-Muller)
  int64_t randint(int64_t n);        // [0, n)

 private:
  uint64_t s_[4];
};

}  // namespace dpv
