// The DDP snapshot the app draws (StageEvent::ranks): each rank's strided shard with its padding,
// buckets filling in gradient-ready order and launching in bucket order during the backward, which
// ranks hold local or averaged gradients, and rank 0's buffers overwriting the others' at the next
// forward. Checked against what the engine computes independently (sampler, model layout, means).
#include <gtest/gtest.h>

#include <map>

#include "dp_test_support.h"
#include "engine/ddp/buckets.h"
#include "engine/ddp/ddp.h"
#include "engine/ddp/rank_snapshot.h"
#include "engine/io/trace_lanes.h"
#include "engine/trace.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

struct Recorder : Observer {
  std::vector<StageEvent> events;
  void on_stage(const StageEvent& e) override { events.push_back(e); }
};

// The layer a parameter belongs to ("3.weight" -> 3).
int layer_of(const std::string& name) { return std::stoi(name.substr(0, name.find('.'))); }

const StageEvent& find(const std::vector<StageEvent>& events, StageKind kind, int layer = -1) {
  for (const auto& e : events)
    if (e.stage.kind == kind && (layer < 0 || e.stage.layer == layer)) return e;
  throw std::runtime_error(std::string("no stage ") + stage_kind_name(kind));
}

// Limits of 100 bytes (first bucket and cap): mlp_bn's six float64 parameters rebuild into the
// buckets {3.bias, 3.weight} {1.weight, 1.bias, 0.bias} {0.weight}.
DdpOptions small_buckets() {
  DdpOptions o;
  o.bucket_cap_mb = 100.0 / (1024.0 * 1024.0);
  o.first_bucket_bytes = 100;
  return o;
}

}  // namespace

TEST(DdpSnapshot, SamplerPaddingMarksTheRepeatedSamples) {
  // N=10, W=4: [0,4,8] [1,5,9] [2,6,0] [3,7,1]: ranks 2 and 3 end with a repeat.
  const SamplerOptions o = DdpIteration::no_shuffle();
  EXPECT_EQ(distributed_sampler_padding(10, 4, 0, o), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(distributed_sampler_padding(10, 4, 1, o), (std::vector<bool>{false, false, false}));
  EXPECT_EQ(distributed_sampler_padding(10, 4, 2, o), (std::vector<bool>{false, false, true}));
  EXPECT_EQ(distributed_sampler_padding(10, 4, 3, o), (std::vector<bool>{false, false, true}));
  SamplerOptions drop = o;
  drop.drop_last = true;
  EXPECT_EQ(distributed_sampler_padding(10, 4, 3, drop), (std::vector<bool>{false, false}));
  EXPECT_THROW(distributed_sampler_padding(10, 4, 4, o), Error);
}

TEST(DdpSnapshot, FirstBucketLimitIsDefaultFirstBucketBytes) {
  std::vector<BucketParam> params{{24, DType::Float64}, {6, DType::Float64}, {6, DType::Float64},
                                  {6, DType::Float64},  {18, DType::Float64}, {3, DType::Float64}};
  const std::vector<size_t> ready{5, 4, 2, 3, 1, 0};
  const double cap = 100.0 / (1024.0 * 1024.0);
  EXPECT_EQ(rebuilt_buckets(params, ready, cap).buckets.size(), 1u);  // the default first bucket: 1 MiB
  const auto a = rebuilt_buckets(params, ready, cap, 100);
  ASSERT_EQ(a.buckets.size(), 3u);
  EXPECT_EQ(a.buckets[0], (std::vector<size_t>{5, 4}));
  EXPECT_EQ(a.buckets[1], (std::vector<size_t>{2, 3, 1}));
  EXPECT_EQ(a.buckets[2], (std::vector<size_t>{0}));
  EXPECT_THROW(rebuilt_buckets(params, ready, cap, 0), Error);
}

TEST(DdpSnapshot, RanksShardsBucketsGradientsAndBuffersStageByStage) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(21);
  const Batch batch = random_batch(10, 4, 3, 22);
  const int W = 4;
  DdpTrainer trainer(DeviceSet::create("cpu:4"), Model(spec), state, small_buckets());
  Recorder first, second;
  DdpIteration it1(trainer, batch.input, batch.target, &first);
  it1.run_to_end();
  DdpIteration it2(trainer, batch.input, batch.target, &second);
  it2.run_to_end();
  ASSERT_EQ(second.events.size(), it2.plan().size());

  for (const auto* events : {&first.events, &second.events})
    for (const StageEvent& e : *events) {
      ASSERT_EQ(e.ranks.size(), static_cast<size_t>(W)) << e.stage.title;
      for (int r = 0; r < W; ++r) {
        const RankState& s = e.ranks[static_cast<size_t>(r)];
        EXPECT_EQ(s.rank, r);
        EXPECT_EQ(s.samples, it2.shards()[static_cast<size_t>(r)]);
        EXPECT_EQ(s.padding, it2.padding()[static_cast<size_t>(r)]);
        EXPECT_TRUE(s.constructed);
        EXPECT_EQ(s.watched_param, "3.weight");
        EXPECT_EQ(s.watched_buffer, "1.running_mean");
      }
    }
  EXPECT_EQ(second.events[0].ranks[2].samples, (std::vector<int64_t>{2, 6, 0}));
  EXPECT_EQ(second.events[0].ranks[2].padding, (std::vector<bool>{false, false, true}));

  // Construction: every rank holds rank 0's parameters.
  const StageEvent& construct = find(first.events, StageKind::Construct);
  for (const RankState& s : construct.ranks) EXPECT_EQ(s.param_head, construct.ranks[0].param_head);
  // Iteration 1: one bucket holding every parameter; it launches only when the last gradient is in.
  const StageEvent& back3 = find(first.events, StageKind::Backward, 3);
  ASSERT_EQ(back3.ranks[0].buckets.size(), 1u);
  EXPECT_EQ(back3.ranks[0].buckets[0].params.size(), 6u);
  EXPECT_EQ(back3.ranks[0].buckets[0].ready, 2);
  EXPECT_FALSE(back3.ranks[0].buckets[0].launched);
  EXPECT_FALSE(back3.ranks[0].buckets_rebuilt);

  // Iteration 2: rebuilt buckets; after Backward of layer i a bucket holds exactly the gradients of
  // its parameters in layers >= i, and the launched buckets are the full prefix.
  for (const StageEvent& e : second.events) {
    if (e.stage.kind != StageKind::Backward) continue;
    for (const RankState& s : e.ranks) {
      ASSERT_EQ(s.buckets.size(), 3u);
      EXPECT_TRUE(s.buckets_rebuilt);
      EXPECT_EQ(s.grads, GradState::Local);
      bool prefix_full = true;
      for (const BucketState& b : s.buckets) {
        int expected = 0;
        for (const auto& p : b.params) expected += layer_of(p) >= e.stage.layer ? 1 : 0;
        EXPECT_EQ(b.ready, expected) << e.stage.title << " bucket " << b.bucket;
        prefix_full = prefix_full && b.ready == static_cast<int>(b.params.size());
        EXPECT_EQ(b.launched, prefix_full) << e.stage.title << " bucket " << b.bucket;
        if (b.finished) { EXPECT_TRUE(b.launched); }
      }
    }
  }
  // Bucket 0's all-reduce is launched at the first backward stage, while layers 2..0 still compute.
  const StageEvent& first_back = find(second.events, StageKind::Backward, 3);
  EXPECT_TRUE(first_back.ranks[1].buckets[0].launched);
  EXPECT_FALSE(first_back.ranks[1].buckets[1].launched);
  EXPECT_EQ(first_back.ranks[1].buckets[0].params, (std::vector<std::string>{"3.bias", "3.weight"}));
  EXPECT_EQ(first_back.ranks[1].buckets[0].bytes, (3u + 18u) * 8u);

  // Gradients: local ones differ between ranks (different shards); after Finalize every rank holds
  // their mean.
  const StageEvent& loss = find(second.events, StageKind::Loss);
  for (const RankState& s : loss.ranks) {
    EXPECT_EQ(s.grads, GradState::None);
    ASSERT_TRUE(s.loss.has_value());
  }
  EXPECT_NE(*loss.ranks[0].loss, *loss.ranks[1].loss);
  EXPECT_EQ(*loss.loss, *loss.ranks[0].loss);  // the loss rank 0 prints is its own
  const auto& local = first_back.ranks;
  ASSERT_EQ(local[0].grad_head.size(), kRankHeadValues);
  EXPECT_NE(local[0].grad_head, local[1].grad_head);
  const StageEvent& fin = find(second.events, StageKind::Finalize);
  for (size_t k = 0; k < kRankHeadValues; ++k) {
    double mean = 0;
    for (const RankState& s : local) mean += s.grad_head[k] / W;
    for (const RankState& s : fin.ranks) {
      EXPECT_EQ(s.grads, GradState::Averaged);
      EXPECT_NEAR(s.grad_head[k], mean, 1e-12);
    }
  }
  for (const RankState& s : fin.ranks) {
    for (const BucketState& b : s.buckets) EXPECT_TRUE(b.finished);
  }

  // Buffers: after iteration 1 each rank has its own running statistics; iteration 2's broadcast
  // overwrites them with rank 0's.
  const StageEvent& step1 = find(first.events, StageKind::Step);
  EXPECT_NE(step1.ranks[0].buffer_head, step1.ranks[1].buffer_head);
  const StageEvent& bcast = find(second.events, StageKind::BroadcastBuffers);
  for (const RankState& s : bcast.ranks) EXPECT_EQ(s.buffer_head, step1.ranks[0].buffer_head);
  // Parameters stay equal without a broadcast: the same averaged gradients on every rank.
  const StageEvent& step2 = find(second.events, StageKind::Step);
  for (const RankState& s : step2.ranks) EXPECT_EQ(s.param_head, step2.ranks[0].param_head);
  EXPECT_NE(step2.ranks[0].param_head, construct.ranks[0].param_head);
}

// What the inspector shows: each shard row's values are the global batch's row of that sample, and
// a bucket's values are the ranks' mean once all-reduced (none while it fills or is in flight).
TEST(DdpSnapshot, ShardRowsAreTheBatchRowsAndDoneBucketsHoldTheMean) {
  const auto spec = mlp_bn();
  const TensorMap state = Model(spec).initial_state(21);
  const Batch batch = random_batch(10, 4, 3, 22);
  const int W = 4;
  DdpTrainer trainer(DeviceSet::create("cpu:4"), Model(spec), state, small_buckets());
  Recorder first, second;
  DdpIteration it1(trainer, batch.input, batch.target, &first);
  it1.run_to_end();
  DdpIteration it2(trainer, batch.input, batch.target, &second);
  it2.run_to_end();

  EXPECT_TRUE(find(first.events, StageKind::Construct).ranks[0].sample_rows.empty()) << "no batch before Sample";
  const std::vector<double> all = batch.input.to_doubles();  // [10, 4]
  const StageEvent& sample = find(first.events, StageKind::Sample);
  for (const RankState& s : sample.ranks) {
    ASSERT_EQ(s.sample_rows.size(), s.samples.size());
    for (size_t k = 0; k < s.samples.size(); ++k) {
      const auto row = static_cast<size_t>(s.samples[k]);
      EXPECT_EQ(s.sample_rows[k], std::vector<double>(all.begin() + static_cast<long>(row * 4), all.begin() + static_cast<long>(row * 4 + 4)))
          << "rank " << s.rank << " sample " << s.samples[k];
    }
  }

  // Bucket 0 of iteration 2 is {3.bias, 3.weight}: 3 + 18 values; in flight or done after
  // Backward 3, the mean after Finalize.
  const StageEvent& fin = find(second.events, StageKind::Finalize);
  const StageEvent& back3 = find(second.events, StageKind::Backward, 3);
  for (int r = 0; r < W; ++r) {
    const BucketState& done = fin.ranks[static_cast<size_t>(r)].buckets[0];
    ASSERT_EQ(done.values.size(), 21u);
    // 3.weight sits after 3.bias in the bucket; the averaged .grad of 3.weight is those values.
    for (size_t k = 0; k < kRankHeadValues; ++k)
      EXPECT_DOUBLE_EQ(done.values[3 + k], fin.ranks[static_cast<size_t>(r)].grad_head[k]);
    const BucketState& early = back3.ranks[static_cast<size_t>(r)].buckets[0];
    if (early.finished) {
      EXPECT_EQ(early.values, done.values);
    } else {
      EXPECT_TRUE(early.values.empty()) << "in flight: not read";
    }
    // Bucket 1 is still filling after Backward 3: no values (its buffer is partly uninitialised).
    EXPECT_FALSE(back3.ranks[static_cast<size_t>(r)].buckets[1].launched);
    EXPECT_TRUE(back3.ranks[static_cast<size_t>(r)].buckets[1].values.empty());
  }
  // Iteration 1's one bucket: nothing while it fills, the mean after Finalize (3.weight's slot
  // holds the averaged .grad of 3.weight).
  const std::map<std::string, size_t> numel{{"0.weight", 24}, {"0.bias", 6}, {"1.weight", 6},
                                            {"1.bias", 6},    {"3.weight", 18}, {"3.bias", 3}};
  const StageEvent& filling = find(first.events, StageKind::Backward, 3);
  const StageEvent& fin1 = find(first.events, StageKind::Finalize);
  for (size_t r = 0; r < static_cast<size_t>(W); ++r) {
    EXPECT_TRUE(filling.ranks[r].buckets[0].values.empty());
    const BucketState& b = fin1.ranks[r].buckets[0];
    size_t offset = 0;
    for (const auto& p : b.params) {
      if (p == "3.weight") break;
      offset += numel.at(p);
    }
    ASSERT_EQ(b.values.size(), 63u);
    for (size_t k = 0; k < kRankHeadValues; ++k) EXPECT_DOUBLE_EQ(b.values[offset + k], fin1.ranks[r].grad_head[k]);
    EXPECT_EQ(b.values, fin1.ranks[0].buckets[0].values) << "the same mean on every rank";
  }
}

TEST(DdpSnapshot, NoSnapshotWithoutAnObserverThatWantsOne) {
  const auto spec = mlp_bn();
  const Batch batch = random_batch(8, 4, 3, 23);
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), Model(spec).initial_state(1), {});
  DdpIteration it(trainer, batch.input, batch.target);
  EXPECT_TRUE(it.step().ranks.empty());
  it.set_snapshots(true);
  EXPECT_EQ(it.step().ranks.size(), 2u);
}

TEST(DdpSnapshot, TraceLanesPutEachRanksCommunicationUnderItsCompute) {
  const auto spec = mlp_bn();
  const Batch batch = random_batch(8, 4, 3, 24);
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), Model(spec).initial_state(2), small_buckets());
  TraceRecorder trace;
  DdpIteration(trainer, batch.input, batch.target, &trace).run_to_end();
  const TraceLanes lanes = read_trace_lanes(trace.to_json(), "ddp");
  std::vector<std::string> threads;
  for (const auto& l : lanes.lanes) threads.push_back(l.thread);
  ASSERT_EQ(threads.size(), 5u);
  EXPECT_EQ(threads[0], "host");
  EXPECT_EQ(threads[2], threads[1] + " communication");
  EXPECT_EQ(threads[4], threads[3] + " communication");
  EXPECT_NE(threads[1], threads[3]);
}
