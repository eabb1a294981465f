// compute_bucket_assignment_by_size and DDP's two layouts (one bucket, then the rebuild).
#include <gtest/gtest.h>

#include "engine/ddp/buckets.h"

using namespace dpv;

namespace {
// Linear(4,300)-BN(300)-ReLU-Linear(300,1000)-ReLU-Linear(1000,2), float32, registration order.
std::vector<BucketParam> reference_mlp() {
  return {{1200, DType::Float32}, {300, DType::Float32}, {300, DType::Float32},  {300, DType::Float32},
          {300000, DType::Float32}, {1000, DType::Float32}, {2000, DType::Float32}, {2, DType::Float32}};
}
}  // namespace

TEST(DdpBuckets, ReferenceExampleRebuildsIntoTwoBuckets) {
  const auto params = reference_mlp();
  const std::vector<size_t> ready{7, 6, 5, 4, 2, 3, 1, 0};
  const BucketAssignment a = rebuilt_buckets(params, ready, 1.0);
  ASSERT_EQ(a.buckets.size(), 2u);
  EXPECT_EQ(a.buckets[0], (std::vector<size_t>{7, 6, 5, 4}));
  EXPECT_EQ(a.buckets[1], (std::vector<size_t>{2, 3, 1, 0}));
  EXPECT_EQ(bucket_bytes(params, a.buckets[0]), 1212008u);
  EXPECT_EQ(bucket_bytes(params, a.buckets[1]), 8400u);
  EXPECT_EQ(a.size_limits, (std::vector<size_t>{1048576, 1048576}));
}

TEST(DdpBuckets, FirstIterationHasOneBucketInRegistrationOrder) {
  const BucketAssignment a = initial_buckets(reference_mlp());
  ASSERT_EQ(a.buckets.size(), 1u);
  EXPECT_EQ(a.buckets[0], (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(DdpBuckets, LimitsAdvanceAndTheLastOneRepeats) {
  // Six 400 KiB float32 parameters, limits [1 MiB, 2 MiB]: 3 params cross 1 MiB, then 2 MiB needs 6.
  std::vector<BucketParam> params(8, {102400, DType::Float32});
  const auto a = compute_bucket_assignment_by_size(params, {1048576, 2 * 1048576}, {7, 6, 5, 4, 3, 2, 1, 0});
  ASSERT_EQ(a.buckets.size(), 2u);
  EXPECT_EQ(a.buckets[0], (std::vector<size_t>{7, 6, 5}));
  EXPECT_EQ(a.buckets[1], (std::vector<size_t>{4, 3, 2, 1, 0}));
  EXPECT_EQ(a.size_limits, (std::vector<size_t>{1048576, 2 * 1048576}));
  const auto b = compute_bucket_assignment_by_size(std::vector<BucketParam>(12, {102400, DType::Float32}),
                                                   {1048576, 1048576});
  ASSERT_EQ(b.buckets.size(), 4u);
  EXPECT_EQ(b.buckets[3], (std::vector<size_t>{9, 10, 11}));
}

TEST(DdpBuckets, DtypesNeverShareABucketAndUnorderedBucketsSortBySmallestIndex) {
  const std::vector<BucketParam> params{{10, DType::Float64}, {10, DType::Float32}, {10, DType::Float64}};
  const auto a = compute_bucket_assignment_by_size(params, {1000});
  ASSERT_EQ(a.buckets.size(), 2u);
  EXPECT_EQ(a.buckets[0], (std::vector<size_t>{0, 2}));
  EXPECT_EQ(a.buckets[1], (std::vector<size_t>{1}));
}

TEST(DdpBuckets, BucketCapIsInMebibytes) {
  EXPECT_EQ(bucket_bytes_cap(25), 26214400u);
  EXPECT_EQ(bucket_bytes_cap(0.5), 524288u);
}
