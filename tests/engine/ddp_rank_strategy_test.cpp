// A launched DDP rank behind the strategy interface (DdpRankStrategy): ranks driven one per thread
// over an in-process group train exactly as the in-process DdpTrainer does, report every planned
// stage on their own lane (Finalize carrying the bucket all-reduces) when observed, and train on
// DistributedSampler(shuffle=False)'s rows of the global batch.
#include <gtest/gtest.h>

#include <thread>

#include "engine/datasets.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/ddp/sampler.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/model_data.h"
#include "engine/model_spec.h"

using namespace dpv;

namespace {

class Events final : public Observer {
 public:
  void on_stage(const StageEvent& event) override { events.push_back(event); }
  std::vector<StageEvent> events;
};

struct RankRun {
  std::vector<double> losses;           // one per iteration
  std::vector<double> output;           // the last iteration's
  std::vector<int64_t> rows;
  std::vector<Stage> plan;              // the observed (second) iteration's
  std::vector<StageEvent> events;
  std::string error;
};

constexpr int kWorld = 2;
constexpr int64_t kBatch = 7;  // uneven: DistributedSampler pads rank 1's shard

}  // namespace

TEST(DdpRankStrategy, TrainsAsTheInProcessRanksAndReportsEveryStage) {
  const ModelSpec spec = preset_model("mlp-bn");
  const TensorMap state = Model(spec).initial_state(5);
  const Dataset data = make_data_for_model(spec, kBatch, 6);
  DdpOptions options;
  options.bucket_cap_mb = 256.0 / (1024.0 * 1024.0);  // several buckets
  options.first_bucket_bytes = 256;

  auto groups = make_in_process_group(kWorld);
  std::vector<RankRun> runs(kWorld);
  std::vector<std::thread> threads;
  for (int r = 0; r < kWorld; ++r)
    threads.emplace_back([&, r] {
      RankRun& run = runs[static_cast<size_t>(r)];
      try {
        DdpRankStrategy strategy(*groups[static_cast<size_t>(r)], DeviceSet::create("cpu:1"), Model(spec), state, options);
        EXPECT_EQ(strategy.kind(), StrategyKind::DistributedDataParallel);
        auto first = strategy.begin_iteration(data.inputs, data.targets);  // straight through
        first->run_to_end();
        EXPECT_TRUE(first->finished());
        run.losses.push_back(first->loss());
        Events observed;
        auto second = strategy.begin_iteration(data.inputs, data.targets, &observed);
        EXPECT_THROW(second->set_snapshots(true), Error);
        run.plan = second->plan();
        second->run_to_end();
        run.losses.push_back(second->loss());
        run.output = second->output().to_doubles();
        run.rows = second->output_rows();
        run.events = observed.events;
      } catch (const Error& e) {
        run.error = e.what();
      }
    });
  for (auto& t : threads) t.join();

  DdpTrainer reference(DeviceSet::create("cpu:2"), Model(spec), state, options);
  std::vector<std::vector<double>> reference_losses;
  for (int i = 0; i < 2; ++i) {
    DdpIteration it(reference, data.inputs, data.targets);
    it.run_to_end();
    reference_losses.push_back(it.rank_losses());
  }

  SamplerOptions sampler;
  sampler.shuffle = false;
  for (int r = 0; r < kWorld; ++r) {
    const RankRun& run = runs[static_cast<size_t>(r)];
    ASSERT_EQ(run.error, "") << "rank " << r;
    EXPECT_EQ(run.rows, distributed_sampler_indices(kBatch, kWorld, r, sampler));
    ASSERT_EQ(run.losses.size(), 2u);
    for (size_t i = 0; i < 2; ++i) EXPECT_NEAR(run.losses[i], reference_losses[i][static_cast<size_t>(r)], 1e-12) << r;
    const std::vector<double> expected_output = reference.rank(r).output().to_doubles();
    ASSERT_EQ(run.output.size(), expected_output.size());
    for (size_t i = 0; i < expected_output.size(); ++i) EXPECT_NEAR(run.output[i], expected_output[i], 1e-12);

    // Every planned stage, in order, on this rank's one lane; mlp-bn has buffers to broadcast.
    ASSERT_EQ(run.events.size(), run.plan.size());
    EXPECT_EQ(run.plan.front().kind, StageKind::BroadcastBuffers);
    EXPECT_EQ(run.plan.back().kind, StageKind::Step);
    for (size_t i = 0; i < run.events.size(); ++i) {
      const StageEvent& e = run.events[i];
      EXPECT_EQ(e.index, static_cast<int>(i));
      EXPECT_EQ(e.stage.kind, run.plan[i].kind);
      EXPECT_EQ(e.stage.title, run.plan[i].title);
      EXPECT_LE(e.t_start, e.t_end);
      ASSERT_EQ(e.devices.size(), 1u);
      EXPECT_EQ(e.devices[0].label.rfind("rank " + std::to_string(r) + " (", 0), 0u) << e.devices[0].label;
      if (i > 0) {
        EXPECT_GE(e.t_start, run.events[i - 1].t_end);
      }
      if (e.stage.kind == StageKind::Finalize) {
        EXPECT_GT(e.comm.size(), 1u);  // every bucket's all-reduce
        EXPECT_EQ(e.collectives.size(), e.comm.size());
      } else {
        EXPECT_TRUE(e.comm.empty());
      }
    }
  }
}
