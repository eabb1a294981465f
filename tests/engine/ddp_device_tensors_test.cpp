// Launched DDP and ZeRO ranks hand the process group only tensors on their device, as the NCCL
// group requires (it rejects host memory, as PyTorch's does): run_rank_steps and
// gather_rank_results, the code a launched rank runs, go through DeviceOnlyGroup (the NCCL group's
// host-memory check around the in-process group) and give what the plain group gives.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "dp_test_support.h"
#include "engine/ddp/ddp_output.h"
#include "engine/ddp/ddp_rank.h"
#include "engine/ddp/gather_rank_results.h"
#include "engine/process_groups/in_process_group.h"
#include "tests/support/device_only_group.h"

namespace dpv {
namespace {

using testing::Batch;
using testing::mlp_bn;
using testing::random_batch;

// Rank 0's gathered results of `steps` iterations on `world` ranks, each rank's group wrapped when `device_only`.
std::vector<DdpRankResult> launched_results(const DdpOptions& o, int world, bool device_only) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(5);
  const Batch batch = random_batch(9, 4, 3, 17);
  auto devices = DeviceSet::create("cpu:" + std::to_string(world));
  auto groups = make_in_process_group(world);
  const Model model(spec);
  std::vector<DdpRankResult> gathered;
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ProcessGroup& plain = *groups[static_cast<size_t>(r)];
      testing::DeviceOnlyGroup checked(plain);
      ProcessGroup& g = device_only ? static_cast<ProcessGroup&>(checked) : plain;
      try {
        const DdpRankResult mine = run_rank_steps(g, devices->shared(r), model, state, batch.input, batch.target, o, 2);
        std::vector<DdpRankResult> all = gather_rank_results(g, mine, devices->shared(r));
        if (r == 0) gathered = std::move(all);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
        abort_in_process_group(plain, e.what());  // the other ranks stop too
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  return gathered;
}

TEST(DdpDeviceTensors, LaunchedRanksGiveTheNcclGroupOnlyDeviceTensors) {
  struct Case {
    const char* name;
    bool sync_bn;
    int zero_stage;
  };
  for (const Case c : {Case{"ddp", false, 0}, Case{"sync_bn", true, 0}, Case{"zero 1", false, 1},
                       Case{"zero 2", false, 2}, Case{"zero 3", false, 3}}) {
    SCOPED_TRACE(c.name);
    DdpOptions o;
    o.optimizer.momentum = 0.9;
    o.sync_bn = c.sync_bn;
    o.zero_stage = c.zero_stage;
    const std::vector<DdpRankResult> plain = launched_results(o, 2, false);
    const std::vector<DdpRankResult> checked = launched_results(o, 2, true);
    ASSERT_EQ(plain.size(), 2u);
    ASSERT_EQ(checked.size(), 2u);
    const auto a = ddp_step_output(plain, DType::Float64), b = ddp_step_output(checked, DType::Float64);
    ASSERT_EQ(a.tensors.names(), b.tensors.names());
    for (const auto& [name, t] : a.tensors.items()) EXPECT_EQ(t.to_doubles(), b.tensors.at(name).to_doubles()) << name;
  }
}

}  // namespace
}  // namespace dpv
