// The in-process ring's two halves on their own (reduce_scatter_sum, all_gather), the collectives
// the sharded strategies need, against its all-reduce: the same chunks, steps and additions, with
// PyTorch's chunk assignment (rank r gets chunk r). Also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>

#include "tests/engine/rank_threads.h"
#include "engine/device.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"

using namespace dpv;
using dpv::testing::on_ranks;

namespace {
size_t ix(int64_t i) { return static_cast<size_t>(i); }

// Rank `rank`'s values: fractions of very different sizes, so that a float sum depends on the
// order of its additions.
std::vector<double> rank_values(int rank, int64_t n) {
  std::vector<double> v(ix(n));
  for (int64_t i = 0; i < n; ++i) v[ix(i)] = 0.1 * (rank + 1) + 1e-7 * static_cast<double>(i * i) + 3.3e4 * (i % 3);
  return v;
}

// The caller's padding: n values, then zeros up to a multiple of world.
int64_t padded(int64_t n, int world) { return (n + world - 1) / world * world; }
Tensor padded_tensor(int rank, int64_t n, int world, DType dtype) {
  std::vector<double> v = rank_values(rank, n);
  v.resize(ix(padded(n, world)), 0.0);
  return Tensor::from_doubles({padded(n, world)}, dtype, v);
}

// t with its chunks of `piece` elements moved `by` chunks on (chunk c goes to c + by, mod world).
Tensor rolled(const Tensor& t, int64_t piece, int by) {
  const int64_t chunks = t.numel() / piece;
  Tensor out = Tensor::empty(t.shape(), t.dtype());
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t to = ((c + by) % chunks + chunks) % chunks;
    out.slice0(to * piece, (to + 1) * piece).copy_from(t.slice0(c * piece, (c + 1) * piece));
  }
  return out;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

int mod(int a, int w) { return ((a % w) + w) % w; }
}  // namespace

// reduce_scatter then all_gather runs the all-reduce's two phases with every chunk index one less:
// chunk c of the halves is summed by the same ranks in the same order as the all-reduce sums its
// chunk c+1. So the halves over the padded buffer equal, bit for bit, the all-reduce of that
// buffer with its chunks moved one on (then moved back). At world 2 each chunk is one addition
// (a + b == b + a exactly), so there the halves equal the plain all-reduce too.
TEST(InProcessGroupHalves, ReduceScatterThenAllGatherIsTheAllReduceBitForBit) {
  for (int W : {2, 3, 4}) {
    for (DType dtype : {DType::Float32, DType::Float64}) {
      for (int64_t n : {int64_t{1}, int64_t{W}, int64_t{7}, int64_t{12}, int64_t{1001}}) {
        const int64_t piece = padded(n, W) / W;
        auto group = make_in_process_group(W);
        std::vector<Tensor> halves(ix(W)), all_reduced(ix(W)), plain(ix(W));
        const auto errors = on_ranks(group, [&](ProcessGroup& pg) {
          const int r = pg.rank();
          const Tensor in = padded_tensor(r, n, W, dtype);
          Tensor mine = Tensor::zeros({piece}, dtype);
          pg.reduce_scatter_sum(in, mine);
          halves[ix(r)] = Tensor::zeros({W * piece}, dtype);
          pg.all_gather(mine, halves[ix(r)]);
          Tensor moved = rolled(in, piece, 1);
          pg.all_reduce_sum(moved);
          all_reduced[ix(r)] = rolled(moved, piece, -1);
          plain[ix(r)] = in.clone();
          pg.all_reduce_sum(plain[ix(r)]);
        });
        for (int r = 0; r < W; ++r) {
          const std::string at = "W " + std::to_string(W) + " " + dtype_name(dtype) + " n " + std::to_string(n) +
                                 " rank " + std::to_string(r);
          ASSERT_EQ(errors[ix(r)], "") << at;
          EXPECT_TRUE(same_bits(halves[ix(r)], all_reduced[ix(r)])) << at;
          if (W == 2) {
            EXPECT_TRUE(same_bits(halves[ix(r)], plain[ix(r)])) << at;
          }
          // Every rank ends with the same bits.
          EXPECT_TRUE(same_bits(halves[ix(r)], halves[0])) << at;
        }
      }
    }
  }
}

// PyTorch's assignment (reduce_scatter_tensor): rank r gets chunk r of the sum. Int64 sums are
// exact in any order, so here the halves equal the plain all-reduce at every world size.
TEST(InProcessGroupHalves, RankRGetsChunkRAndInt64HalvesEqualTheAllReduce) {
  for (int W : {1, 2, 3, 4}) {
    const int64_t piece = 5;
    auto group = make_in_process_group(W);
    std::vector<std::vector<int64_t>> got(ix(W)), gathered(ix(W)), all_reduced(ix(W));
    const auto errors = on_ranks(group, [&](ProcessGroup& pg) {
      const int r = pg.rank();
      std::vector<int64_t> v(ix(W * piece));
      for (int64_t i = 0; i < W * piece; ++i) v[ix(i)] = 1000 * (r + 1) + i * i;
      const Tensor in = Tensor::from_int64({W * piece}, v);
      Tensor out = Tensor::zeros({piece}, DType::Int64);
      pg.reduce_scatter_sum(in, out);
      got[ix(r)] = out.to_int64();
      Tensor all = Tensor::zeros({W * piece}, DType::Int64);
      pg.all_gather(out, all);
      gathered[ix(r)] = all.to_int64();
      Tensor sum = in.clone();
      pg.all_reduce_sum(sum);
      all_reduced[ix(r)] = sum.to_int64();
    });
    for (int r = 0; r < W; ++r) {
      ASSERT_EQ(errors[ix(r)], "");
      for (int64_t j = 0; j < piece; ++j) {
        const int64_t i = r * piece + j;
        int64_t want = 0;
        for (int q = 0; q < W; ++q) want += 1000 * (q + 1) + i * i;
        EXPECT_EQ(got[ix(r)][ix(j)], want) << "W " << W << " rank " << r << " element " << j;
      }
      EXPECT_EQ(gathered[ix(r)], all_reduced[ix(r)]) << "W " << W << " rank " << r;
    }
  }
}

// The halves report their steps as the all-reduce reports its phases: world-1 steps each, to rank
// r+1 and from rank r-1, every chunk index one less than the all-reduce's, the bytes of the chunk
// sent; rank r completes chunk r, and the all-gather starts by sending it. The reports follow
// nccl-tests: bytes = the whole input (reduce-scatter) or output (all-gather), busbw = algbw (W-1)/W.
TEST(InProcessGroupHalves, StepsAreTheAllReducePhasesWithEveryChunkOneLess) {
  const int W = 4;
  const int64_t piece = 3;
  auto group = make_in_process_group(W);
  std::vector<std::vector<RingStep>> rs(ix(W)), ag(ix(W)), ar(ix(W));
  std::vector<CollectiveReport> rs_report(ix(W)), ag_report(ix(W));
  const auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    const Tensor in = padded_tensor(r, W * piece, W, DType::Float32);
    Tensor out = Tensor::zeros({piece}, DType::Float32);
    rs_report[ix(r)] = pg.reduce_scatter_sum(in, out, &rs[ix(r)]);
    Tensor all = Tensor::zeros({W * piece}, DType::Float32);
    ag_report[ix(r)] = pg.all_gather(out, all, &ag[ix(r)]);
    Tensor sum = in.clone();
    pg.all_reduce_sum(sum, &ar[ix(r)]);
  });
  for (int r = 0; r < W; ++r) {
    ASSERT_EQ(errors[ix(r)], "");
    ASSERT_EQ(rs[ix(r)].size(), ix(W - 1));
    ASSERT_EQ(ag[ix(r)].size(), ix(W - 1));
    ASSERT_EQ(ar[ix(r)].size(), ix(2 * (W - 1)));
    for (int k = 0; k < W - 1; ++k) {
      const RingStep& a = rs[ix(r)][ix(k)];
      const RingStep& b = ag[ix(r)][ix(k)];
      const RingStep& ar_rs = ar[ix(r)][ix(k)];
      const RingStep& ar_ag = ar[ix(r)][ix(W - 1 + k)];
      EXPECT_EQ(a.phase, "reduce-scatter");
      EXPECT_EQ(b.phase, "all-gather");
      for (const RingStep* st : {&a, &b}) {
        EXPECT_EQ(st->step, k);
        EXPECT_EQ(st->send_to, (r + 1) % W);
        EXPECT_EQ(st->recv_from, (r + W - 1) % W);
        EXPECT_EQ(st->bytes, ix(piece) * 4);
      }
      EXPECT_EQ(a.send_chunk, mod(ar_rs.send_chunk - 1, W));
      EXPECT_EQ(a.recv_chunk, mod(ar_rs.recv_chunk - 1, W));
      EXPECT_EQ(b.send_chunk, mod(ar_ag.send_chunk - 1, W));
      EXPECT_EQ(b.recv_chunk, mod(ar_ag.recv_chunk - 1, W));
    }
    EXPECT_EQ(rs[ix(r)].back().recv_chunk, r);  // the last addition completes chunk r here
    EXPECT_EQ(ag[ix(r)].front().send_chunk, r);
    const CollectiveReport& a = rs_report[ix(r)];
    EXPECT_EQ(a.op, CollectiveOp::ReduceScatter);
    EXPECT_STREQ(collective_op_name(a.op), "reduce_scatter");
    EXPECT_EQ(a.ranks, W);
    EXPECT_EQ(a.bytes, ix(W * piece) * 4);
    EXPECT_GT(a.seconds, 0);
    EXPECT_NEAR(a.busbw, a.algbw * (W - 1) / W, 1e-9 * a.algbw);
    const CollectiveReport& b = ag_report[ix(r)];
    EXPECT_EQ(b.op, CollectiveOp::AllGather);
    EXPECT_EQ(b.bytes, ix(W * piece) * 4);
    EXPECT_NEAR(b.busbw, b.algbw * (W - 1) / W, 1e-9 * b.algbw);
  }
}

// With values recorded, each step's buffers are the rank's real ones: the reduce-scatter adds the
// predecessor's chunk (as it was before the step) into the received chunk only, the all-gather
// copies it; before the all-gather's first step a rank holds only its own piece in its slot.
TEST(InProcessGroupHalves, RecordedValuesArePartialSumsAndCopies) {
  const int W = 3, piece = 2;
  auto group = make_in_process_group(W);
  for (auto& g : group) record_ring_values(*g, SIZE_MAX);
  std::vector<std::vector<RingStep>> rs(ix(W)), ag(ix(W));
  const auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    const Tensor in = padded_tensor(r, W * piece, W, DType::Float64);
    Tensor out = Tensor::zeros({piece}, DType::Float64);
    pg.reduce_scatter_sum(in, out, &rs[ix(r)]);
    Tensor all = Tensor::zeros({W * piece}, DType::Float64);
    pg.all_gather(out, all, &ag[ix(r)]);
  });
  for (int r = 0; r < W; ++r) {
    ASSERT_EQ(errors[ix(r)], "");
    EXPECT_EQ(rs[ix(r)].front().before, rank_values(r, W * piece));
    for (const auto* steps : {&rs, &ag}) {
      const auto& s = (*steps)[ix(r)];
      for (size_t k = 0; k < s.size(); ++k) {
        const RingStep& st = s[k];
        ASSERT_EQ(st.after.size(), ix(W * piece));
        if (k > 0) {
          EXPECT_EQ(st.before, s[k - 1].after);
        }
        const auto& sender = (*steps)[ix(st.recv_from)][k].before;
        for (int i = 0; i < W * piece; ++i) {
          const bool received = i / piece == st.recv_chunk;
          const double expect = !received ? st.before[ix(i)] : st.phase == "reduce-scatter" ? st.before[ix(i)] + sender[ix(i)] : sender[ix(i)];
          EXPECT_EQ(st.after[ix(i)], expect) << "rank " << r << " " << st.phase << " step " << k << " element " << i;
        }
      }
    }
    // The all-gather starts from the reduce-scatter's result in slot r, nothing else yet written.
    const auto& first = ag[ix(r)].front().before;
    for (int i = 0; i < W * piece; ++i) {
      const double want = i / piece == r ? rs[ix(r)].back().after[ix(i)] : 0.0;
      EXPECT_EQ(first[ix(i)], want) << "rank " << r << " element " << i;
    }
  }
}

TEST(InProcessGroupHalves, ReduceScatterRefusesAnInputThatIsNotWorldTimesTheOutput) {
  auto group = make_in_process_group(2);
  auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    const Tensor in = Tensor::zeros({5}, DType::Float32);
    Tensor out = Tensor::zeros({2}, DType::Float32);
    pg.reduce_scatter_sum(in, out);
  });
  for (const auto& e : errors)
    EXPECT_EQ(e, "reduce_scatter: the input must hold world_size (2) x the output's 2 float32 elements, got 5 float32; "
                 "pad the input to a multiple of world_size before the call");
  errors = on_ranks(group, [&](ProcessGroup& pg) {
    const Tensor in = Tensor::zeros({4}, DType::Float64);
    Tensor out = Tensor::zeros({2}, DType::Float32);
    pg.reduce_scatter_sum(in, out);
  });
  for (const auto& e : errors) EXPECT_NE(e.find("got 4 float64"), std::string::npos) << e;
  // The group is still usable: the refusal came before any rank waited for the others.
  errors = on_ranks(group, [&](ProcessGroup& pg) {
    const Tensor in = Tensor::full({4}, DType::Float32, pg.rank() + 1.0);
    Tensor out = Tensor::zeros({2}, DType::Float32);
    pg.reduce_scatter_sum(in, out);
    EXPECT_EQ(out.to_doubles(), (std::vector<double>{3.0, 3.0}));
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
}

// Simulated devices: the halves move chunks between the ranks' own devices, as the all-reduce does.
TEST(InProcessGroupHalves, RunOnTheRanksDevices) {
  const int W = 3;
  auto devs = DeviceSet::create("cpu:3");
  auto group = make_in_process_group(W);
  std::vector<std::vector<double>> gathered(ix(W));
  const auto errors = on_ranks(group, [&](ProcessGroup& pg) {
    const int r = pg.rank();
    const Tensor in = Tensor::full({6}, DType::Float64, r + 1.0).to(devs->shared(r));
    Tensor out = Tensor::zeros({2}, DType::Float64, devs->shared(r));
    pg.reduce_scatter_sum(in, out);
    EXPECT_EQ(out.device_index(), r);
    Tensor all = Tensor::zeros({6}, DType::Float64, devs->shared(r));
    pg.all_gather(out, all);
    gathered[ix(r)] = all.to_doubles();
  });
  for (int r = 0; r < W; ++r) {
    EXPECT_EQ(errors[ix(r)], "");
    EXPECT_EQ(gathered[ix(r)], std::vector<double>(6, 6.0));
  }
}
