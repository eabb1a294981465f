// Seeded generator and built-in data sets: determinism, shapes, class balance, shuffling, batches.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "engine/datasets.h"
#include "engine/error.h"

using dpv::DType;
using dpv::Rng;

namespace {

std::map<int64_t, int64_t> class_counts(const dpv::Dataset& d) {
  std::map<int64_t, int64_t> counts;
  for (int64_t t : d.targets.to_int64()) ++counts[t];
  return counts;
}

}  // namespace

TEST(RngTest, SameSeedSameSequenceDifferentSeedDifferent) {
  Rng a(7), b(7), c(8);
  std::vector<uint64_t> xa, xb, xc;
  for (int i = 0; i < 16; ++i) {
    xa.push_back(a.next_u64());
    xb.push_back(b.next_u64());
    xc.push_back(c.next_u64());
  }
  EXPECT_EQ(xa, xb);
  EXPECT_NE(xa, xc);
  // Seed 0 must not collapse to an all-zero state (splitmix64 seeding).
  Rng zero(0);
  EXPECT_NE(zero.next_u64() | zero.next_u64(), 0u);
}

TEST(RngTest, UniformNormalAndRandintHaveTheRightDistribution) {
  Rng rng(123);
  const int n = 200000;
  double sum = 0, sum_sq = 0, usum = 0;
  std::vector<int> buckets(5, 0);
  for (int i = 0; i < n; ++i) {
    const double u = rng.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    usum += u;
    const double z = rng.normal();
    ASSERT_TRUE(std::isfinite(z));
    sum += z;
    sum_sq += z * z;
    const int64_t k = rng.randint(5);
    ASSERT_GE(k, 0);
    ASSERT_LT(k, 5);
    ++buckets[k];
  }
  EXPECT_NEAR(usum / n, 0.5, 0.01);
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / n, 1.0, 0.02);
  for (int count : buckets) EXPECT_NEAR(count, n / 5, n / 50);
  const double v = rng.uniform(-3.0, -1.0);
  EXPECT_GE(v, -3.0);
  EXPECT_LT(v, -1.0);
  EXPECT_THROW(rng.randint(0), dpv::Error);
}

TEST(DatasetsTest, SpiralIsDeterministicPerSeed) {
  const auto a = dpv::make_spiral(300, 3, 42);
  const auto b = dpv::make_spiral(300, 3, 42);
  const auto c = dpv::make_spiral(300, 3, 43);
  EXPECT_EQ(a.inputs.to_doubles(), b.inputs.to_doubles());
  EXPECT_EQ(a.targets.to_int64(), b.targets.to_int64());
  EXPECT_NE(a.inputs.to_doubles(), c.inputs.to_doubles());
}

TEST(DatasetsTest, SpiralShapesBalanceAndRadius) {
  const auto d = dpv::make_spiral(100, 3, 1, DType::Float64);
  EXPECT_EQ(d.inputs.shape(), (dpv::Shape{100, 2}));
  EXPECT_EQ(d.inputs.dtype(), DType::Float64);
  EXPECT_EQ(d.targets.shape(), (dpv::Shape{100}));
  EXPECT_EQ(d.targets.dtype(), DType::Int64);
  EXPECT_EQ(d.classes, 3);
  EXPECT_EQ(class_counts(d), (std::map<int64_t, int64_t>{{0, 34}, {1, 33}, {2, 33}}));
  // Noise moves the angle only, so every point lies in the unit disc, and radii spread from 0 to 1.
  const auto x = d.inputs.to_doubles();
  double max_r = 0, min_r = 1;
  for (int i = 0; i < 100; ++i) {
    const double r = std::hypot(x[2 * i], x[2 * i + 1]);
    max_r = std::max(max_r, r);
    min_r = std::min(min_r, r);
  }
  EXPECT_LE(max_r, 1.0 + 1e-12);
  EXPECT_NEAR(max_r, 1.0, 1e-9);
  EXPECT_NEAR(min_r, 0.0, 1e-9);
}

TEST(DatasetsTest, SpiralIsShuffledSoBatchesMixClasses) {
  const auto d = dpv::make_spiral(300, 3, 5);
  const auto t = d.targets.to_int64();
  EXPECT_FALSE(std::is_sorted(t.begin(), t.end()));
  // The first batch of 32 holds every class.
  const std::vector<int64_t> first(t.begin(), t.begin() + 32);
  for (int64_t c = 0; c < 3; ++c) EXPECT_NE(std::count(first.begin(), first.end(), c), 0) << c;
}

TEST(DatasetsTest, RejectsImpossibleRequests) {
  EXPECT_THROW(dpv::make_spiral(2, 3, 0), dpv::Error);
  EXPECT_THROW(dpv::make_spiral(10, 0, 0), dpv::Error);
  EXPECT_THROW(dpv::make_spiral(10, 2, 0, DType::Int64), dpv::Error);
  EXPECT_THROW(dpv::make_blobs(10, 2, 0, 0), dpv::Error);
  EXPECT_THROW(dpv::make_images(10, 2, 3, 0, 4, 0), dpv::Error);
}

TEST(DatasetsTest, BlobsClustersAroundDistinctCentres) {
  const auto d = dpv::make_blobs(400, 4, 3, 9);
  EXPECT_EQ(d.inputs.shape(), (dpv::Shape{400, 3}));
  EXPECT_EQ(class_counts(d), (std::map<int64_t, int64_t>{{0, 100}, {1, 100}, {2, 100}, {3, 100}}));
  // Class means differ, and points scatter around them with unit spread.
  const auto x = d.inputs.to_doubles();
  const auto t = d.targets.to_int64();
  std::vector<double> mean(12, 0), sq(12, 0);
  for (int i = 0; i < 400; ++i)
    for (int f = 0; f < 3; ++f) mean[t[i] * 3 + f] += x[i * 3 + f] / 100;
  for (int i = 0; i < 400; ++i)
    for (int f = 0; f < 3; ++f) sq[t[i] * 3 + f] += std::pow(x[i * 3 + f] - mean[t[i] * 3 + f], 2) / 100;
  double pooled = 0;
  for (double v : sq) pooled += v / 12;
  EXPECT_NEAR(pooled, 1.0, 0.15);
  EXPECT_NE(mean[0], mean[3]);
  EXPECT_EQ(d.inputs.to_doubles(), dpv::make_blobs(400, 4, 3, 9).inputs.to_doubles());
}

TEST(DatasetsTest, ImagesHaveClassDependentMeans) {
  const auto d = dpv::make_images(200, 4, 3, 8, 8, 11);
  EXPECT_EQ(d.inputs.shape(), (dpv::Shape{200, 3, 8, 8}));
  EXPECT_EQ(class_counts(d).size(), 4u);
  const auto x = d.inputs.to_doubles();
  const auto t = d.targets.to_int64();
  const int pixels = 3 * 8 * 8;
  // Average image per class: classes differ by much more than the noise left after averaging.
  std::vector<std::vector<double>> avg(4, std::vector<double>(pixels, 0));
  for (int i = 0; i < 200; ++i)
    for (int p = 0; p < pixels; ++p) avg[t[i]][p] += x[i * pixels + p] / 50;
  for (int a = 0; a < 4; ++a)
    for (int b = a + 1; b < 4; ++b) {
      double dist = 0;
      for (int p = 0; p < pixels; ++p) dist += std::pow(avg[a][p] - avg[b][p], 2);
      EXPECT_GT(std::sqrt(dist / pixels), 0.2) << a << " vs " << b;
    }
}

TEST(DatasetsTest, TakeBatchCopiesRows) {
  auto d = dpv::make_spiral(30, 3, 2);
  const auto batch = dpv::take_batch(d, 10, 5);
  EXPECT_EQ(batch.inputs.shape(), (dpv::Shape{5, 2}));
  EXPECT_EQ(batch.classes, 3);
  const auto all = d.inputs.to_doubles();
  EXPECT_EQ(batch.inputs.to_doubles(), std::vector<double>(all.begin() + 20, all.begin() + 30));
  const auto targets = d.targets.to_int64();
  EXPECT_EQ(batch.targets.to_int64(), std::vector<int64_t>(targets.begin() + 10, targets.begin() + 15));
  EXPECT_FALSE(batch.inputs.shares_storage_with(d.inputs));
  d.inputs.data<float>()[20] = 1234.0f;
  EXPECT_NE(batch.inputs.to_doubles()[0], 1234.0);
  EXPECT_THROW(dpv::take_batch(d, 28, 5), dpv::Error);
  EXPECT_THROW(dpv::take_batch(d, -1, 2), dpv::Error);
  EXPECT_EQ(dpv::take_batch(d, 30, 0).inputs.dim(0), 0);
}

TEST(DatasetsTest, SortByClassIsStableAndMovesRowsWithLabels) {
  const auto d = dpv::make_blobs(60, 3, 2, 4);
  const auto sorted = dpv::sort_by_class(d);
  const auto t = d.targets.to_int64();
  const auto x = d.inputs.to_doubles();
  // The expected order: indices of class 0 in original order, then class 1, then class 2.
  std::vector<double> expected_x;
  std::vector<int64_t> expected_t;
  for (int64_t c = 0; c < 3; ++c)
    for (size_t i = 0; i < t.size(); ++i)
      if (t[i] == c) {
        expected_t.push_back(c);
        expected_x.push_back(x[2 * i]);
        expected_x.push_back(x[2 * i + 1]);
      }
  EXPECT_EQ(sorted.targets.to_int64(), expected_t);
  EXPECT_EQ(sorted.inputs.to_doubles(), expected_x);
  EXPECT_EQ(sorted.inputs.shape(), d.inputs.shape());
  EXPECT_EQ(sorted.classes, 3);
}
