// The Gloo group's reduce-scatter (Gloo's ReduceScatterHalvingDoubling) against its all-reduce:
// rank r gets chunk r of the sum (torch.distributed.reduce_scatter_tensor), for every dtype, sizes
// below, at and above a power of two per rank, and world sizes that are and are not powers of two
// (the algorithm's other path). The all-gather of the pieces gives back the whole sum. Ranks are
// threads of this test over 127.0.0.1 (tests/dist/gloo_ranks.h).
#include <cmath>
#include <mutex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/dist/gloo_ranks.h"

namespace dpv::dist {
namespace {

using testing::expect_no_errors;
using testing::with_ranks;

size_t ix(int64_t i) { return static_cast<size_t>(i); }

// Whole numbers, exact in every dtype and summed exactly in any order: the pieces must equal the
// all-reduce's chunks bit for bit, whatever order each algorithm adds in.
std::vector<double> whole_values(int rank, int64_t n) {
  std::vector<double> v(ix(n));
  for (int64_t i = 0; i < n; ++i) v[ix(i)] = static_cast<double>((i % 251) * (rank + 1) + rank);
  return v;
}

// Fractions: the two algorithms may round differently, so these compare within a tolerance.
std::vector<double> fraction_values(int rank, int64_t n) {
  std::vector<double> v(ix(n));
  for (int64_t i = 0; i < n; ++i) v[ix(i)] = 0.1 * (rank + 1) + 1e-3 * static_cast<double>(i % 1013);
  return v;
}

class GlooReduceScatterTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooReduceScatterTest, EveryRankGetsChunkRankOfTheAllReduce) {
  const int world = GetParam();
  const std::vector<int64_t> pieces{1, 3, 1024, 65537};  // elements per rank
  std::mutex mu;
  std::vector<CollectiveReport> reports;
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
      for (int64_t piece : pieces) {
        for (bool whole : {true, false}) {
          if (!whole && dtype == DType::Int64) continue;
          const std::string at = std::string(dtype_name(dtype)) + " piece " + std::to_string(piece) +
                                 (whole ? " whole" : " fractions") + " rank " + std::to_string(rank);
          const int64_t n = piece * world;
          const std::vector<double> v = whole ? whole_values(rank, n) : fraction_values(rank, n);
          const Tensor in = Tensor::from_doubles({n}, dtype, v);
          const std::vector<double> in_before = in.to_doubles();
          Tensor out = Tensor::zeros({piece}, dtype);
          std::vector<RingStep> steps{RingStep{}};
          const CollectiveReport r = g.reduce_scatter_sum(in, out, &steps);
          EXPECT_TRUE(steps.empty()) << at;
          EXPECT_EQ(in.to_doubles(), in_before) << at << ": the input is the caller's, left as it was";
          Tensor sum = in.clone();
          g.all_reduce_sum(sum);
          const std::vector<double> all = sum.to_doubles(), got = out.to_doubles();
          for (int64_t j = 0; j < piece; ++j) {
            const double want = all[ix(rank * piece + j)];
            if (whole)
              ASSERT_EQ(got[ix(j)], want) << at << " element " << j;
            else
              ASSERT_NEAR(got[ix(j)], want, 1e-5 * std::abs(want)) << at << " element " << j;
          }
          if (whole) {  // the pieces gathered again are the whole sum
            Tensor gathered = Tensor::zeros({n}, dtype);
            const CollectiveReport rg = g.all_gather(out, gathered);
            EXPECT_EQ(gathered.to_doubles(), all) << at;
            EXPECT_EQ(rg.op, CollectiveOp::AllGather);
            EXPECT_EQ(rg.bytes, gathered.nbytes());
          }
          std::lock_guard<std::mutex> lock(mu);
          reports.push_back(r);
        }
      }
    }
  }));
  ASSERT_EQ(reports.size(), static_cast<size_t>(world) * pieces.size() * 5);
  for (const CollectiveReport& r : reports) {
    EXPECT_EQ(r.op, CollectiveOp::ReduceScatter);
    EXPECT_EQ(r.ranks, world);
    EXPECT_GT(r.seconds, 0);
    EXPECT_NEAR(r.busbw, r.algbw * (world - 1) / world, 1e-9 * r.algbw + 1e-12);
  }
  // bytes: the whole input (nccl-tests), world x each rank's piece, in the dtype's size.
  EXPECT_EQ(reports.front().bytes, ix(world) * 1 * 4);
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooReduceScatterTest, ::testing::Values(2, 3, 4));

TEST(GlooReduceScatter, AnInputThatIsNotWorldTimesTheOutputIsRefused) {
  const std::vector<std::string> errors = with_ranks(2, [&](int, ProcessGroup& g) {
    g.barrier();  // both ranks connected: one failing early must not break the other's rendezvous
    const Tensor in = Tensor::zeros({5}, DType::Float32);
    Tensor out = Tensor::zeros({2}, DType::Float32);
    g.reduce_scatter_sum(in, out);
  });
  for (const std::string& e : errors)
    EXPECT_EQ(e, "reduce_scatter: the input must hold world size x the output's elements of the same dtype (got 5 for 2 x 2); "
                 "pad the input to a multiple of the world size before the call");
}

}  // namespace
}  // namespace dpv::dist
