// DDP's semantics on in-process ranks: equal to one device on the padded global batch without
// BatchNorm, gradients averaged (not summed), the buffer broadcast rule over several steps, SyncBN
// equal to BatchNorm over the union, the bucket rebuild, the launched path (run_rank_steps) equal
// to the driver, and PyTorch's errors. Also run under ThreadSanitizer (scripts/test.sh).
#include <gtest/gtest.h>

#include <thread>

#include "dp_test_support.h"
#include "quiet_machine.h"
#include "tests/support/errors.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/ddp_output.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"
#include "engine/trace.h"

#include <nlohmann/json.hpp>

using namespace dpv;
using namespace dpv::testing;

namespace {

ModelSpec mlp(DType dtype = DType::Float64) {
  ModelSpec m;
  m.layers = {linear(4, 6), relu(), linear(6, 3)};
  m.dtype = dtype;
  return m;
}

// Rows `indices` of a batch, in that order.
Batch take(const Batch& b, const std::vector<int64_t>& indices) {
  Batch out{Tensor::empty({static_cast<int64_t>(indices.size()), b.input.dim(1)}, b.input.dtype()),
            Tensor::empty({static_cast<int64_t>(indices.size())}, DType::Int64)};
  for (size_t k = 0; k < indices.size(); ++k) {
    const auto i = indices[k], kk = static_cast<int64_t>(k);
    out.input.slice0(kk, kk + 1).copy_from(b.input.slice0(i, i + 1));
    out.target.slice0(kk, kk + 1).copy_from(b.target.slice0(i, i + 1));
  }
  return out;
}

// The padded global batch DistributedSampler makes, rank 0's shard first.
Batch padded(const Batch& b, int W) {
  std::vector<int64_t> all;
  for (int r = 0; r < W; ++r)
    for (int64_t i : distributed_sampler_indices(b.input.dim(0), W, r, DdpIteration::no_shuffle())) all.push_back(i);
  return take(b, all);
}

struct DdpRun {
  std::unique_ptr<DdpTrainer> trainer;
  std::vector<DdpRankResult> results;
};

DdpRun run_ddp(const std::string& devices, const ModelSpec& spec, const TensorMap& state, const Batch& batch,
               DdpOptions o, int steps) {
  DdpRun run;
  run.trainer = std::make_unique<DdpTrainer>(DeviceSet::create(devices), Model(spec), state, o);
  for (int s = 0; s < steps; ++s) DdpIteration(*run.trainer, batch.input, batch.target).run_to_end();
  run.results = run.trainer->results();
  return run;
}

void expect_maps_near(const TensorMap& got, const TensorMap& want, double tol, const std::string& what) {
  ASSERT_EQ(got.names(), want.names()) << what;
  for (const auto& [name, w] : want.items())
    EXPECT_LT(max_abs_diff(got.at(name).to_doubles(), w.to_doubles()), tol) << what << " " << name;
}


}  // namespace

TEST(Ddp, WithoutBatchNormEqualsOneDeviceOnThePaddedGlobalBatch) {
  const auto spec = mlp();
  const TensorMap state = Model(spec).initial_state(3);
  const Batch batch = random_batch(10, 4, 3, 11);  // 10 samples on 4 ranks: 3 each, samples 0 and 1 twice
  DdpOptions o;
  o.optimizer.lr = 0.1;
  o.optimizer.momentum = 0.9;
  o.optimizer.weight_decay = 1e-3;
  const DdpRun ddp = run_ddp("cpu:4", spec, state, batch, o, 3);

  Trainer one(DeviceSet::create("cpu:1"), Model(spec), state, TrainOptions{.optimizer = {.lr = 0.1, .momentum = 0.9, .weight_decay = 1e-3}});
  const Batch global = padded(batch, 4);
  for (int s = 0; s < 3; ++s) Iteration(one, global.input, global.target).run_to_end();
  TensorMap one_grads;
  for (const auto& [n, g] : one.grads().items()) one_grads.set(n, g.to(nullptr));
  for (const auto& r : ddp.results) {
    expect_maps_near(r.state, one.state_to_host(), 1e-12, "state of rank " + std::to_string(r.rank));
    expect_maps_near(r.grads, one_grads, 1e-12, "grads of rank " + std::to_string(r.rank));
  }
}

TEST(Ddp, GradientsAreTheMeanOfTheRanksNotTheSum) {
  const auto spec = mlp();
  const TensorMap state = Model(spec).initial_state(4);
  const Batch batch = random_batch(8, 4, 3, 12);
  const DdpRun ddp = run_ddp("cpu:2", spec, state, batch, {}, 1);
  // Each rank's own gradient, from one device on its shard.
  std::vector<Result> per_rank;
  for (int r = 0; r < 2; ++r)
    per_rank.push_back(run_iteration("cpu:1", spec, state,
                                     take(batch, distributed_sampler_indices(8, 2, r, DdpIteration::no_shuffle()))));
  for (const auto& [name, g] : ddp.results[0].grads.items()) {
    const auto a = per_rank[0].grads.at(name).to_doubles(), b = per_rank[1].grads.at(name).to_doubles();
    std::vector<double> mean(a.size()), sum(a.size());
    for (size_t i = 0; i < a.size(); ++i) mean[i] = (a[i] + b[i]) / 2, sum[i] = a[i] + b[i];
    EXPECT_LT(max_abs_diff(g.to_doubles(), mean), 1e-14) << name;
    EXPECT_GT(max_abs_diff(g.to_doubles(), sum), 1e-6) << name;
    EXPECT_EQ(ddp.results[1].grads.at(name).to_doubles(), g.to_doubles()) << "every rank holds the same mean";
  }
}

TEST(Ddp, BufferBroadcastRuleOverSeveralSteps) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(5);
  const Batch batch = random_batch(8, 4, 3, 13);
  for (bool broadcast : {true, false}) {
    DdpOptions o;
    o.broadcast_buffers = broadcast;
    DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), state, o);
    std::vector<std::vector<double>> before(2, state.at("1.running_mean").to_doubles());
    for (int step = 1; step <= 3; ++step) {
      DdpIteration it(trainer, batch.input, batch.target);
      it.run_to_end();
      std::vector<std::vector<double>> after(2);
      for (int r = 0; r < 2; ++r) {
        // This step's statistics of rank r's shard, and the buffer it started the forward with:
        // rank 0's (broadcast) or its own.
        const auto& stats = trainer.rank(r).batchnorm_stats()[0];
        const auto& start = broadcast ? before[0] : before[static_cast<size_t>(r)];
        std::vector<double> want(start.size());
        for (size_t c = 0; c < want.size(); ++c) want[c] = 0.9 * start[c] + 0.1 * stats.mean[c];
        after[static_cast<size_t>(r)] = trainer.rank(r).buffers().at("1.running_mean").to_doubles();
        EXPECT_LT(max_abs_diff(after[static_cast<size_t>(r)], want), 1e-14) << "step " << step << " rank " << r;
        EXPECT_EQ(trainer.rank(r).buffers().at("1.num_batches_tracked").to_int64()[0], step);
      }
      // After the step each rank holds its own update: they differ until the next broadcast.
      EXPECT_GT(max_abs_diff(after[0], after[1]), 1e-6);
      before = after;
    }
  }
}

TEST(Ddp, SyncBatchNormEqualsBatchNormOverTheUnionOfTheShards) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(6);
  const Batch batch = random_batch(12, 4, 3, 14);
  DdpOptions o;
  o.sync_bn = true;
  o.optimizer.lr = 0.1;
  const DdpRun ddp = run_ddp("cpu:3", spec, state, batch, o, 2);
  const Batch global = padded(batch, 3);  // 12 on 3 ranks: no padding, rank-major order
  Trainer one(DeviceSet::create("cpu:1"), Model(spec), state, TrainOptions{.optimizer = {.lr = 0.1}});
  std::unique_ptr<Iteration> last;
  for (int s = 0; s < 2; ++s) {
    last = std::make_unique<Iteration>(one, global.input, global.target);
    last->run_to_end();
  }
  TensorMap one_grads;
  for (const auto& [n, g] : one.grads().items()) one_grads.set(n, g.to(nullptr));
  const auto out = last->output().to_doubles();
  for (const auto& r : ddp.results) {
    expect_maps_near(r.state, one.state_to_host(), 1e-12, "state of rank " + std::to_string(r.rank));
    expect_maps_near(r.grads, one_grads, 1e-12, "grads");
    const auto mine = r.output.to_doubles();
    const std::vector<double> rows(out.begin() + r.rank * 4 * 3, out.begin() + (r.rank + 1) * 4 * 3);
    EXPECT_LT(max_abs_diff(mine, rows), 1e-12) << "output of rank " << r.rank;
  }
  // The merged statistics equal the one device's batch statistics.
  const auto& one_stats = last->batchnorm_stats()[0];
  for (const auto& s : ddp.results[0].batchnorm)
    if (s.device < 0 && s.layer == 1) {
      EXPECT_LT(max_abs_diff(s.var, one_stats.var), 1e-12);
    }
}

// SyncBatchNorm on one rank has nothing to merge (PyTorch's need_sync is false: it runs as
// BatchNorm), but a synchronised run still reports global statistics: the rank's own, the whole
// batch's, run through and stage by stage, as DataParallel on one device reports them.
TEST(Ddp, SyncBatchNormOnOneRankReportsItsStatisticsAsGlobal) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(8);
  const Batch batch = random_batch(10, 4, 3, 19);
  DdpOptions sync;
  sync.sync_bn = true;
  const DdpRun one = run_ddp("cpu:1", spec, state, batch, sync, 2);
  const DdpRun plain = run_ddp("cpu:1", spec, state, batch, {}, 2);
  expect_maps_near(one.results[0].state, plain.results[0].state, 1e-15, "one synchronised rank computes BatchNorm");
  DdpTrainer stepped(DeviceSet::create("cpu:1"), Model(spec), state, sync);
  DdpIteration it(stepped, batch.input, batch.target);
  while (!it.finished()) it.step();
  for (const auto* stats : {&one.results[0].batchnorm, &it.batchnorm_stats()}) {
    ASSERT_EQ(stats->size(), 2u);
    const BatchNormStats& dev0 = (*stats)[0];
    const BatchNormStats& global = (*stats)[1];
    EXPECT_EQ(dev0.device, 0);
    EXPECT_EQ(global.device, -1);
    EXPECT_EQ(global.layer, 1);
    EXPECT_EQ(global.mean, dev0.mean);
    EXPECT_EQ(global.var, dev0.var);
    EXPECT_EQ(global.count, 10.0);
  }
  EXPECT_EQ(plain.results[0].batchnorm.size(), 1u) << "no global statistics without sync_bn";
}

TEST(Ddp, BucketsAreRebuiltInReadyOrderBeforeTheSecondForward) {
  ModelSpec spec;
  spec.layers = {linear(4, 300), bn1d(300), relu(), linear(300, 1000), relu(), linear(1000, 2)};
  spec.dtype = DType::Float32;
  const TensorMap state = Model(spec).initial_state(7);
  const Batch batch = random_batch(8, 4, 2, 15, DType::Float32);
  DdpOptions o;
  o.bucket_cap_mb = 1.0;
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), state, o);
  DdpIteration(trainer, batch.input, batch.target).run_to_end();
  const Reducer& first = trainer.rank(0).reducer();
  ASSERT_EQ(first.buckets().buckets.size(), 1u);
  EXPECT_EQ(first.buckets().buckets[0], (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(first.ready_order(), (std::vector<size_t>{7, 6, 5, 4, 2, 3, 1, 0}));
  DdpIteration(trainer, batch.input, batch.target).run_to_end();
  for (int r = 0; r < 2; ++r) {
    const Reducer& red = trainer.rank(r).reducer();
    EXPECT_EQ(red.bucket_names(), (std::vector<std::vector<std::string>>{{"5.bias", "5.weight", "3.bias", "3.weight"},
                                                                         {"1.weight", "1.bias", "0.bias", "0.weight"}}));
    ASSERT_EQ(red.runs().size(), 2u);
    EXPECT_EQ(red.runs()[0].bytes, 1212008u);
    EXPECT_EQ(red.runs()[1].bytes, 8400u);
    // Bucket 0 went out as soon as it was full, before bucket 1's gradients were all in.
    EXPECT_LE(red.runs()[0].launch, red.runs()[1].ready);
    EXPECT_EQ(red.runs()[0].ring.size(), 2u);  // W=2: one reduce-scatter and one all-gather step
  }
}

TEST(Ddp, LaunchedPathRunRankStepsEqualsTheDriver) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(8);
  const Batch batch = random_batch(10, 4, 3, 16);
  DdpOptions o;
  o.optimizer.momentum = 0.9;
  const DdpRun driver = run_ddp("cpu:3", spec, state, batch, o, 2);
  auto devices = DeviceSet::create("cpu:3");
  auto group = make_in_process_group(3);
  const Model model(spec);
  std::vector<DdpRankResult> launched(3);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      launched[static_cast<size_t>(r)] =
          run_rank_steps(*group[static_cast<size_t>(r)], devices->shared(r), model, state, batch.input, batch.target, o, 2);
    });
  for (auto& t : threads) t.join();
  const auto a = ddp_step_output(driver.results, DType::Float64), b = ddp_step_output(launched, DType::Float64);
  ASSERT_EQ(a.tensors.names(), b.tensors.names());
  for (const auto& [name, t] : a.tensors.items()) EXPECT_EQ(t.to_doubles(), b.tensors.at(name).to_doubles()) << name;
  EXPECT_EQ(a.metadata, b.metadata);
}

// run_to_end without an observer runs each rank's stages on its own thread without a barrier after
// every stage, and lets the backward write gradients straight into the buckets; stepping with
// snapshots keeps .grad a tensor of its own. Both must give the same numbers, bit for bit.
TEST(Ddp, RunToEndUnobservedEqualsSteppingWithSnapshotsBitForBit) {
  QuietMachine quiet;  // a free core per rank: unobserved ranks run through on their own threads
  struct Case {
    const char* devices;
    bool sync_bn, broadcast_buffers;
  };
  for (const Case c : {Case{"cpu:2", false, true}, Case{"cpu:3", false, false}, Case{"cpu:3", true, true}}) {
    const auto spec = mlp_bn(DType::Float32);
    const TensorMap state = Model(spec).initial_state(11);
    const Batch batch = random_batch(11, 4, 3, 21, DType::Float32);  // 11 on 2 or 3 ranks: padded shards
    DdpOptions o;
    o.optimizer.momentum = 0.9;
    o.optimizer.weight_decay = 0.01;
    o.optimizer.lr = 0.05;
    o.sync_bn = c.sync_bn;
    o.broadcast_buffers = c.broadcast_buffers;
    const DdpRun through = run_ddp(c.devices, spec, state, batch, o, 3);
    DdpTrainer stepped(DeviceSet::create(c.devices), Model(spec), state, o);
    for (int s = 0; s < 3; ++s) {
      DdpIteration it(stepped, batch.input, batch.target);
      it.set_snapshots(true);
      while (!it.finished()) it.step();
    }
    const auto a = ddp_step_output(through.results, DType::Float32);
    const auto b = ddp_step_output(stepped.results(), DType::Float32);
    ASSERT_EQ(a.tensors.names(), b.tensors.names()) << c.devices;
    for (const auto& [name, t] : a.tensors.items())
      EXPECT_EQ(t.to_doubles(), b.tensors.at(name).to_doubles()) << c.devices << " sync_bn " << c.sync_bn << " " << name;
    EXPECT_EQ(a.metadata, b.metadata);
    // Stepped, .grad is its own tensor; run through, it lies in a bucket.
    auto in_a_bucket = [](const DdpRank& rank) {
      for (const Tensor& bucket : rank.reducer().bucket_buffers())
        if (rank.grads().at("0.weight").shares_storage_with(bucket)) return true;
      return false;
    };
    EXPECT_FALSE(in_a_bucket(stepped.rank(0)));
    EXPECT_TRUE(in_a_bucket(through.trainer->rank(0)));
  }
}

TEST(Ddp, ErrorsInPyTorchsWords) {
  ModelSpec no_params;
  no_params.layers = {relu()};
  EXPECT_EQ(full_error_of([&] { DdpTrainer(DeviceSet::create("cpu:2"), Model(no_params), TensorMap{}, {}); }),
            "RuntimeError: DistributedDataParallel is not needed when a module doesn't have any parameter that "
            "requires a gradient.");

  // One sample per rank: plain BatchNorm refuses, on the first rank.
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(9);
  const Batch four = random_batch(4, 4, 3, 17);
  EXPECT_EQ(full_error_of([&] { run_ddp("cpu:4", spec, state, four, {}, 1); }),
            "ValueError: Expected more than 1 value per channel when training, got input size torch.Size([1, 6])");
  // SyncBatchNorm over 4 ranks normalises the 4 samples together.
  DdpOptions sync;
  sync.sync_bn = true;
  EXPECT_EQ(full_error_of([&] { run_ddp("cpu:4", spec, state, four, sync, 1); }), kNoError);

  const Batch f32 = random_batch(8, 4, 3, 18, DType::Float32);
  EXPECT_NE(full_error_of([&] { run_ddp("cpu:2", spec, state, f32, {}, 1); })
                .find("RuntimeError: mat1 and mat2 must have the same dtype, but got Float and Double"),
            std::string::npos);
  const Batch empty{Tensor::empty({0, 4}, DType::Float64), Tensor::empty({0}, DType::Int64)};
  EXPECT_NE(full_error_of([&] { run_ddp("cpu:2", spec, state, empty, {}, 1); }).find("ValueError: empty batch"),
            std::string::npos);
}

TEST(Ddp, DifferentModelsAcrossRanksAreRefused) {
  const ModelSpec small = mlp(), big = mlp_bn();
  const Model m0(small), m1(big);
  const TensorMap s0 = m0.initial_state(1), s1 = m1.initial_state(1);
  auto devices = DeviceSet::create("cpu:2");
  auto group = make_in_process_group(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      errors[static_cast<size_t>(r)] =
          full_error_of([&] { DdpRank(*group[static_cast<size_t>(r)], devices->shared(r), r ? m1 : m0, r ? s1 : s0, {}); });
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors[0], "RuntimeError: DDP expects same model across all ranks, but Rank 0 has 4 params, while rank 1 "
                       "has inconsistent 6 params.");
  EXPECT_EQ(errors[1], "RuntimeError: DDP expects same model across all ranks, but Rank 1 has 6 params, while rank 0 "
                       "has inconsistent 4 params.");
}

TEST(Ddp, SteppedPlanReportsEveryStage) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(10);
  const Batch batch = random_batch(8, 4, 3, 19);
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), state, {});
  struct Recorder : Observer {
    std::vector<StageEvent> events;
    void on_stage(const StageEvent& e) override { events.push_back(e); }
  } rec;
  DdpIteration it(trainer, batch.input, batch.target, &rec);
  std::vector<std::string> kinds;
  for (const auto& s : it.plan()) kinds.push_back(stage_kind_name(s.kind));
  EXPECT_EQ(kinds, (std::vector<std::string>{"construct", "sample", "broadcast_buffers", "forward", "forward", "forward",
                                             "forward", "loss", "backward", "backward", "backward", "backward",
                                             "finalize", "step"}));
  while (!it.finished()) it.step();
  ASSERT_EQ(rec.events.size(), kinds.size());
  const StageEvent& fin = rec.events[12];
  ASSERT_EQ(fin.comm.size(), 2u);  // one bucket on each of the 2 ranks
  EXPECT_EQ(fin.comm[0].params.size(), 6u);
  EXPECT_EQ(fin.collectives.at(0).op, CollectiveOp::AllReduce);
  EXPECT_EQ(rec.events[1].chunk_sizes, (std::vector<int64_t>{4, 4}));
  // A second iteration has no Construct stage.
  DdpIteration second(trainer, batch.input, batch.target);
  EXPECT_EQ(second.plan().front().kind, StageKind::Sample);
}

TEST(Ddp, TraceHasACommunicationLanePerRankWithTheBucketAllReduces) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(11);
  const Batch batch = random_batch(8, 4, 3, 20);
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), state, {});
  TraceRecorder trace;
  for (int i = 0; i < 2; ++i) {
    trace.begin_iteration();
    DdpIteration(trainer, batch.input, batch.target, &trace).run_to_end();
  }
  const auto j = nlohmann::json::parse(trace.to_json());
  int lanes = 0, allreduces = 0;
  for (const auto& e : j.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name" &&
        e.at("args").at("name").get<std::string>().find("communication") != std::string::npos)
      ++lanes;
    if (e.at("ph") == "X" && e.value("cat", "") == "allreduce") {
      ++allreduces;
      EXPECT_GE(e.at("tid").get<int>(), 1000);
      EXPECT_EQ(e.at("args").at("ring_steps").size(), 2u);  // W=2: one reduce-scatter, one all-gather step
    }
  }
  EXPECT_EQ(lanes, 2);
  EXPECT_EQ(allreduces, 2 * 2);  // 2 iterations x 2 ranks, one bucket each
}
