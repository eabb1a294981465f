#include "engine/datasets.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>
#include <numeric>

#include "engine/error.h"
#include "engine/index.h"

namespace dpv {

// --- Rng: xoshiro256** (Blackman and Vigna), its state filled by splitmix64 as the authors advise.

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(uint64_t seed) {
  uint64_t state = seed;
  for (uint64_t& word : s_) word = splitmix64(state);
}

uint64_t Rng::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

double Rng::normal() {
  // Box-Muller; 1 - uniform() lies in (0, 1], so the logarithm is finite. The second value of the
  // pair is dropped: the generator keeps no state beyond its four words.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

int64_t Rng::randint(int64_t n) {
  check(n > 0, "randint needs a positive range, got " + std::to_string(n), ErrorClass::ValueError);
  // Rejection sampling keeps every value equally likely.
  const uint64_t range = static_cast<uint64_t>(n);
  const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
  uint64_t x = next_u64();
  while (x >= limit) x = next_u64();
  return static_cast<int64_t>(x % range);
}

// --- Data sets

namespace {

void check_counts(const char* what, int64_t n, int classes) {
  check(classes >= 1, std::string(what) + ": classes must be at least 1, got " + std::to_string(classes), ErrorClass::ValueError);
  check(n >= classes, std::string(what) + ": " + std::to_string(n) + " samples cannot cover " +
                          std::to_string(classes) + " classes", ErrorClass::ValueError);
}

// Samples of each class: n spread as evenly as possible, the first n % classes classes get one more.
int64_t class_count(int64_t n, int classes, int c) { return n / classes + (c < n % classes ? 1 : 0); }

// Rows and labels in class order, shuffled together so every batch mixes classes.
Dataset shuffled(std::vector<double> rows, std::vector<int64_t> labels, Shape sample_shape, int classes,
                 std::string name, DType dtype, Rng& rng) {
  const int64_t n = static_cast<int64_t>(labels.size());
  const int64_t width = shape_numel(sample_shape);
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    const int64_t j = rng.randint(i + 1);
    if (i == j) continue;
    std::swap(labels[i], labels[j]);
    std::swap_ranges(rows.begin() + i * width, rows.begin() + (i + 1) * width, rows.begin() + j * width);
  }
  Shape shape{n};
  shape.insert(shape.end(), sample_shape.begin(), sample_shape.end());
  Dataset d;
  d.inputs = Tensor::from_doubles(shape, dtype, rows);
  d.targets = Tensor::from_int64({n}, labels);
  d.classes = classes;
  d.name = std::move(name);
  return d;
}

double linspace(double lo, double hi, int64_t count, int64_t i) {
  return count <= 1 ? lo : lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(count - 1);
}

void check_float(const char* what, DType dtype) {
  check(dtype == DType::Float32 || dtype == DType::Float64,
        std::string(what) + ": inputs must be float32 or float64, not " + dtype_name(dtype), ErrorClass::TypeError);
}

// Host copies of a data set's tensors (data sets may have been moved to a device).
Tensor host_copy(const Tensor& t) { return t.device() == nullptr ? t.clone() : t.to(nullptr); }

}  // namespace

Dataset make_spiral(int64_t n, int classes, uint64_t seed, DType dtype) {
  check_counts("make_spiral", n, classes);
  check_float("make_spiral", dtype);
  Rng rng(seed);
  std::vector<double> rows;  // [n, 2]
  std::vector<int64_t> labels;
  rows.reserve(ix(n) * 2);
  for (int c = 0; c < classes; ++c) {
    // The CS231n spiral: radius grows from 0 to 1 while the angle sweeps 4 radians per class.
    const int64_t m = class_count(n, classes, c);
    for (int64_t i = 0; i < m; ++i) {
      const double r = linspace(0.0, 1.0, m, i);
      const double t = linspace(c * 4.0, (c + 1) * 4.0, m, i) + 0.2 * rng.normal();
      rows.push_back(r * std::sin(t));
      rows.push_back(r * std::cos(t));
      labels.push_back(c);
    }
  }
  return shuffled(std::move(rows), std::move(labels), {2}, classes, "spiral", dtype, rng);
}

Dataset make_blobs(int64_t n, int classes, int64_t features, uint64_t seed, DType dtype) {
  check_counts("make_blobs", n, classes);
  check_float("make_blobs", dtype);
  check(features >= 1, "make_blobs: features must be at least 1, got " + std::to_string(features), ErrorClass::ValueError);
  Rng rng(seed);
  // Centres drawn from a box, as scikit-learn's make_blobs does; unit spread around each.
  std::vector<double> centres(ix(classes * features));  // [classes, features]
  for (double& v : centres) v = rng.uniform(-5.0, 5.0);
  std::vector<double> rows;  // [n, features]
  std::vector<int64_t> labels;
  rows.reserve(ix(n * features));
  for (int c = 0; c < classes; ++c) {
    const int64_t m = class_count(n, classes, c);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t f = 0; f < features; ++f) rows.push_back(centres[c * features + f] + rng.normal());
      labels.push_back(c);
    }
  }
  return shuffled(std::move(rows), std::move(labels), {features}, classes, "blobs", dtype, rng);
}

Dataset make_images(int64_t n, int classes, int64_t c, int64_t h, int64_t w, uint64_t seed, DType dtype) {
  check_counts("make_images", n, classes);
  check_float("make_images", dtype);
  check(c >= 1 && h >= 1 && w >= 1, "make_images: channels, height and width must be positive, got [" +
                                        std::to_string(c) + ", " + std::to_string(h) + ", " + std::to_string(w) + "]",
        ErrorClass::ValueError);
  Rng rng(seed);
  // Each class: a per-channel mean and stripes at its own angle, so both a linear model (means)
  // and convolutions (orientation) find something to learn.
  const int64_t pixels = c * h * w;
  std::vector<double> templates(ix(classes * pixels));  // [classes, c, h, w]
  const double period = std::max<double>(4.0, static_cast<double>(std::max(h, w)) / 3.0);
  for (int k = 0; k < classes; ++k) {
    const double angle = std::numbers::pi * k / classes;
    for (int64_t ch = 0; ch < c; ++ch) {
      const double mean = 0.5 * std::cos(2.0 * std::numbers::pi * (k + 0.37 * ch) / classes);
      const double phase = 2.0 * std::numbers::pi * ch / static_cast<double>(c);
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) {
          const double along = std::cos(angle) * x + std::sin(angle) * y;
          templates[((k * c + ch) * h + y) * w + x] =
              mean + 0.5 * std::sin(2.0 * std::numbers::pi * along / period + phase);
        }
    }
  }
  std::vector<double> rows;  // [n, c, h, w]
  std::vector<int64_t> labels;
  rows.reserve(ix(n * pixels));
  for (int k = 0; k < classes; ++k) {
    const int64_t m = class_count(n, classes, k);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < pixels; ++p) rows.push_back(templates[k * pixels + p] + 0.5 * rng.normal());
      labels.push_back(k);
    }
  }
  return shuffled(std::move(rows), std::move(labels), {c, h, w}, classes, "images", dtype, rng);
}

Dataset take_batch(const Dataset& data, int64_t begin, int64_t count) {
  check(data.inputs.defined() && data.targets.defined(), "take_batch: the data set is empty", ErrorClass::ValueError);
  const int64_t n = data.inputs.dim(0);
  check(begin >= 0 && count >= 0 && begin <= n && count <= n - begin,
        "take_batch: rows [" + std::to_string(begin) + ", " + std::to_string(begin + count) + ") are outside the " +
            std::to_string(n) + " rows of " + (data.name.empty() ? std::string("the data set") : data.name),
        ErrorClass::IndexError);
  Dataset out;
  out.inputs = host_copy(data.inputs.slice0(begin, begin + count));
  out.targets = host_copy(data.targets.slice0(begin, begin + count));
  out.classes = data.classes;
  out.name = data.name;
  return out;
}

Dataset sort_by_class(const Dataset& data) {
  check(data.inputs.defined() && data.targets.defined(), "sort_by_class: the data set is empty", ErrorClass::ValueError);
  const std::vector<int64_t> labels = data.targets.to_int64();
  const int64_t n = static_cast<int64_t>(labels.size());
  check(data.inputs.ndim() >= 1 && data.inputs.dim(0) == n,
        "sort_by_class: " + std::to_string(data.inputs.ndim() >= 1 ? data.inputs.dim(0) : 0) + " inputs but " +
            std::to_string(n) + " targets",
        ErrorClass::ValueError);
  std::vector<int64_t> order(ix(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return labels[a] < labels[b]; });

  const Tensor inputs = data.inputs.device() == nullptr ? data.inputs : data.inputs.to(nullptr);
  Tensor sorted_inputs = Tensor::empty(inputs.shape(), inputs.dtype());
  const size_t row_bytes = n > 0 ? inputs.nbytes() / ix(n) : 0;
  std::vector<int64_t> sorted_labels(ix(n));
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(static_cast<char*>(sorted_inputs.raw()) + i * row_bytes,
                static_cast<const char*>(inputs.raw()) + order[i] * row_bytes, row_bytes);
    sorted_labels[i] = labels[order[i]];
  }
  Dataset out;
  out.inputs = std::move(sorted_inputs);
  out.targets = Tensor::from_int64({n}, sorted_labels);
  out.classes = data.classes;
  out.name = data.name;
  return out;
}

}  // namespace dpv
