// The network cost model (engine/netmodel): the alpha-beta formulas against values worked out by
// hand, the DDP step prediction on a small made-up step, the step meter on made-up stage events,
// and the simulated link, which must take at least the modelled time and still sum correctly.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/netmodel/ddp_step_model.h"
#include "engine/netmodel/lab_summary.h"
#include "engine/netmodel/link_model.h"
#include "engine/netmodel/simulated_link_group.h"
#include "engine/netmodel/step_meter.h"
#include "engine/process_groups/in_process_group.h"
#include "rank_threads.h"

namespace dpv::netmodel {
namespace {

// a = 1 ms, b = 1 MB/s; a message of 4 MB over 4 ranks.
const Link kLink{1e-3, 1e6};

TEST(NetModel, RingAllReduceIsTwoWMinusOneStepsOfAChunk) {
  // 2(W-1)(a + n/(W b)) = 6 * (0.001 + 4e6 / 4e6) = 6.006 s
  EXPECT_NEAR(collective_seconds(CollectiveKind::AllReduce, 4, 4'000'000, kLink), 6.006, 1e-12);
  // 2 ranks: 2 * (0.001 + 1) = 2.002
  EXPECT_NEAR(collective_seconds(CollectiveKind::AllReduce, 2, 2'000'000, kLink), 2.002, 1e-12);
}

TEST(NetModel, ReduceScatterAndAllGatherAreHalfARing) {
  // (W-1)(a + n/(W b)) = 3 * 1.001
  EXPECT_NEAR(collective_seconds(CollectiveKind::ReduceScatter, 4, 4'000'000, kLink), 3.003, 1e-12);
  EXPECT_NEAR(collective_seconds(CollectiveKind::AllGather, 4, 4'000'000, kLink), 3.003, 1e-12);
}

TEST(NetModel, BroadcastIsGlooBinomialTree) {
  // ceil(log2 W) rounds of the whole message: 4 ranks 2 rounds, 5 ranks 3 rounds.
  EXPECT_NEAR(collective_seconds(CollectiveKind::Broadcast, 4, 4'000'000, kLink), 2 * 4.001, 1e-12);
  EXPECT_NEAR(collective_seconds(CollectiveKind::Broadcast, 5, 4'000'000, kLink), 3 * 4.001, 1e-12);
  EXPECT_EQ(collective_messages(CollectiveKind::Broadcast, 8), 3);
  EXPECT_EQ(collective_messages(CollectiveKind::Broadcast, 9), 4);
}

TEST(NetModel, OneRankOrNoBytesCostsNothingAndBadLinksAreRefused) {
  EXPECT_EQ(collective_seconds(CollectiveKind::AllReduce, 1, 4'000'000, kLink), 0);
  EXPECT_EQ(collective_seconds(CollectiveKind::AllReduce, 4, 0, kLink), 0);
  EXPECT_THROW(collective_seconds(CollectiveKind::AllReduce, 4, 10, Link{0, 0}), Error);
  EXPECT_THROW(collective_seconds(CollectiveKind::AllReduce, 0, 10, kLink), Error);
}

TEST(NetModel, RatesAndDelaysReadAsTcWritesThem) {
  EXPECT_DOUBLE_EQ(parse_rate_bits_per_s("10mbit", "--rate"), 10e6);
  EXPECT_DOUBLE_EQ(parse_rate_bits_per_s("1gbit", "--rate"), 1e9);
  EXPECT_DOUBLE_EQ(parse_rate_bits_per_s("500kbit", "--rate"), 500e3);
  EXPECT_DOUBLE_EQ(parse_rate_bits_per_s("2mbps", "--rate"), 16e6);  // bytes per second
  EXPECT_DOUBLE_EQ(parse_delay_s("10ms", "--delay"), 0.01);
  EXPECT_DOUBLE_EQ(parse_delay_s("500us", "--delay"), 500e-6);
  EXPECT_DOUBLE_EQ(parse_delay_s("0", "--delay"), 0);
  for (const char* bad : {"10", "ten", "10xbit", "1kbit", "1000gbit", "", "-5mbit"}) {
    try {
      parse_rate_bits_per_s(bad, "--rate");
      FAIL() << bad << " must be refused";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--rate '" + std::string(bad) + "'"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_delay_s("5", "--delay"), Error);
  EXPECT_THROW(parse_delay_s("11s", "--delay"), Error);
  EXPECT_EQ(rate_text(10e6), "10mbit");
  EXPECT_EQ(delay_text(0.002), "2ms");
}

// forward 1 s; backward layer 2: 2 s, layer 1: 1 s, layer 0: 0.5 s (ends at 3, 4 and 4.5 s); two
// buckets of 2 MB on 2 ranks at 1 MB/s and no latency: each all-reduce 2 (1)(2e6 / 2e6) = 2 s.
TEST(NetModel, DdpStepBucketsGoInOrderOneAtATime) {
  DdpStepFacts facts;
  facts.forward_s = 1;
  facts.backward_s = {0.5, 1, 2};
  facts.after_backward_s = 0.25;
  facts.buckets = {{2'000'000, 2}, {2'000'000, 0}};
  facts.world = 2;
  const DdpStepPrediction p = predict_ddp_step(facts, Link{0, 1e6});
  ASSERT_EQ(p.buckets.size(), 2u);
  EXPECT_DOUBLE_EQ(p.buckets[0].ready, 3);
  EXPECT_DOUBLE_EQ(p.buckets[0].start, 3);
  EXPECT_DOUBLE_EQ(p.buckets[0].end, 5);
  EXPECT_DOUBLE_EQ(p.buckets[1].ready, 4.5);
  EXPECT_DOUBLE_EQ(p.buckets[1].start, 5);  // waits for bucket 0 to leave the link
  EXPECT_DOUBLE_EQ(p.buckets[1].end, 7);
  EXPECT_DOUBLE_EQ(p.backward_end, 4.5);
  EXPECT_DOUBLE_EQ(p.exposed_s, 2.5);
  EXPECT_DOUBLE_EQ(p.step_s, 7.25);
  EXPECT_EQ(p.bytes_per_step, 4'000'000u);
  // A fast link hides everything but the last bucket's own time.
  const DdpStepPrediction fast = predict_ddp_step(facts, Link{0, 1e9});
  EXPECT_NEAR(fast.exposed_s, 0.002, 1e-12);
  facts.buckets[0].ready_layer = 3;
  EXPECT_THROW(predict_ddp_step(facts, Link{0, 1e6}), Error);
}

StageEvent stage(StageKind kind, int layer, double start, double end) {
  StageEvent e;
  e.stage.kind = kind;
  e.stage.layer = layer;
  e.t_start = start;
  e.t_end = end;
  return e;
}

TEST(NetModel, StepMeterReadsRankZerosStages) {
  StepMeter meter;
  meter.on_stage(stage(StageKind::Forward, 0, 0, 0.1));
  meter.on_stage(stage(StageKind::Forward, 1, 0.1, 0.2));
  meter.on_stage(stage(StageKind::Backward, 1, 0.2, 0.5));
  meter.on_stage(stage(StageKind::Backward, 0, 0.5, 0.6));
  StageEvent finalize = stage(StageKind::Finalize, -1, 0.6, 0.9);
  finalize.comm.push_back(CommSpan{0, 0, 0.5, 0.5, 0.85, 1000, {"1.bias", "1.weight"}, {}, {}});
  finalize.comm.push_back(CommSpan{1, 0, 0.5, 0.5, 0.95, 1000, {"1.bias", "1.weight"}, {}, {}});  // rank 1: not counted
  meter.on_stage(finalize);
  meter.on_stage(stage(StageKind::Step, -1, 0.9, 1.0));
  const StepMeasure m = meter.take(2);
  EXPECT_DOUBLE_EQ(m.step_s, 1.0);
  EXPECT_NEAR(m.exposed_s, 0.25, 1e-12);  // 0.85 - 0.6
  EXPECT_EQ(m.bytes, 1000u);
  ASSERT_EQ(m.facts.backward_s.size(), 2u);
  EXPECT_NEAR(m.facts.backward_s[1], 0.3, 1e-12);
  EXPECT_NEAR(m.facts.forward_s, 0.2, 1e-12);
  ASSERT_EQ(m.facts.buckets.size(), 1u);
  EXPECT_EQ(m.facts.buckets[0].ready_layer, 1);
  EXPECT_NEAR(m.facts.after_backward_s, 1.0 - 0.6 - 0.25, 1e-12);
  EXPECT_THROW(meter.take(2), Error);  // the events went with the first take
}

TEST(NetModel, SummarySkipsWarmupAndTakesMedians) {
  std::vector<StepMeasure> steps(5);
  const double times[] = {9, 9, 1, 3, 2};
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].step_s = times[i];
    steps[i].facts.forward_s = times[i];
    steps[i].facts.world = 2;
  }
  const PointSummary s = summarize_point(steps, Link{0, 1e6});
  EXPECT_EQ(s.steps_measured, 3u);
  EXPECT_DOUBLE_EQ(s.step_s, 2);
  EXPECT_DOUBLE_EQ(s.predicted_step_s, 2);  // no buckets: the step is its compute
  EXPECT_DOUBLE_EQ(s.ratio, 1);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
}

// 2 ranks, 65536 float32 (262144 bytes): the model says n/b = 0.25 s at b = 1048576 B/s.
TEST(NetModel, SimulatedLinkTakesAtLeastTheModelledTime) {
  const Link link{0, 1048576};
  auto group = simulate_link(make_in_process_group(2), link);
  std::vector<double> took(2), reported(2), first(2);
  const auto errors = testing::on_ranks(group, [&](ProcessGroup& g) {
    Tensor buf = Tensor::full({65536}, DType::Float32, g.rank() + 1.0);
    const auto t0 = std::chrono::steady_clock::now();
    const CollectiveReport r = g.all_reduce_sum(buf);
    took[static_cast<size_t>(g.rank())] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    reported[static_cast<size_t>(g.rank())] = r.seconds;
    first[static_cast<size_t>(g.rank())] = buf.data<float>()[0];
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  const double modelled = collective_seconds(CollectiveKind::AllReduce, 2, 262144, link);
  EXPECT_DOUBLE_EQ(modelled, 0.25);
  for (int r = 0; r < 2; ++r) {
    EXPECT_GE(took[static_cast<size_t>(r)], modelled) << r;
    EXPECT_GE(reported[static_cast<size_t>(r)], modelled) << r;
    EXPECT_EQ(first[static_cast<size_t>(r)], 3.0f) << r;  // 1 + 2: the sum is the wrapped group's
  }
  EXPECT_NE(group[0]->backend().find("simulated"), std::string::npos);
}

}  // namespace
}  // namespace dpv::netmodel
