// course/ring_demo.h and course/ddp_compare.h against the arithmetic they must show: the ring's
// partial sums are sums of the ranks' starting values, DataParallel sums and DDP averages, and
// without BatchNorm the three ways of training agree.
#include <gtest/gtest.h>

#include <cmath>

#include "course/ddp_compare.h"
#include "course/ring_demo.h"
#include "course/sample_program.h"
#include "engine/device.h"
#include "engine/run/run_spec.h"
#include "engine/strategy.h"
#include "engine/error.h"

namespace dpv::course {
namespace {

double sum(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// Every cell of every frame holds the sum of its contributors' starting values, each rank ends
// the reduce-scatter with one complete chunk, and every chunk is complete everywhere at the end.
void expect_partial_sums(const RingDemo& demo, int W) {
  ASSERT_EQ(demo.frames.size(), static_cast<size_t>(1 + 2 * (W - 1)));
  ASSERT_EQ(demo.chunk_offsets.size(), static_cast<size_t>(W + 1));
  EXPECT_EQ(demo.chunk_offsets.back(), demo.numel);
  EXPECT_GT(demo.numel, 0);
  const RingFrame& start = demo.frames.front();
  for (size_t f = 0; f < demo.frames.size(); ++f) {
    const RingFrame& frame = demo.frames[f];
    EXPECT_EQ(frame.moves.size(), f == 0 ? 0u : static_cast<size_t>(W));
    for (int r = 0; r < W; ++r)
      for (int c = 0; c < W; ++c) {
        const auto& who = frame.contributors[static_cast<size_t>(r)][static_cast<size_t>(c)];
        for (int64_t i = demo.chunk_offsets[static_cast<size_t>(c)]; i < demo.chunk_offsets[static_cast<size_t>(c) + 1]; ++i) {
          double expect = 0;
          for (int q : who) expect += start.values[static_cast<size_t>(q)][static_cast<size_t>(i)];
          EXPECT_NEAR(frame.values[static_cast<size_t>(r)][static_cast<size_t>(i)], expect, 1e-6 * (1 + std::fabs(expect)))
              << "frame " << f << " rank " << r << " chunk " << c;
        }
      }
  }
  for (int r = 0; r < W; ++r)
    for (int c = 0; c < W; ++c)
      EXPECT_EQ(demo.frames.back().contributors[static_cast<size_t>(r)][static_cast<size_t>(c)].size(), static_cast<size_t>(W));
  for (int r = 0; r < W; ++r) {
    int complete = 0;
    for (int c = 0; c < W; ++c)
      complete += demo.frames[static_cast<size_t>(W - 1)].contributors[static_cast<size_t>(r)][static_cast<size_t>(c)].size() ==
                  static_cast<size_t>(W);
    EXPECT_EQ(complete, 1) << "rank " << r;
  }
}

TEST(RingDemo, EveryCellIsTheSumOfItsContributorsStartingValues) {
  RingDemoConfig config;
  config.run.devices = "cpu:4";
  const RingDemo demo = run_ring_demo(config);
  const int W = 4;
  expect_partial_sums(demo, W);
  // The cost formula: each rank sends 2(W-1)/W of the bucket (up to the uneven chunks).
  EXPECT_NEAR(static_cast<double>(demo.bytes_sent_per_rank), demo.formula_bytes, 4.0 * 2 * (W - 1));
  EXPECT_GT(demo.seconds, 0);

  // DataParallel's contrast: device 0 holds the SUM of the replicas' gradients; with SimpleModel (no
  // BatchNorm) and equal shards it equals DDP's MEAN of the per-rank gradients.
  const DpReduceDemo& dp = demo.dp;
  ASSERT_EQ(dp.replica_grads.size(), static_cast<size_t>(W));
  ASSERT_FALSE(dp.reduced.empty());
  for (size_t i = 0; i < dp.reduced.size(); ++i) {
    double s = 0;
    for (const auto& g : dp.replica_grads) s += g.at(i);
    EXPECT_NEAR(dp.reduced[i], s, 1e-6);
    EXPECT_NEAR(dp.reduced[i], demo.frames.back().values[0].at(i), 1e-6) << "element " << i;
  }
  EXPECT_GT(dp.bytes_to_device0, 0u);
}

TEST(RingDemo, ABucketOfAModelWithBatchNormOnThreeRanks) {
  RingDemoConfig config;
  config.run.preset = "mlp-bn";
  config.run.devices = "cpu:3";
  config.run.batch = 24;
  const RingDemo demo = run_ring_demo(config);
  expect_partial_sums(demo, 3);
  EXPECT_FALSE(demo.params.empty());
  EXPECT_EQ(demo.dp.replica_grads.size(), 3u);
}

// The ring all-reduces the Iteration page's gradients: the same RunSpec and the same batch
// (program_data) run by the strategy the page makes give, after iteration 1, exactly the mean the
// ring ends with, and the ring's starting values add up to it (each rank puts g_r / W in).
TEST(RingDemo, AllReducesTheIterationPagesIterationOneGradients) {
  RingDemoConfig config;
  config.run.preset = "simple";
  config.run.devices = "cpu:4";
  config.run.batch = 32;
  config.run.seed = 0;
  const RingDemo demo = run_ring_demo(config);

  for (const StrategyKind kind : {StrategyKind::DistributedDataParallel, StrategyKind::DataParallel}) {
    RunSpec run = config.run;
    run.strategy = kind;
    const std::unique_ptr<Strategy> strategy = make_strategy(run, DeviceSet::create(run.devices));
    const Dataset batch = program_data(run.preset, run.batch, run.seed);
    strategy->begin_iteration(batch.inputs, batch.targets)->run_to_end();
    std::vector<double> grads;  // the bucket's parameters' gradients, flattened in bucket order
    for (const std::string& name : demo.params) {
      const std::vector<double> g = strategy->tensors().grads->at(name).to_doubles();
      grads.insert(grads.end(), g.begin(), g.end());
    }
    const std::vector<double>& ring_result = demo.frames.back().values[0];
    ASSERT_EQ(grads.size(), ring_result.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      double inputs = 0;
      for (const auto& rank : demo.frames.front().values) inputs += rank[i];
      EXPECT_NEAR(ring_result[i], grads[i], 1e-5) << strategy_name(kind) << " element " << i;
      EXPECT_NEAR(inputs, grads[i], 1e-5) << strategy_name(kind) << " element " << i;
    }
  }
}

TEST(RingDemo, RefusesOneRankAndTooSmallABatch) {
  RingDemoConfig one;
  one.run.devices = "cpu:1";
  EXPECT_THROW(run_ring_demo(one), Error);
  RingDemoConfig small;
  small.run.batch = 2;
  EXPECT_THROW(run_ring_demo(small), Error);
}

TEST(DdpCompare, WithoutBatchNormAllThreeTrainAlike) {
  CompareConfig c;
  c.run.preset = "simple";
  c.run.devices = "cpu:2";
  c.run.batch = 8;
  c.iterations = 3;
  c.max_speedup_devices = 2;
  c.speedup_iters = 1;
  const CompareResult r = run_comparison(c);
  EXPECT_FALSE(r.has_batchnorm);
  ASSERT_EQ(r.one.loss.size(), 3u);
  ASSERT_EQ(r.dp.loss.size(), 3u);
  ASSERT_EQ(r.ddp.loss.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(r.dp.loss[static_cast<size_t>(i)], r.one.loss[static_cast<size_t>(i)], 1e-5);
    EXPECT_NEAR(r.ddp.loss[static_cast<size_t>(i)], r.one.loss[static_cast<size_t>(i)], 1e-5);
    EXPECT_LT(r.dp.max_param_diff[static_cast<size_t>(i)], 1e-5);
    EXPECT_LT(r.ddp.max_param_diff[static_cast<size_t>(i)], 1e-5);
    EXPECT_GT(r.dp.parts[static_cast<size_t>(i)].total, 0);
  }
  EXPECT_EQ(r.ddp_padding, 0);
  // Sum versus mean: DP's device 0 holds the sum of the replicas' gradients, DDP the mean of the
  // ranks' (each rank puts g_r / W into the bucket, the ring sums them); both equal one device's.
  const SumVsMean& s = r.sum_mean;
  ASSERT_EQ(s.dp_replicas.size(), 2u);
  ASSERT_EQ(s.ddp_bucket.size(), 2u);
  EXPECT_NEAR(s.dp_reduced, sum(s.dp_replicas), 1e-6);
  EXPECT_NEAR(s.ddp_reduced, sum(s.ddp_bucket), 1e-6);
  EXPECT_NEAR(s.dp_reduced, s.one_device, 1e-6);
  EXPECT_NEAR(s.ddp_reduced, s.one_device, 1e-6);
  // DataParallel's device 0 holds more than device 1 at its peak (the gathered output, the loss,
  // the reduced gradients); DDP's ranks hold the same, by kind, with their buckets.
  ASSERT_EQ(r.dp.peak_memory.size(), 2u);
  EXPECT_GT(r.dp.peak_memory[0], r.dp.peak_memory[1]);
  ASSERT_EQ(r.dp.peak_parts.size(), 2u);
  ASSERT_EQ(r.ddp.peak_parts.size(), 2u);
  EXPECT_GT(r.dp.peak_parts[0].total(), r.dp.peak_parts[1].total());
  EXPECT_GT(r.dp.peak_parts[0].output, 0) << "the gathered output on device 0";
  EXPECT_EQ(r.dp.peak_parts[1].output, 0);
  for (size_t d = 0; d < 2; ++d) {
    const dpv::MemoryBreakdown& m = r.ddp.peak_parts[d];
    EXPECT_EQ(m.output, 0) << "rank " << d;
    EXPECT_GT(m.buckets, 0) << "rank " << d;
    EXPECT_GE(m.buckets, m.gradients) << "rank " << d << ": the buckets hold every gradient once";
    EXPECT_EQ(m.other, 0);
    EXPECT_EQ(m.total(), r.ddp.peak_parts[0].total()) << "rank " << d << ": no hump under DDP";
    EXPECT_EQ(r.dp.peak_parts[d].buckets, 0);
    EXPECT_FALSE(r.ddp.peak_stage[d].empty());
    EXPECT_GE(r.ddp.stage_temporaries[d], 0);
  }
  ASSERT_EQ(r.speedup.size(), 2u);
  EXPECT_EQ(r.speedup[1].devices, 2);
  EXPECT_NEAR(r.speedup[1].dp_speedup, r.speedup[1].one_device_s / r.speedup[1].dp_s, 1e-12);
  // Beside each multi-device point, the machine's own limit and the efficiency against it.
  EXPECT_EQ(r.speedup[0].machine_speedup, 0.0) << "one device has no reference";
  EXPECT_GT(r.speedup[1].machine_speedup, 0.0);
  EXPECT_NEAR(r.speedup[1].dp_efficiency, r.speedup[1].dp_speedup / r.speedup[1].machine_speedup, 1e-12);
  EXPECT_NEAR(r.speedup[1].ddp_efficiency, r.speedup[1].ddp_speedup / r.speedup[1].machine_speedup, 1e-12);
  bool ring_bytes = false;
  for (const auto& b : r.ddp.bytes) ring_bytes = ring_bytes || (b.what == "all-reduce grads" && b.bytes > 0);
  EXPECT_TRUE(ring_bytes);
}

TEST(DdpCompare, PerDeviceBatchNormDriftsFromOneDevice) {
  CompareConfig c;
  c.run.preset = "mlp-bn";
  c.run.devices = "cpu:2";
  c.run.batch = 16;
  c.iterations = 2;
  c.max_speedup_devices = 0;
  const CompareResult r = run_comparison(c);
  EXPECT_TRUE(r.has_batchnorm);
  EXPECT_GT(r.dp.max_param_diff.back(), 1e-6);
  EXPECT_GT(r.ddp.max_param_diff.back(), 1e-6);
  EXPECT_TRUE(r.speedup.empty());
}

// Whether the timed devices are threads sharing fewer hardware threads: a typed fact of the run.
TEST(DdpCompare, SaysWhenSimulatedDevicesOutnumberTheHardwareThreads) {
  CompareResult r;
  r.simulated = true;
  r.hardware_threads = 2;
  r.most_devices = 4;
  EXPECT_TRUE(r.threads_share_cores());
  r.hardware_threads = 8;
  EXPECT_FALSE(r.threads_share_cores());
  r.hardware_threads = 2;
  r.simulated = false;  // real GPUs: each rank has its own device
  EXPECT_FALSE(r.threads_share_cores());
  r.dp.steady.total = 1;
  r.ddp.steady.total = 4;
  EXPECT_TRUE(r.ddp_slower());
}

// A batch changed while the comparison trains is taken at the next iteration, without a restart.
TEST(DdpCompare, TakesABatchChangedWhileItTrains) {
  CompareConfig c;
  c.run.preset = "simple";
  c.run.devices = "cpu:2";
  c.run.batch = 8;
  c.iterations = 4;
  c.max_speedup_devices = 0;
  std::atomic<int64_t> live{8};
  // The learner changes the batch while iteration 2 runs (progress reports each iteration's start).
  const auto progress = [&live](const std::string& what, double) {
    if (what == "iteration 2 of 4") live.store(12);
  };
  const CompareResult r = run_comparison(c, progress, {}, &live);
  EXPECT_EQ(r.batch_sizes, (std::vector<int64_t>{8, 8, 12, 12}));
  ASSERT_EQ(r.one.loss.size(), 4u);
  EXPECT_EQ(r.ddp.rows, (std::vector<int64_t>{6, 6}));  // the last iteration's shards: 12 over 2 ranks
}

}  // namespace
}  // namespace dpv::course
