// DistributedSampler: the strided, padded shards and PyTorch's seeded permutation.
#include <gtest/gtest.h>

#include "engine/ddp/sampler.h"
#include "engine/error.h"

using namespace dpv;

TEST(DdpSampler, TableForTenSamplesOnFourRanks) {
  SamplerOptions o;
  o.shuffle = false;
  const std::vector<std::vector<int64_t>> expect{{0, 4, 8}, {1, 5, 9}, {2, 6, 0}, {3, 7, 1}};
  for (int r = 0; r < 4; ++r) EXPECT_EQ(distributed_sampler_indices(10, 4, r, o), expect[static_cast<size_t>(r)]);
}

TEST(DdpSampler, DropLastTruncatesInsteadOfPadding) {
  SamplerOptions o;
  o.shuffle = false;
  o.drop_last = true;
  EXPECT_EQ(sampler_num_samples(10, 4, true), 2);
  EXPECT_EQ(distributed_sampler_indices(10, 4, 0, o), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(distributed_sampler_indices(10, 4, 3, o), (std::vector<int64_t>{3, 7}));
}

TEST(DdpSampler, PaddingRepeatsTheDataSetWhenItIsShorterThanThePadding) {
  SamplerOptions o;
  o.shuffle = false;
  // N=2, W=5: num_samples 1, total 5, indices [0, 1, 0, 1, 0].
  EXPECT_EQ(distributed_sampler_indices(2, 5, 4, o), (std::vector<int64_t>{0}));
  EXPECT_EQ(distributed_sampler_indices(2, 5, 3, o), (std::vector<int64_t>{1}));
}

TEST(DdpSampler, RandpermEqualsTorchWithAManualSeed) {
  // torch.Generator().manual_seed(s); torch.randperm(n, generator=g) with PyTorch 1.13 (CPU).
  EXPECT_EQ(torch_randperm(10, 0), (std::vector<int64_t>{4, 1, 7, 5, 3, 9, 0, 8, 6, 2}));
  EXPECT_EQ(torch_randperm(10, 5), (std::vector<int64_t>{1, 4, 9, 6, 3, 5, 0, 2, 8, 7}));
  const auto p = torch_randperm(100, 42);
  EXPECT_EQ(std::vector<int64_t>(p.begin(), p.begin() + 6), (std::vector<int64_t>{42, 96, 62, 98, 46, 95}));
  const auto q = torch_randperm(1000, 123456789);
  EXPECT_EQ(std::vector<int64_t>(q.begin(), q.begin() + 4), (std::vector<int64_t>{408, 725, 644, 144}));
}

TEST(DdpSampler, ShuffleUsesSeedPlusEpoch) {
  SamplerOptions o;
  o.seed = 3;
  o.epoch = 2;
  const auto perm = torch_randperm(10, 5);
  for (int r = 0; r < 4; ++r) {
    std::vector<int64_t> expect;
    for (int i = r; i < 12; i += 4) expect.push_back(perm[static_cast<size_t>(i % 10)]);
    EXPECT_EQ(distributed_sampler_indices(10, 4, r, o), expect);
  }
}

TEST(DdpSampler, InvalidRankIsAValueError) {
  try {
    distributed_sampler_indices(10, 4, 4, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.full(), "ValueError: Invalid rank 4, rank should be in the interval [0, 3]");
  }
}
