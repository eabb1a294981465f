// The course's network lab (course/network_lab.h): a simulated point measures every step, is
// labelled simulated, every bucket's all-reduce takes at least the model's time on the link, and a
// slower link predicts more.
#include <gtest/gtest.h>

#include "course/network_lab.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace {

NetworkLabSetup small_setup() {
  NetworkLabSetup setup;
  setup.model = preset_model("mlp-bn");
  setup.world = 2;
  setup.batch = 32;
  setup.steps = 4;
  return setup;
}

TEST(NetworkLab, SimulatedPointsMeasureBesideTheModel) {
  const std::vector<netmodel::Link> links{{0.001, 100e6 / 8}, {0.004, 10e6 / 8}};
  const std::vector<NetworkLabPoint> points = run_simulated_network_sweep(small_setup(), links);
  ASSERT_EQ(points.size(), 2u);
  for (const NetworkLabPoint& p : points) {
    EXPECT_TRUE(p.simulated);
    ASSERT_EQ(p.steps.size(), 4u);
    EXPECT_EQ(p.summary.steps_measured, 2u);
    EXPECT_GT(p.summary.step_s, 0);
    EXPECT_GT(p.summary.predicted_step_s, 0);
    EXPECT_GT(p.summary.bytes_per_step, 0);
    for (const netmodel::StepMeasure& m : p.steps) {
      ASSERT_FALSE(m.buckets.empty());
      EXPECT_GE(m.exposed_s, 0);
      // The simulated link waits out the model's time: no bucket's all-reduce is shorter. (The
      // exposed time is not held to the last bucket's time: the end of the backward is stamped after
      // the last gradient is marked ready, and a busy machine may put the bucket's wait in between.)
      for (const netmodel::MeasuredBucket& b : m.buckets)
        EXPECT_GE(b.end - b.start, 0.999 * netmodel::collective_seconds(netmodel::CollectiveKind::AllReduce, 2,
                                                                       b.facts.bytes, p.link));
    }
  }
  EXPECT_GT(points[1].summary.predicted_exposed_s, points[0].summary.predicted_exposed_s);
}

// The setup's hook reaches every rank (fp16 sends half the bucket's bytes), and every rank's own last
// step is kept for the timeline.
TEST(NetworkLab, TheHookReachesTheRanksAndEveryRankIsMetered) {
  NetworkLabSetup setup = small_setup();
  setup.comm_hook.kind = CommHookKind::Fp16Compress;
  const NetworkLabPoint p = run_simulated_network_point(setup, {0, 1e9});
  ASSERT_EQ(p.last_step_by_rank.size(), 2u);
  for (const netmodel::StepMeasure& m : p.last_step_by_rank) {
    EXPECT_GT(m.step_s, 0);
    EXPECT_FALSE(m.buckets.empty());
    EXPECT_EQ(m.sent_bytes * 2, m.bytes);
  }
  // One extra step measured fp16's gradient error; it is neither a timed step nor the timeline's.
  ASSERT_EQ(p.steps.size(), 4u);
  EXPECT_EQ(p.summary.steps_measured, 2u);
  for (const netmodel::StepMeasure& m : p.steps) EXPECT_FALSE(m.hook_error.has_value());
  ASSERT_TRUE(p.summary.hook_error.has_value());
  EXPECT_GT(p.summary.hook_error->relative_l2(), 1e-6);
  EXPECT_LT(p.summary.hook_error->relative_l2(), 2e-3);
  EXPECT_EQ(p.summary.saved_bytes_per_step * 2, static_cast<double>(p.steps.back().bytes));
  setup.probe_hook_error = false;
  EXPECT_FALSE(run_simulated_network_point(setup, {0, 1e9}).summary.hook_error.has_value());
  setup.world = 0;
  EXPECT_THROW(run_simulated_network_point(setup, {0, 1e9}), Error);
}

TEST(NetworkLab, RefusesASetupWithoutSteps) {
  NetworkLabSetup setup = small_setup();
  setup.steps = 0;
  EXPECT_THROW(run_simulated_network_point(setup, {0, 1e6}), Error);
}

}  // namespace
}  // namespace dpv::course
