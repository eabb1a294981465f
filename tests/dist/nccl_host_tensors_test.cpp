// The callers that may hand their tensors to an NCCL process group, run on the CPU through
// DeviceOnlyGroup (the NCCL group's host-memory check around a Gloo group): `dpv bench
// allreduce`'s measurement and its per-rank times (max_over_ranks), and the byte gathering that
// launched DDP's results and checkpoint choice go through (all_gather_bytes). Each must put every
// tensor on the rank's device; the same calls with host memory fail with NCCL's own message.
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/device.h"
#include "engine/error.h"
#include "engine/process_groups/allreduce_bench.h"
#include "engine/process_groups/gather_bytes.h"
#include "tests/support/device_only_group.h"
#include "tests/dist/gloo_ranks.h"

namespace dpv::dist {
namespace {

using dpv::testing::DeviceOnlyGroup;
using testing::expect_no_errors;
using testing::with_ranks;

const std::string kNcclRejects = "the tensor must be on this rank's GPU";

TEST(NcclHostTensors, TheStandInRejectsHostMemoryWithTheNcclGroupsMessage) {
  const std::vector<std::string> errors = with_ranks(2, [](int, ProcessGroup& gloo) {
    DeviceOnlyGroup g(gloo);
    max_over_ranks(g, 1.0, nullptr);  // host memory, as the bench's per-rank times once were
  });
  for (const std::string& e : errors) {
    EXPECT_NE(e.find("nccl all_gather: " + kNcclRejects), std::string::npos) << e;
    EXPECT_NE(e.find("DPV_BACKEND=gloo"), std::string::npos) << e;
  }
}

TEST(NcclHostTensors, MaxOverRanksOnTheRanksDeviceGivesTheLargest) {
  expect_no_errors(with_ranks(3, [](int rank, ProcessGroup& gloo) {
    DeviceOnlyGroup g(gloo);
    const std::shared_ptr<DeviceSet> devices = DeviceSet::create("cpu:1");
    EXPECT_EQ(max_over_ranks(g, 10.0 - rank * 3.5, devices->shared(0)), 10.0);
    EXPECT_EQ(max_over_ranks(g, rank * 0.25, devices->shared(0)), 0.5);
  }));
}

TEST(NcclHostTensors, TheAllreduceBenchPutsEveryTensorOnTheDevice) {
  AllreduceBenchPlan plan;
  plan.min_bytes = 4096;
  plan.max_bytes = 65536;
  plan.factor = 4;
  plan.iters = 2;
  plan.warmup = 1;
  std::vector<std::vector<AllreduceSizeResult>> results(2);
  expect_no_errors(with_ranks(2, [&](int rank, ProcessGroup& gloo) {
    DeviceOnlyGroup g(gloo);
    const std::shared_ptr<DeviceSet> devices = DeviceSet::create("cpu:1");
    int seen = 0;
    results[static_cast<size_t>(rank)] =
        measure_allreduce(g, devices->shared(0), plan, [&](const AllreduceSizeResult&) { ++seen; });
    EXPECT_EQ(seen, 3);
  }));
  for (const auto& rank_results : results) {
    ASSERT_EQ(rank_results.size(), 3u);
    EXPECT_EQ(rank_results[0].bytes, 4096u);
    EXPECT_EQ(rank_results[2].bytes, 65536u);
    for (const AllreduceSizeResult& r : rank_results) {
      EXPECT_GT(r.seconds, 0);
      EXPECT_GE(r.iters, 1);
      EXPECT_LE(r.iters, plan.iters);
      EXPECT_DOUBLE_EQ(r.busbw, r.algbw);  // 2(world-1)/world = 1 for two ranks
    }
  }
  // Every rank reports the slowest rank's time, so the ranks agree.
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(results[0][i].seconds, results[1][i].seconds);
}

TEST(NcclHostTensors, TheAllreduceBenchOnHostMemoryFailsAsOnNccl) {
  AllreduceBenchPlan plan;
  plan.min_bytes = plan.max_bytes = 4096;
  const std::vector<std::string> errors = with_ranks(2, [&](int, ProcessGroup& gloo) {
    DeviceOnlyGroup g(gloo);
    measure_allreduce(g, nullptr, plan, nullptr);
  });
  for (const std::string& e : errors) EXPECT_NE(e.find("nccl all_reduce: " + kNcclRejects), std::string::npos) << e;
}

// Launched DDP's result gathering (gather_rank_results) and the checkpoint agreement of `dpv train
// --ddp` move their bytes with all_gather_bytes on LaunchedRank::comm_device.
TEST(NcclHostTensors, GatheredBytesTravelOnTheDevice) {
  expect_no_errors(with_ranks(2, [](int rank, ProcessGroup& gloo) {
    DeviceOnlyGroup g(gloo);
    const std::shared_ptr<DeviceSet> devices = DeviceSet::create("cpu:1");
    const std::string mine = rank == 0 ? "rank zero's result" : "one";
    const std::vector<std::string> all = all_gather_bytes(g, mine, devices->shared(0));
    ASSERT_EQ(all.size(), 2u);
    EXPECT_EQ(all[0], "rank zero's result");
    EXPECT_EQ(all[1], "one");
    EXPECT_THROW(all_gather_bytes(g, mine, nullptr), Error);  // host memory: what NCCL would reject
  }));
}

}  // namespace
}  // namespace dpv::dist
