// Started all-reduces on the in-process group (ProcessGroup::start_all_reduce_sum): the group's one
// communication thread runs every rank's part of the ring, and must give exactly what W ranks
// meeting at barriers give (bit-identical sums, the same steps and recorded partial sums), in start
// order, and fail instead of hanging when the group is aborted. Also run under ThreadSanitizer.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"

using namespace dpv;

namespace {
void on_threads(int W, const std::function<void(int)>& fn) {
  std::vector<std::thread> threads;
  for (int r = 0; r < W; ++r) threads.emplace_back([&, r] { fn(r); });
  for (auto& t : threads) t.join();
}

// Values whose float32 sum depends on the order of the additions.
Tensor rank_tensor(int rank, int64_t n) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = 0.1 * (rank + 1) + 1e-7 * static_cast<double>(i * i) + 3.3e4 * (i % 3);
  return Tensor::from_doubles({n}, DType::Float32, v);
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}
}  // namespace

TEST(RingExecutor, StartedAllReduceEqualsTheBarrierRingBitForBit) {
  for (int W : {1, 2, 3, 4}) {
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{10}, int64_t{1001}}) {
      auto blocking = make_in_process_group(W);
      auto started = make_in_process_group(W);
      for (int r = 0; r < W; ++r) {
        record_ring_values(*blocking[static_cast<size_t>(r)], 4);
        record_ring_values(*started[static_cast<size_t>(r)], 4);
      }
      std::vector<Tensor> a(static_cast<size_t>(W)), b(static_cast<size_t>(W));
      std::vector<std::vector<RingStep>> steps_a(static_cast<size_t>(W));
      std::vector<std::shared_ptr<Work>> work(static_cast<size_t>(W));
      on_threads(W, [&](int r) {
        a[static_cast<size_t>(r)] = rank_tensor(r, n);
        blocking[static_cast<size_t>(r)]->all_reduce_sum(a[static_cast<size_t>(r)], &steps_a[static_cast<size_t>(r)]);
      });
      on_threads(W, [&](int r) {
        b[static_cast<size_t>(r)] = rank_tensor(r, n);
        work[static_cast<size_t>(r)] = started[static_cast<size_t>(r)]->start_all_reduce_sum(b[static_cast<size_t>(r)]);
        ASSERT_NE(work[static_cast<size_t>(r)], nullptr);
        work[static_cast<size_t>(r)]->wait();
      });
      for (int r = 0; r < W; ++r) {
        const auto& w = *work[static_cast<size_t>(r)];
        EXPECT_TRUE(w.completed());
        EXPECT_TRUE(same_bits(a[static_cast<size_t>(r)], b[static_cast<size_t>(r)])) << "W " << W << " n " << n;
        EXPECT_EQ(w.report().op, CollectiveOp::AllReduce);
        EXPECT_EQ(w.report().bytes, static_cast<size_t>(n) * 4);
        EXPECT_LE(w.started(), w.finished());
        const auto& sa = steps_a[static_cast<size_t>(r)];
        const auto& sb = w.ring();
        ASSERT_EQ(sa.size(), sb.size());
        ASSERT_EQ(sb.size(), static_cast<size_t>(2 * (W - 1)));
        for (size_t k = 0; k < sa.size(); ++k) {
          EXPECT_EQ(sa[k].phase, sb[k].phase);
          EXPECT_EQ(sa[k].step, sb[k].step);
          EXPECT_EQ(sa[k].send_to, sb[k].send_to);
          EXPECT_EQ(sa[k].recv_from, sb[k].recv_from);
          EXPECT_EQ(sa[k].send_chunk, sb[k].send_chunk);
          EXPECT_EQ(sa[k].recv_chunk, sb[k].recv_chunk);
          EXPECT_EQ(sa[k].bytes, sb[k].bytes);
          EXPECT_EQ(sa[k].before, sb[k].before) << "the partial sums a rank held before step " << k;
          EXPECT_EQ(sa[k].after, sb[k].after);
          EXPECT_GE(sb[k].seconds, 0.0);
        }
      }
    }
  }
}

TEST(InProcessGroup, BlockingCollectivesRunBesideStartedAllReduces) {
  // The group says it can start all-reduces on host memory, so a DDP rank issues its blocking
  // collectives from its own thread while earlier all-reduces are still running.
  const int W = 3;
  auto group = make_in_process_group(W);
  EXPECT_TRUE(group[0]->starts_all_reduce_on_host());
  std::vector<Tensor> bucket(W), other(W);
  on_threads(W, [&](int r) {
    bucket[static_cast<size_t>(r)] = rank_tensor(r, 100000);
    auto work = group[static_cast<size_t>(r)]->start_all_reduce_sum(bucket[static_cast<size_t>(r)]);
    other[static_cast<size_t>(r)] = Tensor::from_doubles({2}, DType::Float64, {1.0 * r, 2.0 * r});
    group[static_cast<size_t>(r)]->broadcast(other[static_cast<size_t>(r)], 1);
    work->wait();
  });
  EXPECT_NEAR(bucket[0].to_doubles(1)[0], 0.1 + 0.2 + 0.3, 1e-6);
  for (int r = 0; r < W; ++r) {
    EXPECT_EQ(other[static_cast<size_t>(r)].to_doubles(), (std::vector<double>{1.0, 2.0}));
    EXPECT_TRUE(same_bits(bucket[static_cast<size_t>(r)], bucket[0]));
  }
}

TEST(RingExecutor, SeveralStartedAllReducesRunInStartOrderWhileRanksGoOn) {
  const int W = 4, K = 6;
  auto group = make_in_process_group(W);
  std::vector<std::vector<Tensor>> bufs(W, std::vector<Tensor>(K));
  std::vector<std::vector<std::shared_ptr<Work>>> work(W, std::vector<std::shared_ptr<Work>>(K));
  on_threads(W, [&](int r) {
    for (int k = 0; k < K; ++k) {
      // Ranks start at different paces, as their backward reaches each bucket at different times.
      std::this_thread::sleep_for(std::chrono::microseconds(100 * ((r * 7 + k * 3) % 5)));
      bufs[static_cast<size_t>(r)][static_cast<size_t>(k)] =
          Tensor::from_doubles({5 + 97 * k}, DType::Float64, std::vector<double>(static_cast<size_t>(5 + 97 * k), 1.0 + r + 10.0 * k));
      work[static_cast<size_t>(r)][static_cast<size_t>(k)] =
          group[static_cast<size_t>(r)]->start_all_reduce_sum(bufs[static_cast<size_t>(r)][static_cast<size_t>(k)]);
    }
    for (auto& w : work[static_cast<size_t>(r)]) w->wait();
  });
  for (int r = 0; r < W; ++r)
    for (int k = 0; k < K; ++k) {
      double expect = 0;
      for (int q = 0; q < W; ++q) expect += 1.0 + q + 10.0 * k;
      for (double v : bufs[static_cast<size_t>(r)][static_cast<size_t>(k)].to_doubles()) EXPECT_EQ(v, expect);
      if (k > 0) {  // one at a time, in start order
        EXPECT_LE(work[static_cast<size_t>(r)][static_cast<size_t>(k) - 1]->finished(),
                  work[static_cast<size_t>(r)][static_cast<size_t>(k)]->started());
      }
    }
}

TEST(RingExecutor, AbortFailsAnAllReduceThatNotEveryRankStarted) {
  auto group = make_in_process_group(3);
  Tensor t = rank_tensor(0, 10);
  auto work = group[0]->start_all_reduce_sum(t);
  ASSERT_NE(work, nullptr);
  EXPECT_FALSE(work->completed());
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    abort_in_process_group(*group[2], "rank 2 failed: boom");
  });
  try {
    work->wait();  // would hang for ever without the abort: ranks 1 and 2 never start it
    ADD_FAILURE() << "wait() returned";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "the in-process group was aborted: rank 2 failed: boom");
  }
  aborter.join();
  EXPECT_TRUE(work->completed());
  Tensor u = rank_tensor(1, 10);
  EXPECT_THROW(group[1]->start_all_reduce_sum(u), Error);
}

TEST(RingExecutor, MismatchedSizesFailEveryRanksWait) {
  auto group = make_in_process_group(2);
  std::vector<std::string> errors(2);
  on_threads(2, [&](int r) {
    Tensor t = rank_tensor(r, r == 0 ? 10 : 11);
    auto work = group[static_cast<size_t>(r)]->start_all_reduce_sum(t);
    try {
      work->wait();
    } catch (const Error& e) {
      errors[static_cast<size_t>(r)] = e.what();
    }
  });
  for (const auto& e : errors) EXPECT_NE(e.find("rank 1 brought 11 float32 elements but rank 0 brought 10"), std::string::npos) << e;
}

TEST(RingExecutor, PremultipliedSumEqualsScalingEveryBufferFirstBitForBit) {
  // DDP's 1/W applied by the ring as it first touches each chunk must give exactly the bits of a
  // separate scale pass over every rank's buffer followed by the plain ring (PyTorch's mul_out into
  // the bucket, then the all-reduce), in both dtypes, with and without recorded steps.
  for (DType dtype : {DType::Float32, DType::Float64}) {
    for (int W : {1, 2, 3, 4}) {
      for (size_t record : {size_t{0}, size_t{3}}) {
        const int64_t n = 1003;
        const double factor = 1.0 / W;
        auto plain = make_in_process_group(W);
        auto premultiplied = make_in_process_group(W);
        std::vector<Tensor> a(static_cast<size_t>(W)), b(static_cast<size_t>(W));
        std::vector<std::shared_ptr<Work>> wa(static_cast<size_t>(W)), wb(static_cast<size_t>(W));
        for (int r = 0; r < W; ++r) {
          record_ring_values(*plain[static_cast<size_t>(r)], record);
          record_ring_values(*premultiplied[static_cast<size_t>(r)], record);
        }
        on_threads(W, [&](int r) {
          const auto i = static_cast<size_t>(r);
          a[i] = Tensor::from_doubles({n}, dtype, rank_tensor(r, n).to_doubles());
          b[i] = Tensor::from_doubles({n}, dtype, rank_tensor(r, n).to_doubles());
          auto dev = DeviceSet::create("cpu:1");
          dev->shared(0)->backend().scale_inplace(a[i], factor);
          wa[i] = plain[i]->start_all_reduce_sum(a[i]);
          wb[i] = premultiplied[i]->start_all_reduce_sum(b[i], factor);
          wa[i]->wait();
          wb[i]->wait();
        });
        for (int r = 0; r < W; ++r) {
          const auto i = static_cast<size_t>(r);
          EXPECT_TRUE(same_bits(a[i], b[i])) << dtype_name(dtype) << " W " << W << " rank " << r;
          ASSERT_EQ(wa[i]->ring().size(), wb[i]->ring().size());
          for (size_t k = 0; k < wa[i]->ring().size(); ++k) {
            EXPECT_EQ(wa[i]->ring()[k].before, wb[i]->ring()[k].before) << "step " << k;
            EXPECT_EQ(wa[i]->ring()[k].after, wb[i]->ring()[k].after) << "step " << k;
          }
        }
        // And the premultiplied sum is the mean, not the sum.
        if (W > 1) {
          EXPECT_NEAR(b[0].to_doubles(1)[0], (0.1 * W * (W + 1) / 2) / W, 1e-5);
        }
      }
    }
  }
}

TEST(RingExecutor, UnrecordedAllReduceForwardingInTheLastReduceStepEqualsTheBarrierRingBitForBit) {
  // Unrecorded, the last reduce-scatter step writes each finished chunk into the successor's buffer
  // too and the first all-gather step moves nothing: the sums must still be the barrier ring's bit
  // for bit, for every dtype, plain and premultiplied, with chunks of every size (empty ones too).
  for (DType dtype : {DType::Float32, DType::Float64, DType::Int64}) {
    for (double factor : {1.0, 0.0}) {  // 0: premultiply by 1/W
      if (dtype == DType::Int64 && factor != 1.0) continue;
      for (int W : {2, 3, 4}) {
        for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{7}, int64_t{1001}, int64_t{65537}}) {
          const double premultiply = factor == 1.0 ? 1.0 : 1.0 / W;
          auto blocking = make_in_process_group(W);
          auto started = make_in_process_group(W);
          std::vector<Tensor> a(static_cast<size_t>(W)), b(static_cast<size_t>(W));
          std::vector<std::shared_ptr<Work>> work(static_cast<size_t>(W));
          on_threads(W, [&](int r) {
            const auto i = static_cast<size_t>(r);
            std::vector<double> values = rank_tensor(r, n).to_doubles();
            if (dtype == DType::Int64)
              for (size_t k = 0; k < values.size(); ++k) values[k] = static_cast<double>((k * 7919 + r * 104729) % 100003);
            a[i] = Tensor::from_doubles({n}, dtype, values);
            b[i] = Tensor::from_doubles({n}, dtype, values);
            if (premultiply != 1.0) DeviceSet::create("cpu:1")->shared(0)->backend().scale_inplace(a[i], premultiply);
            blocking[i]->all_reduce_sum(a[i]);
            work[i] = started[i]->start_all_reduce_sum(b[i], premultiply);
            work[i]->wait();
          });
          for (int r = 0; r < W; ++r) {
            const auto i = static_cast<size_t>(r);
            EXPECT_TRUE(same_bits(a[i], b[i])) << dtype_name(dtype) << " premultiply " << premultiply << " W " << W
                                               << " n " << n << " rank " << r;
            ASSERT_EQ(work[i]->ring().size(), static_cast<size_t>(2 * (W - 1)));
            EXPECT_EQ(work[i]->ring()[static_cast<size_t>(W - 1)].phase, "all-gather");
            EXPECT_EQ(work[i]->report().bytes, b[i].nbytes());
          }
        }
      }
    }
  }
}
