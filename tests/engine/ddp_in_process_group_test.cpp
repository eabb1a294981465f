// The in-process ring: sums, the ring's steps (which chunk goes where), broadcast, all_gather,
// mismatched calls and abort. Also run under ThreadSanitizer (scripts/test.sh).
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "tests/engine/rank_threads.h"
#include "engine/device.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"

using namespace dpv;
using dpv::testing::on_ranks;

namespace {
std::vector<double> rank_values(int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 1000.0 * (rank + 1) + static_cast<double>(i);
  return v;
}
}  // namespace

TEST(InProcessGroup, RingChunkOffsetsSpreadTheRemainder) {
  EXPECT_EQ(ring_chunk_offsets(10, 4), (std::vector<int64_t>{0, 3, 6, 8, 10}));
  EXPECT_EQ(ring_chunk_offsets(2, 4), (std::vector<int64_t>{0, 1, 2, 2, 2}));
  EXPECT_EQ(ring_chunk_offsets(5, 1), (std::vector<int64_t>{0, 5}));
}

TEST(InProcessGroup, AllReduceSumsOnEveryRankForManySizes) {
  for (int W : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{10}, int64_t{1001}}) {
      auto group = make_in_process_group(W);
      std::vector<std::vector<double>> results(static_cast<size_t>(W));
      std::vector<CollectiveReport> reports(static_cast<size_t>(W));
      auto errors = on_ranks(group, [&](ProcessGroup& pg) {
        Tensor t = Tensor::from_doubles({n}, DType::Float64, rank_values(pg.rank(), n));
        reports[static_cast<size_t>(pg.rank())] = pg.all_reduce_sum(t);
        results[static_cast<size_t>(pg.rank())] = t.to_doubles();
      });
      for (int r = 0; r < W; ++r) {
        EXPECT_EQ(errors[static_cast<size_t>(r)], "");
        for (int64_t i = 0; i < n; ++i) {
          double expect = 0;
          for (int q = 0; q < W; ++q) expect += 1000.0 * (q + 1) + static_cast<double>(i);
          EXPECT_EQ(results[static_cast<size_t>(r)][static_cast<size_t>(i)], expect) << "W " << W << " n " << n;
        }
        EXPECT_EQ(reports[static_cast<size_t>(r)].op, CollectiveOp::AllReduce);
        EXPECT_EQ(reports[static_cast<size_t>(r)].bytes, static_cast<size_t>(n) * 8);
      }
    }
  }
}

TEST(InProcessGroup, RingStepsFollowReduceScatterThenAllGather) {
  const int W = 4;
  auto group = make_in_process_group(W);
  std::vector<std::vector<RingStep>> steps(W);
  std::vector<CollectiveReport> reports(W);
  on_ranks(group, [&](ProcessGroup& pg) {
    Tensor t = Tensor::from_doubles({10}, DType::Float32, rank_values(pg.rank(), 10));
    reports[static_cast<size_t>(pg.rank())] = pg.all_reduce_sum(t, &steps[static_cast<size_t>(pg.rank())]);
  });
  const auto off = ring_chunk_offsets(10, W);
  for (int r = 0; r < W; ++r) {
    const auto& s = steps[static_cast<size_t>(r)];
    ASSERT_EQ(s.size(), 2u * (W - 1));
    for (int k = 0; k < W - 1; ++k) {
      const RingStep& rs = s[static_cast<size_t>(k)];
      EXPECT_EQ(rs.phase, "reduce-scatter");
      EXPECT_EQ(rs.step, k);
      EXPECT_EQ(rs.send_to, (r + 1) % W);
      EXPECT_EQ(rs.recv_from, (r + W - 1) % W);
      EXPECT_EQ(rs.send_chunk, ((r - k) % W + W) % W);
      EXPECT_EQ(rs.recv_chunk, ((r - 1 - k) % W + W) % W);
      EXPECT_EQ(rs.bytes, static_cast<size_t>(off[rs.send_chunk + 1] - off[rs.send_chunk]) * 4);
      const RingStep& ag = s[static_cast<size_t>(W - 1 + k)];
      EXPECT_EQ(ag.phase, "all-gather");
      EXPECT_EQ(ag.send_chunk, ((r + 1 - k) % W + W) % W);
      EXPECT_EQ(ag.recv_chunk, ((r - k) % W + W) % W);
    }
    // After the reduce-scatter rank r owns the complete chunk r+1: the first chunk it passes on.
    EXPECT_EQ(s[W - 1].send_chunk, (r + 1) % W);
    // nccl-tests: busbw = algbw * 2(W-1)/W for an all-reduce.
    const auto& rep = reports[static_cast<size_t>(r)];
    EXPECT_GT(rep.seconds, 0);
    EXPECT_NEAR(rep.busbw, rep.algbw * 2.0 * (W - 1) / W, 1e-9 * rep.algbw);
  }
}

// With values recorded, every step's buffers are the rank's real ones: before step 0 its own
// values; a reduce-scatter step adds the neighbour's chunk (as it was before the step) into the
// received chunk only; after the last all-gather step every rank holds the sum.
TEST(InProcessGroup, RecordedRingValuesArePartialSums) {
  const int W = 3, n = 7;
  auto group = make_in_process_group(W);
  for (auto& g : group) record_ring_values(*g, SIZE_MAX);
  std::vector<std::vector<RingStep>> steps(W);
  on_ranks(group, [&](ProcessGroup& pg) {
    Tensor t = Tensor::from_doubles({n}, DType::Float64, rank_values(pg.rank(), n));
    pg.all_reduce_sum(t, &steps[static_cast<size_t>(pg.rank())]);
  });
  const auto off = ring_chunk_offsets(n, W);
  for (int r = 0; r < W; ++r) {
    const auto& s = steps[static_cast<size_t>(r)];
    ASSERT_EQ(s.size(), 2u * (W - 1));
    EXPECT_EQ(s[0].before, rank_values(r, n));
    for (size_t k = 0; k < s.size(); ++k) {
      const RingStep& st = s[k];
      ASSERT_EQ(st.before.size(), static_cast<size_t>(n));
      ASSERT_EQ(st.after.size(), static_cast<size_t>(n));
      if (k > 0) { EXPECT_EQ(st.before, s[k - 1].after); }
      const auto& sender = steps[static_cast<size_t>(st.recv_from)][k].before;
      for (int i = 0; i < n; ++i) {
        const bool received = i >= off[static_cast<size_t>(st.recv_chunk)] && i < off[static_cast<size_t>(st.recv_chunk) + 1];
        const double expect = !received ? st.before[i] : st.phase == "reduce-scatter" ? st.before[i] + sender[i] : sender[i];
        EXPECT_EQ(st.after[static_cast<size_t>(i)], expect) << "rank " << r << " step " << k << " element " << i;
      }
    }
    for (int i = 0; i < n; ++i) {
      double sum = 0;
      for (int q = 0; q < W; ++q) sum += rank_values(q, n)[static_cast<size_t>(i)];
      EXPECT_EQ(s.back().after[static_cast<size_t>(i)], sum);
    }
  }
  // Off (the default), nothing is copied.
  auto quiet = make_in_process_group(2);
  std::vector<std::vector<RingStep>> plain(2);
  on_ranks(quiet, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({4}, DType::Float32, 1.0);
    pg.all_reduce_sum(t, &plain[static_cast<size_t>(pg.rank())]);
  });
  EXPECT_TRUE(plain[0][0].before.empty());
  EXPECT_TRUE(plain[0][0].after.empty());
  // A limit copies only the first elements.
  auto limited = make_in_process_group(2);
  for (auto& g : limited) record_ring_values(*g, 1);
  std::vector<std::vector<RingStep>> first(2);
  on_ranks(limited, [&](ProcessGroup& pg) {
    Tensor t = Tensor::full({4}, DType::Float32, pg.rank() + 1.0);
    pg.all_reduce_sum(t, &first[static_cast<size_t>(pg.rank())]);
  });
  EXPECT_EQ(first[1][0].before, std::vector<double>{2.0});
  EXPECT_EQ(first[1].back().after, std::vector<double>{3.0});
}

TEST(InProcessGroup, BroadcastAllGatherBarrierAndDeviceTensors) {
  auto devs = DeviceSet::create("cpu:3");
  auto group = make_in_process_group(3);
  std::vector<std::vector<double>> bc(3), ag(3);
  auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    Tensor t = Tensor::from_doubles({4}, DType::Float64, rank_values(r, 4)).to(devs->shared(r));
    CollectiveReport rep = pg.broadcast(t, 1);
    EXPECT_EQ(rep.busbw, rep.algbw);
    bc[static_cast<size_t>(r)] = t.to_doubles();
    pg.barrier();
    Tensor in = Tensor::from_int64({2}, {r, 10 * r}).to(devs->shared(r));
    Tensor out = Tensor::zeros({6}, DType::Int64, devs->shared(r));
    rep = pg.all_gather(in, out);
    EXPECT_EQ(rep.bytes, 6u * 8u);
    for (auto v : out.to_int64()) ag[static_cast<size_t>(r)].push_back(static_cast<double>(v));
  });
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(errors[static_cast<size_t>(r)], "");
    EXPECT_EQ(bc[static_cast<size_t>(r)], rank_values(1, 4));
    EXPECT_EQ(ag[static_cast<size_t>(r)], (std::vector<double>{0, 0, 1, 10, 2, 20}));
  }
}

TEST(InProcessGroup, MismatchedSizesFailOnEveryRankInsteadOfHanging) {
  auto group = make_in_process_group(2);
  auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    Tensor t = Tensor::zeros({pg.rank() == 0 ? 4 : 5}, DType::Float32);
    pg.all_reduce_sum(t);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("rank 1 brought 5 float32 elements but rank 0 brought 4"), std::string::npos) << e;
}

TEST(InProcessGroup, AbortWakesRanksWaitingInACollective) {
  auto group = make_in_process_group(3);
  auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    if (pg.rank() == 2) {
      abort_in_process_group(pg, "rank 2 failed in its forward");
      throw Error("boom");
    }
    Tensor t = Tensor::zeros({8}, DType::Float32);
    pg.all_reduce_sum(t);
  });
  EXPECT_EQ(errors[2], "boom");
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[static_cast<size_t>(r)].find("aborted: rank 2 failed in its forward"), std::string::npos)
        << errors[static_cast<size_t>(r)];
}
