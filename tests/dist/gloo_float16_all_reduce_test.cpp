// The Gloo group's float16 all-reduce (Gloo's own, as torch 1.13 runs a float16 tensor) against
// ProcessGroup's emulation (every rank's values all-gathered, summed in Gloo's ring order) and the
// in-process ring, bit for bit, on random data of odd and even lengths; its report says 2 bytes
// per element, and the bytes this process's TCP sockets really sent halve against float32's.
// Ranks are threads of this test over 127.0.0.1 (tests/dist/gloo_ranks.h).
#include <linux/tcp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/float16.h"
#include "engine/process_groups/in_process_group.h"
#include "tests/dist/gloo_ranks.h"

namespace dpv::dist {
namespace {

using testing::expect_no_errors;
using testing::with_ranks;
using Halves = std::vector<uint16_t>;  // [n] float16 bits

const std::vector<int64_t> kLengths{1, 2, 3, 5, 7, 8, 13, 1001, 4096, 65537};

// Rank `rank`'s values for length n: normal values of several magnitudes, so partial sums round
// (and some land in float16's subnormals), all finite so no sum is a NaN (whose bits Gloo and
// c10 write differently: 0x7FFF and 0x7E00).
Halves random_halves(int rank, int64_t n) {
  std::mt19937 gen(static_cast<uint32_t>(1000 * rank + n));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float scales[] = {1e-6f, 1e-3f, 1.0f, 100.0f};
  Halves h(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = float16_bits_from_float(normal(gen) * scales[i % 4]);
  return h;
}

// Each rank's result of the in-process ring (ProcessGroup's default) on random_halves.
std::vector<Halves> in_process_results(int world, int64_t n) {
  auto group = make_in_process_group(world);
  std::vector<Halves> results(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      results[static_cast<size_t>(r)] = random_halves(r, n);
      group[static_cast<size_t>(r)]->all_reduce_sum_float16(results[static_cast<size_t>(r)].data(), n);
    });
  for (auto& t : threads) t.join();
  return results;
}

class GlooFloat16AllReduceTest : public ::testing::TestWithParam<int> {};

TEST_P(GlooFloat16AllReduceTest, GlooBitsEqualTheEmulationAndTheInProcessRing) {
  const int world = GetParam();
  std::mutex mu;
  std::vector<std::vector<Halves>> gloo(kLengths.size(), std::vector<Halves>(static_cast<size_t>(world)));
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    for (size_t k = 0; k < kLengths.size(); ++k) {
      const int64_t n = kLengths[k];
      Halves real = random_halves(rank, n), emulated = real;
      const CollectiveReport r = g.all_reduce_sum_float16(real.data(), n);
      g.ProcessGroup::all_reduce_sum_float16(emulated.data(), n);  // the default, over Gloo's all_gather
      EXPECT_EQ(real, emulated) << "n " << n << " rank " << rank;
      EXPECT_EQ(r.op, CollectiveOp::AllReduce);
      EXPECT_EQ(r.ranks, world);
      EXPECT_EQ(r.bytes, static_cast<size_t>(2 * n)) << "2 bytes per element";
      std::lock_guard<std::mutex> lock(mu);
      gloo[k][static_cast<size_t>(rank)] = real;
    }
  }));
  for (size_t k = 0; k < kLengths.size(); ++k) {
    const std::vector<Halves> ring = in_process_results(world, kLengths[k]);
    for (int r = 0; r < world; ++r) {
      EXPECT_EQ(gloo[k][static_cast<size_t>(r)], gloo[k][0]) << "every rank ends with the same bits";
      EXPECT_EQ(ring[static_cast<size_t>(r)], gloo[k][0]) << "in-process ring, n " << kLengths[k] << " rank " << r;
    }
    // The sum is not a copy of one rank's values (a test that could not fail otherwise).
    EXPECT_NE(gloo[k][0], random_halves(0, kLengths[k])) << "n " << kLengths[k];
  }
}

TEST(GlooFloat16AllReduce, EmptyAndSingleRankLeaveTheValues) {
  expect_no_errors(with_ranks(1, [&](int, ProcessGroup& g) {
    Halves h = random_halves(0, 5);
    const Halves before = h;
    EXPECT_EQ(g.all_reduce_sum_float16(h.data(), 5).bytes, 10u);
    EXPECT_EQ(h, before);
  }));
  expect_no_errors(with_ranks(2, [&](int, ProcessGroup& g) { EXPECT_EQ(g.all_reduce_sum_float16(nullptr, 0).bytes, 0u); }));
}

// Bytes this process's TCP sockets have sent so far (every rank here is a thread of this process,
// so each byte between ranks counts once); -1 when the kernel does not report tcpi_bytes_sent.
int64_t tcp_bytes_sent_by_this_process() {
  int64_t total = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    std::error_code ec;
    const std::string target = std::filesystem::read_symlink(entry.path(), ec).string();
    if (ec || target.rfind("socket:", 0) != 0) continue;
    tcp_info info{};
    socklen_t len = sizeof(info);
    if (getsockopt(std::stoi(entry.path().filename().string()), IPPROTO_TCP, TCP_INFO, &info, &len) != 0) continue;
    if (len < offsetof(tcp_info, tcpi_bytes_sent) + sizeof(info.tcpi_bytes_sent)) return -1;
    total += static_cast<int64_t>(info.tcpi_bytes_sent);
  }
  return total;
}

TEST_P(GlooFloat16AllReduceTest, Float16SendsHalfTheBytesOfFloat32) {
  if (tcp_bytes_sent_by_this_process() < 0) GTEST_SKIP() << "this kernel does not report tcpi_bytes_sent";
  const int world = GetParam();
  const int64_t n = int64_t{1} << 20;
  int64_t float32_sent = 0, float16_sent = 0;
  expect_no_errors(with_ranks(world, [&](int rank, ProcessGroup& g) {
    // Rank 0 reads the counters while the others wait in a barrier, so the window holds the
    // collective and a barrier's few bytes, and no rank closes its sockets (leaving the group)
    // before rank 0 has read them.
    auto measure = [&](const std::function<void()>& collective) {
      int64_t sent = 0;
      g.barrier();
      if (rank == 0) sent = -tcp_bytes_sent_by_this_process();
      g.barrier();
      collective();
      g.barrier();
      if (rank == 0) sent += tcp_bytes_sent_by_this_process();
      g.barrier();
      return sent;
    };
    Tensor floats = Tensor::full({n}, DType::Float32, 0.5);  // [n] float32
    Halves halves(static_cast<size_t>(n), float16_bits_from_float(0.5f));
    const int64_t f32 = measure([&] { g.all_reduce_sum(floats); });
    const int64_t f16 = measure([&] { g.all_reduce_sum_float16(halves.data(), n); });
    EXPECT_EQ(floats.to_doubles()[0], 0.5 * world);
    EXPECT_EQ(float_from_float16_bits(halves[0]), 0.5f * static_cast<float>(world));
    if (rank == 0) float32_sent = f32, float16_sent = f16;
  }));
  // A ring all-reduce sends 2 (world - 1) / world of the buffer from each rank.
  const double payload16 = 2.0 * (world - 1) * static_cast<double>(2 * n);
  EXPECT_GE(static_cast<double>(float16_sent), payload16) << "float16 bytes sent";
  EXPECT_LE(static_cast<double>(float16_sent), 1.05 * payload16) << "float16 bytes sent";
  EXPECT_NEAR(static_cast<double>(float16_sent) / static_cast<double>(float32_sent), 0.5, 0.03)
      << float16_sent << " bytes for float16 against " << float32_sent << " for float32";
}

INSTANTIATE_TEST_SUITE_P(Worlds, GlooFloat16AllReduceTest, ::testing::Values(2, 3));

}  // namespace
}  // namespace dpv::dist
