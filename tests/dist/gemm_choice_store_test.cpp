// Launched ranks agree on the CPU backend's GEMM library per product shape through a real TCP
// store, as `dpv launch`'s workers do (cli/gemm_sharing.cpp wires RankZeroGemmSharing to the job's
// store the same way): rank 1 waits for the shape's key; rank 0 times the shape and publishes; rank 1
// takes rank 0's library although its own timings would pick the other, and never times.
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/core_backends.h"
#include "engine/cpu/gemm_choice.h"
#include "engine/process_groups/multiprocess/tcp_store.h"

namespace dpv::dist {
namespace {

using std::chrono::milliseconds;

// Rank `rank`'s chooser, sharing through `store`; its timer says `faster` wins and counts its runs.
struct Rank {
  Rank(int rank, TcpStore& store, CpuGemmLibrary faster)
      : sharing(
            rank, [&store](const std::string& k, const std::string& v) { store.set(k, to_bytes(v)); },
            [&store](const std::string& k) { return to_string(store.get(k)); }),
        chooser(/*onednn_built=*/true, CpuGemmPin::Auto),
        faster_(faster) {
    chooser.set_sharing(&sharing);
  }
  CpuGemmLibrary choose(const CpuGemmShape& shape) {
    return chooser.choose(shape, [this](CpuGemmLibrary library) {
      ++runs;
      return library == faster_ ? 1e-3 : 2e-3;
    });
  }
  RankZeroGemmSharing sharing;
  cpu::GemmChooser chooser;
  std::atomic<int> runs{0};

 private:
  CpuGemmLibrary faster_;
};

TEST(GemmChoiceStore, RankOneTakesRankZerosChoiceThroughTheStore) {
  const CpuGemmShape shape{false, true, 32, 32, 32, true};
  TcpStoreServer server("127.0.0.1", 0, 2);
  TcpStore store0("127.0.0.1", server.port(), 2, milliseconds(10000));
  TcpStore store1("127.0.0.1", server.port(), 2, milliseconds(10000));
  Rank rank0(0, store0, CpuGemmLibrary::Onednn), rank1(1, store1, CpuGemmLibrary::OpenBlas);
  CpuGemmLibrary got1 = CpuGemmLibrary::OpenBlas;
  std::thread waiting([&] { got1 = rank1.choose(shape); });  // waits in the store's get if rank 0 has not published
  const CpuGemmLibrary got0 = rank0.choose(shape);
  waiting.join();
  EXPECT_EQ(got0, CpuGemmLibrary::Onednn);
  EXPECT_EQ(got1, CpuGemmLibrary::Onednn);
  EXPECT_GT(rank0.runs.load(), 0);
  EXPECT_EQ(rank1.runs.load(), 0);
  EXPECT_EQ(to_string(store1.get("dpv/gemm/NT:32x32x32:0")), "onednn");
  // Remembered on both: the next product of the shape asks nobody.
  EXPECT_EQ(rank1.choose(shape), CpuGemmLibrary::Onednn);
  EXPECT_EQ(rank1.chooser.choices(), rank0.chooser.choices());
}

}  // namespace
}  // namespace dpv::dist
