// The communication hooks' gradient error probe (engine/ddp/comm_hooks/hook_error.h): allreduce_hook
// exactly 0, fp16_compress_hook's error equal to float16 rounding computed here independently,
// PowerSGD far larger, the probe leaving the hook's state and the training bit for bit as an
// unprobed run's, and the lab summary leaving the probed step out of its medians.
#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <thread>
#include <vector>

#include "dp_test_support.h"
#include "engine/ddp/comm_hooks/hook_error.h"
#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/float16.h"
#include "engine/netmodel/lab_summary.h"
#include "engine/process_groups/in_process_group.h"
#include "rank_threads.h"

namespace dpv {
namespace {

// Rank r's raw bucket element i: spread over several float16 binades so rounding shows.
float raw_value(int rank, int i) {
  return static_cast<float>((rank + 1) * (i + 1)) * 0.0371f + 0.013f * static_cast<float>(i * i);
}

// Runs `kind`'s hook on a 9-element bucket on 2 ranks and probes it; rank 0's measure and result.
HookErrorMeasure probe_tiny_bucket(CommHookKind kind, std::vector<float>* hooked = nullptr) {
  auto group = make_in_process_group(2);
  HookErrorMeasure rank0;
  const auto errors = testing::on_ranks(group, [&](ProcessGroup& g) {
    std::unique_ptr<CommHook> hook = make_comm_hook({kind, {}}, g);
    GradBucket bucket{0, true, Tensor::empty({9}, DType::Float32), {{9}}, {0}};
    for (int i = 0; i < 9; ++i) bucket.buffer.data<float>()[i] = raw_value(g.rank(), i);
    Tensor raw = bucket.buffer.clone();  // [9]
    hook->run(bucket, g);
    const HookErrorMeasure m = measure_hook_error(bucket, raw, g);
    if (g.rank() != 0) return;
    rank0 = m;
    if (hooked) hooked->assign(bucket.buffer.data<float>(), bucket.buffer.data<float>() + 9);
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return rank0;
}

TEST(HookError, AllreduceHookIsExactlyTheMean) {
  const HookErrorMeasure m = probe_tiny_bucket(CommHookKind::AllReduce);
  EXPECT_EQ(m.error_sq, 0.0);
  EXPECT_EQ(m.max_abs, 0.0);
  EXPECT_EQ(m.relative_l2(), 0.0);
  EXPECT_GT(m.exact_sq, 0.0);
  EXPECT_EQ(m.elements, 9);
}

TEST(HookError, Fp16ErrorIsTheFloat16Rounding) {
  std::vector<float> hooked;
  const HookErrorMeasure m = probe_tiny_bucket(CommHookKind::Fp16Compress, &hooked);
  // Independently: the exact mean divides each rank's float32 by 2 and adds (2 ranks: one addition);
  // fp16_compress_hook rounds to float16, divides, adds in float16.
  double error_sq = 0, exact_sq = 0, max_abs = 0;
  for (int i = 0; i < 9; ++i) {
    const float exact = raw_value(0, i) / 2.0f + raw_value(1, i) / 2.0f;
    const float a = round_to_float16(round_to_float16(raw_value(0, i)) / 2.0f);
    const float b = round_to_float16(round_to_float16(raw_value(1, i)) / 2.0f);
    const float fp16 = round_to_float16(a + b);
    ASSERT_EQ(hooked[static_cast<size_t>(i)], fp16) << i;
    const double d = static_cast<double>(fp16) - static_cast<double>(exact);
    error_sq += d * d;
    exact_sq += static_cast<double>(exact) * exact;
    max_abs = std::max(max_abs, std::abs(d));
  }
  EXPECT_GT(error_sq, 0.0);
  EXPECT_DOUBLE_EQ(m.error_sq, error_sq);
  EXPECT_DOUBLE_EQ(m.exact_sq, exact_sq);
  EXPECT_DOUBLE_EQ(m.max_abs, max_abs);
  EXPECT_DOUBLE_EQ(m.relative_l2(), std::sqrt(error_sq / exact_sq));
}

ModelSpec two_linear() {
  ModelSpec m;
  m.layers = {testing::linear(8, 16), testing::relu(), testing::linear(16, 3)};
  m.dtype = DType::Float32;
  return m;
}

struct HookedRun {
  std::vector<std::optional<HookErrorMeasure>> errors;  // rank 0's, per iteration
  DdpRankResult rank0;
};

// `steps` DDP iterations on 2 in-process ranks with `kind`'s hook, probing `probe_at`.
HookedRun run_hooked(CommHookKind kind, std::vector<int64_t> probe_at, int steps) {
  const ModelSpec spec = two_linear();
  const TensorMap state = Model(spec).initial_state(3);
  const testing::Batch batch = testing::random_batch(12, 8, 3, 5, DType::Float32);
  DdpOptions options;
  options.optimizer.momentum = 0.9;
  options.comm_hook.kind = kind;
  options.comm_hook.powersgd.start_powerSGD_iter = 2;
  options.probe_hook_error_at = std::move(probe_at);
  HookedRun run;
  auto group = make_in_process_group(2);
  const auto errors = testing::on_ranks(group, [&](ProcessGroup& g) {
    try {
      DdpRankStrategy strategy(g, DeviceSet::create("cpu:1"), Model(spec), state, options);
      for (int s = 0; s < steps; ++s) {
        strategy.begin_iteration(batch.input, batch.target)->run_to_end();
        if (g.rank() == 0) run.errors.push_back(strategy.rank().hook_error());
      }
      if (g.rank() == 0) run.rank0 = strategy.rank().result();
    } catch (const Error& e) {
      abort_in_process_group(g, e.what());  // the other rank stops waiting
      throw;
    }
  });
  for (const auto& e : errors) EXPECT_EQ(e, "");
  return run;
}

void expect_same_bits(const TensorMap& a, const TensorMap& b, const char* what) {
  ASSERT_EQ(a.names(), b.names()) << what;
  for (const auto& [name, t] : a.items()) EXPECT_EQ(t.to_doubles(), b.at(name).to_doubles()) << what << " " << name;
}

TEST(HookError, ProbesOnlyTheIterationsAskedFor) {
  const HookedRun run = run_hooked(CommHookKind::Fp16Compress, {3}, 4);
  ASSERT_EQ(run.errors.size(), 4u);
  EXPECT_FALSE(run.errors[1].has_value());
  ASSERT_TRUE(run.errors[2].has_value());
  EXPECT_FALSE(run.errors[3].has_value());
  // fp16's relative error is float16's: about 2**-11 per element at most.
  EXPECT_GT(run.errors[2]->relative_l2(), 1e-6);
  EXPECT_LT(run.errors[2]->relative_l2(), 2e-3);
  EXPECT_EQ(run.errors[2]->elements, 8 * 16 + 16 + 16 * 3 + 3);
  EXPECT_FALSE(run_hooked(CommHookKind::None, {3}, 3).errors[2].has_value());  // nothing to probe
}

TEST(HookError, AllreduceHookThroughDdpIsExact) {
  const HookedRun run = run_hooked(CommHookKind::AllReduce, {2}, 2);
  ASSERT_TRUE(run.errors[1].has_value());
  EXPECT_EQ(run.errors[1]->error_sq, 0.0);
  EXPECT_GT(run.errors[1]->exact_sq, 0.0);
}

TEST(HookError, PowerSgdErrsFarMoreThanFp16AndTheProbeChangesNothing) {
  const HookedRun probed = run_hooked(CommHookKind::PowerSgd, {3}, 4);
  const HookedRun plain = run_hooked(CommHookKind::PowerSgd, {}, 4);
  const HookedRun fp16 = run_hooked(CommHookKind::Fp16Compress, {3}, 3);
  ASSERT_TRUE(probed.errors[2].has_value());
  EXPECT_GT(probed.errors[2]->relative_l2(), 10 * fp16.errors[2]->relative_l2());
  // The probe works on copies: PowerSGD's error feedback and Q, the parameters and the gradients
  // are those of the unprobed run, bit for bit.
  EXPECT_FALSE(probed.rank0.comm_hook_state.empty());
  expect_same_bits(probed.rank0.comm_hook_state, plain.rank0.comm_hook_state, "PowerSGD state");
  expect_same_bits(probed.rank0.state, plain.rank0.state, "parameters");
  expect_same_bits(probed.rank0.grads, plain.rank0.grads, "gradients");
  EXPECT_EQ(probed.rank0.output.to_doubles(), plain.rank0.output.to_doubles());
}

TEST(HookError, LabSummaryLeavesTheProbedStepOut) {
  std::vector<netmodel::StepMeasure> steps(5);
  const double times[] = {9, 9, 1, 3, 100};
  for (size_t i = 0; i < steps.size(); ++i) {
    steps[i].step_s = times[i];
    steps[i].facts.world = 2;
    steps[i].bytes = 400;
    steps[i].sent_bytes = 200;
  }
  steps[4].hook_error = HookErrorMeasure{1e-6, 1.0, 1e-3, 10};
  const netmodel::PointSummary s = netmodel::summarize_point(steps, netmodel::Link{0, 1e6});
  EXPECT_EQ(s.steps_measured, 2u);  // steps 3 and 4: after the warm-up, without the probe
  EXPECT_DOUBLE_EQ(s.step_s, 2.0);
  EXPECT_DOUBLE_EQ(s.saved_bytes_per_step, 200.0);
  ASSERT_TRUE(s.hook_error.has_value());
  EXPECT_DOUBLE_EQ(s.hook_error->relative_l2(), 1e-3);
  EXPECT_FALSE(netmodel::timed_step(steps[4]));
  // A probe alone is no measured step.
  EXPECT_THROW(netmodel::summarize_point({steps[4]}, netmodel::Link{0, 1e6}), Error);
}

}  // namespace
}  // namespace dpv
