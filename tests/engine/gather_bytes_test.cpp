// all_gather_bytes against a peer that announces a size it cannot mean: 2^40 bytes used to go
// straight into the padded buffers' allocation (std::bad_alloc, or a terabyte asked of the device).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/process_groups/gather_bytes.h"
#include "tests/support/errors.h"

namespace dpv {
namespace {

using testing::error_of;

// Rank 0 of a two-rank group whose other rank is simulated: its announced size is `peer_size`, and
// its blob is `peer_bytes` (zero padded as the real peer would send it).
class TwoRankGroup final : public ProcessGroup {
 public:
  TwoRankGroup(int64_t peer_size, std::string peer_bytes) : peer_size_(peer_size), peer_bytes_(std::move(peer_bytes)) {}
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string backend() const override { return "test"; }
  CollectiveReport all_reduce_sum(Tensor&, std::vector<RingStep>*) override { return {}; }
  CollectiveReport broadcast(Tensor&, int) override { return {}; }
  CollectiveReport reduce_scatter_sum(const Tensor&, Tensor&, std::vector<RingStep>*) override { return {}; }
  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>*) override {
    ++gathers;
    const size_t half = in.nbytes();  // in: [n] int64, out: [2 * n]
    std::memcpy(out.raw(), in.raw(), half);
    char* peer = static_cast<char*>(out.raw()) + half;
    if (gathers == 1) {
      std::memcpy(peer, &peer_size_, sizeof peer_size_);  // the sizes
    } else {
      std::memset(peer, 0, half);
      std::memcpy(peer, peer_bytes_.data(), std::min(half, peer_bytes_.size()));
    }
    return {};
  }
  void barrier() override {}
  int gathers = 0;

 private:
  int64_t peer_size_;
  std::string peer_bytes_;
};

TEST(GatherBytes, EveryRanksBytesComeBackInRankOrder) {
  TwoRankGroup group(11, "from rank 1");
  const std::vector<std::string> all = all_gather_bytes(group, "mine");
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0], "mine");
  EXPECT_EQ(all[1], "from rank 1");
}

TEST(GatherBytes, AnAnnouncedSizeOutsideTheLimitIsAnErrorNamingRankAndSize) {
  for (const int64_t hostile : {int64_t{1} << 40, kMaxGatheredBytesPerRank + 1, int64_t{-8}}) {
    TwoRankGroup group(hostile, "");
    const std::string msg = error_of([&] { (void)all_gather_bytes(group, "mine"); });
    EXPECT_NE(msg.find("rank 1 announced " + std::to_string(hostile) + " bytes to gather"), std::string::npos) << msg;
    EXPECT_NE(msg.find("outside 0 to 1073741824 bytes per rank"), std::string::npos) << msg;
    EXPECT_EQ(group.gathers, 1) << "the blobs were gathered after a size of " << hostile;
  }
}

}  // namespace
}  // namespace dpv
