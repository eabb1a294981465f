// The Gloo process group with its ranks as threads of this process, meeting through the TCP store
// on 127.0.0.1: all-reduce (Gloo's chunked ring on synchronous pairs, in pieces of 256 KiB, or
// from 8 MiB among three ranks or more Gloo's asynchronous ring),
// broadcast, all-gather and barrier give the right values and reports, and a rank that never calls
// makes the others fail within the timeout instead of hanging, for one piece and for several.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <sys/socket.h>

#include "engine/process_groups/multiprocess/gloo_group.h"
#include "engine/process_groups/multiprocess/tcp_store.h"
#include "engine/error.h"
#include "tests/dist/gloo_ranks.h"
#include "tests/support/wait.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;

using testing::expect_no_errors;
using testing::with_ranks;

class GlooGroupTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooGroupTest, AllReduceSumsEveryRanksBuffer) {
  const int world = GetParam();
  const int64_t n = 100003;  // not a multiple of the ring's chunking
  std::mutex mu;
  std::vector<CollectiveReport> reports;
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    EXPECT_EQ(g.rank(), rank);
    EXPECT_EQ(g.size(), world);
    EXPECT_EQ(g.backend(), "gloo");
    std::vector<double> v(n);
    for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>((i % 97) * (rank + 1));
    for (DType dt : {DType::Float32, DType::Float64}) {
      Tensor t = Tensor::from_doubles({n}, dt, v);
      std::vector<RingStep> steps{RingStep{}};
      CollectiveReport r = g.all_reduce_sum(t, &steps);
      EXPECT_TRUE(steps.empty());
      std::vector<double> got = t.to_doubles();
      const double ranks_sum = world * (world + 1) / 2.0;
      for (int64_t i = 0; i < n; i += 997) ASSERT_DOUBLE_EQ(got[i], (i % 97) * ranks_sum) << i;
      std::lock_guard<std::mutex> lock(mu);
      reports.push_back(r);
    }
  }));
  ASSERT_EQ(reports.size(), static_cast<size_t>(2 * world));
  for (const CollectiveReport& r : reports) {
    EXPECT_EQ(r.op, CollectiveOp::AllReduce);
    EXPECT_EQ(r.ranks, world);
    EXPECT_TRUE(r.bytes == n * 4 || r.bytes == n * 8);
    EXPECT_GT(r.seconds, 0);
    EXPECT_NEAR(r.busbw, r.algbw * 2.0 * (world - 1) / world, 1e-9 * r.algbw + 1e-12);
  }
}

TEST_P(GlooGroupTest, BroadcastAllGatherAndBarrier) {
  const int world = GetParam();
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    const int root = world - 1;
    Tensor b = Tensor::from_doubles({3}, DType::Float64, {rank * 1.0, rank * 2.0, rank * 3.0});
    CollectiveReport rb = g.broadcast(b, root);
    EXPECT_EQ(b.to_doubles(), (std::vector<double>{root * 1.0, root * 2.0, root * 3.0}));
    EXPECT_EQ(rb.op, CollectiveOp::Broadcast);
    EXPECT_EQ(rb.bytes, 24u);

    Tensor in = Tensor::from_int64({2}, {rank, 10 * rank});
    Tensor out = Tensor::zeros({2 * world}, DType::Int64);
    CollectiveReport rg = g.all_gather(in, out);
    std::vector<int64_t> want;
    for (int r = 0; r < world; ++r) {
      want.push_back(r);
      want.push_back(10 * r);
    }
    EXPECT_EQ(out.to_int64(), want);
    EXPECT_EQ(rg.bytes, static_cast<size_t>(16 * world));
    EXPECT_NEAR(rg.busbw, rg.algbw * (world - 1) / world, 1e-9 * rg.algbw + 1e-12);
    g.barrier();
  }));
}

// All-reduces run Gloo's chunked ring on synchronous pairs: up to 256 KiB on an algorithm object
// kept per (dtype, numel) over a staging buffer, larger ones in place in pieces of 256 KiB, a ring
// made per piece: every size around the chunking (fewer elements than ranks, one chunk, one piece,
// one element past it, many pieces and a partial last one), every dtype, sums with fractions so
// that a different summation order would show, and every rank must hold the same bits.
TEST_P(GlooGroupTest, SmallAllReducesSumAndEveryRankHoldsTheSameBits) {
  const int world = GetParam();
  const std::vector<int64_t> sizes{1, 3, 255, 256, 1000, 1025, 65536, 65537, 300001};  // elements
  std::mutex mu;
  std::vector<std::vector<std::vector<double>>> got(world);  // [rank][call][element]
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (int repeat = 0; repeat < 2; ++repeat) {  // the second time reuses the algorithm objects
      for (int64_t n : sizes) {
        for (DType dt : {DType::Float32, DType::Float64, DType::Int64}) {
          std::vector<double> v(static_cast<size_t>(n));
          for (int64_t i = 0; i < n; ++i)
            v[i] = dt == DType::Int64 ? static_cast<double>(i * (rank + 1)) : 0.1 * (i % 13) + 1.0 / (rank + 3);
          Tensor t = Tensor::from_doubles({n}, dt, v);  // a new buffer every call
          CollectiveReport r = g.all_reduce_sum(t);
          EXPECT_EQ(r.bytes, static_cast<size_t>(t.nbytes()));
          std::vector<double> out = t.to_doubles();
          for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 50)) {
            double want = 0;
            for (int q = 0; q < world; ++q)
              want += dt == DType::Int64 ? static_cast<double>(i * (q + 1)) : 0.1 * (i % 13) + 1.0 / (q + 3);
            ASSERT_NEAR(out[i], want, dt == DType::Float32 ? 1e-5 * world : 1e-12) << "n " << n << " i " << i;
          }
          std::lock_guard<std::mutex> lock(mu);
          got[rank].push_back(std::move(out));
        }
      }
    }
  }));
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs from rank 0";
}

// Broadcasts up to 256 KiB go over the synchronous pairs (kept ready per dtype, numel and root),
// larger ones over Gloo's asynchronous broadcast; both, from every root, interleaved with
// all-reduces on the same pairs, twice over so the second round reuses what the first made.
TEST_P(GlooGroupTest, BroadcastsFromEveryRootInterleavedWithAllReduces) {
  const int world = GetParam();
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (int round = 0; round < 2; ++round) {
      for (int64_t n : {int64_t{1}, int64_t{300}, int64_t{32768}, int64_t{65537}}) {
        for (int root = 0; root < world; ++root) {
          for (DType dt : {DType::Float32, DType::Int64}) {
            std::vector<double> v(static_cast<size_t>(n));
            for (int64_t i = 0; i < n; ++i) v[i] = static_cast<double>(i % 1000 + 7 * rank);
            Tensor t = Tensor::from_doubles({n}, dt, v);
            CollectiveReport r = g.broadcast(t, root);
            EXPECT_EQ(r.op, CollectiveOp::Broadcast);
            std::vector<double> out = t.to_doubles();
            for (int64_t i = 0; i < n; i += std::max<int64_t>(1, n / 40))
              ASSERT_EQ(out[i], static_cast<double>(i % 1000 + 7 * root)) << "n " << n << " root " << root;
            Tensor s = Tensor::full({n}, dt, 1.0);
            g.all_reduce_sum(s);
            ASSERT_EQ(s.to_doubles().back(), static_cast<double>(world));
          }
        }
      }
    }
  }));
}

// More distinct sizes than the group keeps ready: the least recently used are dropped and made
// again, on every rank alike, and the sums stay right.
TEST_P(GlooGroupTest, ManyDistinctSmallSizesStayCorrect) {
  const int world = GetParam();
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (int round = 0; round < 2; ++round) {
      for (int64_t n = 1; n <= 40; ++n) {
        Tensor t = Tensor::full({n * 7}, DType::Float32, rank + 1.0);
        g.all_reduce_sum(t);
        std::vector<double> out = t.to_doubles();
        ASSERT_EQ(out.front(), world * (world + 1) / 2.0) << n;
        ASSERT_EQ(out.back(), world * (world + 1) / 2.0) << n;
      }
    }
  }));
}

// The socket send buffers of this process's TCP connections, as getsockopt(SO_SNDBUF) reports them.
std::vector<int> tcp_send_buffer_sizes() {
  std::vector<int> sizes;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::atoi(entry.path().filename().c_str());
    int type = 0, sndbuf = 0;
    socklen_t len = sizeof(type);
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM) continue;
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_len) != 0) continue;  // listening
    len = sizeof(sndbuf);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, &len) == 0) sizes.push_back(sndbuf);
  }
  return sizes;
}

// A synchronous ring keeps two chunks in flight on a socket. Gloo sets a socket's send buffer to
// the largest message sent on it so far (fixing it there: Linux stops tuning it), so after a first
// all-reduce of 4 KiB the two 4 KiB chunks of a 16 KiB one did not fit and a send waited for the
// peer's acknowledgement, which TCP may delay: 16 KiB all-reduces took 2-19 ms instead of 60 us,
// now and then. make_gloo_group sends one 256 KiB message each way on every synchronous pair
// first, so after small all-reduces each of those W(W-1) sockets still has a send buffer for
// 256 KiB (Linux reports twice what was asked, capped at net.core.wmem_max; Gloo's header adds
// a few bytes).
TEST_P(GlooGroupTest, SynchronousPairsKeepSendBuffersForAWholePiece) {
  const int world = GetParam();
  std::ifstream wmem_max_file("/proc/sys/net/core/wmem_max");
  int wmem_max = 0;
  wmem_max_file >> wmem_max;
  ASSERT_GT(wmem_max, 0);
  const int at_least = 2 * std::min(256 * 1024, wmem_max), at_most = 2 * std::min(256 * 1024 + 4096, wmem_max);
  std::vector<int> sizes;
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    Tensor t = Tensor::full({1024}, DType::Float32, 1.0);  // 4 KiB
    g.all_reduce_sum(t);
    g.barrier();
    if (rank == 0) sizes = tcp_send_buffer_sizes();
    g.barrier();  // every rank's group kept until rank 0 has looked
  }));
  const auto sized = std::count_if(sizes.begin(), sizes.end(), [&](int s) { return s >= at_least && s <= at_most; });
  EXPECT_EQ(sized, world * (world - 1)) << "sockets with a send buffer of " << at_least << "-" << at_most
                                        << " bytes, out of " << sizes.size();
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooGroupTest, ::testing::Values(2, 4));

// From 8 MiB on, with three ranks or more, an all-reduce runs Gloo's asynchronous ring over the
// tensor itself instead of synchronous pieces (two ranks keep the pieces at every size). Either
// way: sums right, every rank the same bits, for just under, at and just over the switch, every
// dtype, with small all-reduces and broadcasts on the other pairs in between, twice over.
class GlooLargeAllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooLargeAllReduceTest, SumsAndEveryRankHoldsTheSameBitsAroundTheSwitch) {
  const int world = GetParam();
  constexpr int64_t kSwitchBytes = 8 << 20;
  struct Case {
    DType dtype;
    int64_t numel;
  };
  const std::vector<Case> cases{{DType::Float32, kSwitchBytes / 4 - 1},
                                {DType::Float32, kSwitchBytes / 4},
                                {DType::Float64, kSwitchBytes / 8 + 1},
                                {DType::Int64, kSwitchBytes / 8 + 3}};
  std::mutex mu;
  std::vector<std::vector<std::vector<double>>> got(world);  // [rank][call][sampled element]
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (int round = 0; round < 2; ++round) {
      for (const Case& c : cases) {
        const bool integer = c.dtype == DType::Int64;
        auto value = [&](int64_t i, int r) {
          return integer ? static_cast<double>((i % 1009) * (r + 1)) : 0.1 * (i % 13) + 1.0 / (r + 3);
        };
        std::vector<double> v(static_cast<size_t>(c.numel));
        for (int64_t i = 0; i < c.numel; ++i) v[i] = value(i, rank);
        Tensor t = Tensor::from_doubles({c.numel}, c.dtype, v);
        CollectiveReport r = g.all_reduce_sum(t);
        EXPECT_EQ(r.bytes, t.nbytes());
        EXPECT_EQ(r.ranks, world);
        std::vector<double> out = t.to_doubles(), sampled;
        for (int64_t i = 0; i < c.numel; i += 4099) {
          double want = 0;
          for (int q = 0; q < world; ++q) want += value(i, q);
          ASSERT_NEAR(out[i], want, c.dtype == DType::Float32 ? 1e-5 * world : 1e-12) << "numel " << c.numel << " i " << i;
          sampled.push_back(out[i]);
        }
        sampled.push_back(out.back());
        {
          std::lock_guard<std::mutex> lock(mu);
          got[rank].push_back(std::move(sampled));
        }
        Tensor small = Tensor::full({1000}, DType::Float32, rank + 1.0);
        g.all_reduce_sum(small);
        ASSERT_EQ(small.to_doubles().back(), world * (world + 1) / 2.0);
        Tensor b = Tensor::full({10}, DType::Float64, rank);
        g.broadcast(b, world - 1);
        ASSERT_EQ(b.to_doubles().front(), world - 1.0);
      }
    }
  }));
  for (int r = 1; r < world; ++r) EXPECT_EQ(got[r], got[0]) << "rank " << r << " differs from rank 0";
}

INSTANTIATE_TEST_SUITE_P(Ranks, GlooLargeAllReduceTest, ::testing::Values(2, 3, 4));

// The asynchronous ring times out too: among three ranks, one that never joins a 9 MB all-reduce
// makes the other two fail within the timeout, with the collective named.
TEST(GlooGroup, ALargeAllReduceARankNeverJoinsTimesOut) {
  const int64_t n = (8 << 20) / 4 + 1000;
  auto start = std::chrono::steady_clock::now();
  std::atomic<int> gave_up{0};
  std::vector<std::string> errors = with_ranks(
      3,
      [&](int rank, ProcessGroup& g) {
        g.barrier();
        if (rank == 2) {  // alive and connected until the other two have given up on it
          EXPECT_TRUE(dpv::testing::wait_until([&] { return gave_up.load() == 2; }, milliseconds(12000)));
          return;
        }
        Tensor t = Tensor::zeros({n}, DType::Float32);
        try {
          g.all_reduce_sum(t);
        } catch (...) {
          ++gave_up;
          throw;
        }
      },
      milliseconds(1000));
  for (int r = 0; r < 2; ++r)
    EXPECT_NE(errors[r].find("gloo all_reduce of " + std::to_string(n * 4) + " bytes failed on rank " +
                             std::to_string(r) + " of 3 (timeout 1 s"),
              std::string::npos)
        << errors[r];
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
}

TEST(GlooGroup, WrongShapesAndDevicesAreErrors) {
  std::vector<std::string> errors = with_ranks(2, [&](int, ProcessGroup& g) {
    g.barrier();  // both ranks connected: one failing early must not break the other's rendezvous
    Tensor in = Tensor::zeros({2}, DType::Float32);
    Tensor out = Tensor::zeros({3}, DType::Float32);
    g.all_gather(in, out);
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("all_gather: the output must hold world size x"), std::string::npos) << e;
}

// One piece (1000 floats) and several (100000 floats, 400 KB): Gloo's synchronous read times out
// ("Read timeout") or sees the closed connection, and the error names the collective.
class GlooTimeoutTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(GlooTimeoutTest, ARankThatNeverCallsMakesTheOthersTimeOut) {
  const int64_t n = GetParam();
  auto start = std::chrono::steady_clock::now();
  double rank0_waited = 0;
  std::atomic<bool> rank0_gave_up{false};
  std::vector<std::string> errors = with_ranks(
      2,
      [&](int rank, ProcessGroup& g) {
        g.barrier();
        if (rank == 1) {  // alive, connected, but never joins the all-reduce, until rank 0 gives up
          EXPECT_TRUE(dpv::testing::wait_until([&] { return rank0_gave_up.load(); }, milliseconds(12000)));
          return;
        }
        Tensor t = Tensor::zeros({n}, DType::Float32);
        auto t0 = std::chrono::steady_clock::now();
        try {
          g.all_reduce_sum(t);
        } catch (...) {
          rank0_waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
          rank0_gave_up = true;
          throw;
        }
      },
      milliseconds(1000));
  double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(errors[0].find("gloo all_reduce of " + std::to_string(n * 4) + " bytes failed on rank 0 of 2 (timeout 1 s"),
            std::string::npos)
      << errors[0];
  EXPECT_NE(errors[0].find("Read timeout"), std::string::npos) << errors[0];
  EXPECT_GE(rank0_waited, 0.9);
  EXPECT_LT(rank0_waited, 2.4);
  EXPECT_LT(waited, 15.0);
}

INSTANTIATE_TEST_SUITE_P(OneAndManyPieces, GlooTimeoutTest, ::testing::Values(1000, 100000));

TEST_P(GlooTimeoutTest, ARankThatStopsMakesTheOthersFailFast) {
  const int64_t n = GetParam();
  auto start = std::chrono::steady_clock::now();
  std::atomic<bool> rank1_left{false};
  std::vector<std::string> errors = with_ranks(2, [&](int rank, ProcessGroup& g) {
    g.barrier();
    if (rank == 1) {  // its group is destroyed: the connection closes
      rank1_left = true;
      return;
    }
    EXPECT_TRUE(dpv::testing::wait_until([&] { return rank1_left.load(); }));
    Tensor t = Tensor::zeros({n}, DType::Float32);
    g.all_reduce_sum(t);
  });
  EXPECT_NE(errors[0].find("gloo all_reduce of " + std::to_string(n * 4) + " bytes failed on rank 0 of 2"),
            std::string::npos)
      << errors[0];
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 15.0);
}

TEST(GlooGroup, UnknownInterfaceIsAClearError) {
  TcpStoreServer server("127.0.0.1", 0, 1);
  TcpStore store("127.0.0.1", server.port(), 1, milliseconds(2000));
  GlooOptions o;
  o.iface = "nosuchif0";
  try {
    make_gloo_group(store, 0, 1, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("interface 'nosuchif0'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace dpv::dist

#include "engine/process_groups/gather_bytes.h"

namespace dpv::dist {
namespace {

TEST(GatherBytes, EveryRanksBlobInRankOrder) {
  std::vector<std::vector<std::string>> got(3);
  expect_no_errors(with_ranks(3, [&](int rank, ProcessGroup& g) {
    std::string mine(static_cast<size_t>(rank * 1000 + 3), static_cast<char>('a' + rank));
    if (rank == 1) mine = std::string("\0bin\xff", 5);  // any bytes, including zeros
    got[rank] = all_gather_bytes(g, mine);
  }));
  for (int r = 0; r < 3; ++r) {
    ASSERT_EQ(got[r].size(), 3u);
    EXPECT_EQ(got[r][0], std::string(3, 'a'));
    EXPECT_EQ(got[r][1], std::string("\0bin\xff", 5));
    EXPECT_EQ(got[r][2], std::string(2003, 'c'));
  }
}

}  // namespace
}  // namespace dpv::dist
