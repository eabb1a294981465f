// torch.chunk sizes against a table of sizes checked on PyTorch 1.13.
#include <gtest/gtest.h>

#include "engine/data_parallel.h"
#include "engine/error.h"

using dpv::chunk_sizes;
using V = std::vector<int64_t>;

TEST(ChunkSizes, MatchesPyTorchTable) {
  struct Row { int64_t n; int k; V expected; };
  const std::vector<Row> table = {
      {1, 2, {1}},          {1, 8, {1}},           {3, 2, {2, 1}},          {3, 4, {1, 1, 1}},
      {4, 3, {2, 2}},       {4, 4, {1, 1, 1, 1}},  {5, 2, {3, 2}},          {5, 3, {2, 2, 1}},
      {5, 4, {2, 2, 1}},    {6, 4, {2, 2, 2}},     {6, 8, V(6, 1)},         {9, 2, {5, 4}},
      {9, 4, {3, 3, 3}},    {9, 8, {2, 2, 2, 2, 1}}, {10, 3, {4, 4, 2}},    {10, 4, {3, 3, 3, 1}},
      {10, 8, {2, 2, 2, 2, 2}}, {13, 2, {7, 6}},   {13, 3, {5, 5, 3}},      {13, 4, {4, 4, 4, 1}},
      {13, 8, {2, 2, 2, 2, 2, 2, 1}}, {17, 3, {6, 6, 5}}, {17, 4, {5, 5, 5, 2}}, {17, 8, {3, 3, 3, 3, 3, 2}},
      {0, 2, {0, 0}},       {0, 4, {0, 0, 0, 0}},  {32, 1, {32}},
  };
  for (const auto& row : table) EXPECT_EQ(chunk_sizes(row.n, row.k), row.expected) << "N=" << row.n << " k=" << row.k;
}

TEST(ChunkSizes, NeverBalancedAndIdleDevicesAreTheLastOnes) {
  for (int64_t n = 1; n <= 40; ++n)
    for (int k = 1; k <= 8; ++k) {
      V sizes = chunk_sizes(n, k);
      int64_t total = 0;
      for (auto s : sizes) total += s;
      EXPECT_EQ(total, n);
      EXPECT_LE(static_cast<int>(sizes.size()), k);
      for (size_t i = 0; i + 1 < sizes.size(); ++i) EXPECT_EQ(sizes[i], (n + k - 1) / k);
    }
}

TEST(ChunkSizes, RejectsZeroChunks) { EXPECT_THROW(chunk_sizes(4, 0), dpv::Error); }
