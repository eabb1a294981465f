// The ZeRO and FSDP lessons say only what is true of the run they are shown for. ZeRO-1, 2 and 3
// run for real on several presets, device counts and optimizers; after every stage the run's
// LessonFacts are checked against the engine's own values (rank 0's partition and flat layout, the
// stage event's CollectiveReports) and against counts made here from the model's layer shapes, and
// every ZeRO stage lesson is rendered with them. The topic lessons need no run.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>

#include "course/lesson_facts.h"
#include "course/lesson_template.h"
#include "course/lessons.h"
#include "course/sample_program.h"
#include "course_test_util.h"
#include "engine/ddp/ddp.h"
#include "engine/error.h"
#include "engine/model_spec.h"
#include "engine/number_text.h"
#include "engine/run/run_spec.h"

namespace dpv::course {
namespace {

using testing::lessons_dir;
using testing::word_count;

struct Case {
  std::string preset;
  int stage;
  int devices;
  int64_t batch;
  OptimizerKind optimizer;
  double momentum = 0.9;  // SGD's
  std::string name() const {
    return preset + " ZeRO-" + std::to_string(stage) + " cpu:" + std::to_string(devices) + " batch " +
           std::to_string(batch) + " " + optimizer_name(optimizer) + (momentum > 0 ? "" : " without momentum");
  }
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// The model's parameters counted from its layer shapes, in the model's order, independently of
// the engine's parameter declarations: Linear's weight [out, in] and bias [out]; BatchNorm's
// weight and bias [C].
struct Extent {
  std::string name;
  int64_t numel;
};
std::vector<Extent> extents_from_shapes(const ModelSpec& spec) {
  std::vector<Extent> out;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const LayerSpec& l = spec.layers[i];
    const std::string prefix = std::to_string(i) + ".";
    if (l.kind == LayerKind::Linear) {
      out.push_back({prefix + "weight", l.in_features * l.out_features});
      out.push_back({prefix + "bias", l.out_features});
    } else if (l.kind == LayerKind::BatchNorm1d) {
      out.push_back({prefix + "weight", l.num_features});
      out.push_back({prefix + "bias", l.num_features});
    }
  }
  return out;
}

// ZeroRedundancyOptimizer's rule, written out here: largest first (ties in model order), each to
// the first rank with the fewest elements so far.
std::vector<std::vector<std::string>> greedy_partition(std::vector<Extent> params, int world) {
  std::stable_sort(params.begin(), params.end(), [](const Extent& a, const Extent& b) { return a.numel > b.numel; });
  std::vector<std::vector<std::string>> ranks(static_cast<size_t>(world));
  std::vector<int64_t> load(static_cast<size_t>(world), 0);
  for (const Extent& p : params) {
    size_t best = 0;
    for (size_t r = 1; r < load.size(); ++r)
      if (load[r] < load[best]) best = r;
    ranks[best].push_back(p.name);
    load[best] += p.numel;
  }
  return ranks;
}

// FSDP's _get_gradient_predivide_factor, written out here.
double predivide(int world) {
  int factor = 1;
  while (world % factor == 0 && world / factor > factor) factor *= 2;
  return factor;
}

std::string rendered(const std::string& id, const LessonFacts& facts) {
  const std::string text = render_lesson(id, load_lesson(lessons_dir(), id), facts);
  EXPECT_FALSE(contains(text, "{{")) << id;
  EXPECT_FALSE(contains(text, "}}")) << id;
  for (const char* wrong : {" 1 padding zeros", " 1 padding elements", "ran 1 broadcasts", " 1 parameters", " 1 ranks"})
    EXPECT_FALSE(contains(text, wrong)) << id << ": " << wrong << "\n" << text;
  EXPECT_GE(word_count(text), 120) << id << "\n" << text;
  EXPECT_LE(word_count(text), 250) << id << "\n" << text;
  return text;
}

// The facts against the engine and the independent counts, after stage `event`.
void check_facts(const Case& c, const ModelSpec& spec, const LessonFacts& f, const DdpTrainer& trainer,
                 const StageEvent& event, int gathers_so_far) {
  const std::vector<Extent> extents = extents_from_shapes(spec);
  int64_t psi = 0;
  for (const Extent& e : extents) psi += e.numel;
  EXPECT_EQ(f.zero_stage, c.stage);
  EXPECT_EQ(f.param_numel, psi);
  EXPECT_EQ(f.param_count, static_cast<int>(extents.size()));
  EXPECT_EQ(f.allreduce_bytes, psi * 4);  // float32
  EXPECT_EQ(f.optimizer, optimizer_class_name(c.optimizer));
  const DdpRank& rank0 = trainer.rank(0);
  if (c.stage == 1) {
    EXPECT_EQ(f.rank0_owned, rank0.partition().at(0));
    EXPECT_EQ(f.rank0_owned, greedy_partition(extents, c.devices).at(0));
  } else {
    const FlatLayout& layout = rank0.flat_layout();
    const int64_t padded = (psi + c.devices - 1) / c.devices * c.devices;
    EXPECT_EQ(f.flat_numel, psi);
    EXPECT_EQ(f.flat_padded_numel, layout.padded_numel);
    EXPECT_EQ(f.flat_padded_numel, padded);
    EXPECT_EQ(f.flat_padded_numel - f.flat_numel, layout.padding());
    EXPECT_EQ(f.shard_numel, padded / c.devices);
    EXPECT_EQ(f.last_shard_padding, padded - psi <= f.shard_numel ? padded - psi : f.shard_numel);
    EXPECT_EQ(f.pre_divide, predivide(c.devices));
    EXPECT_DOUBLE_EQ(f.pre_divide * f.post_divide, c.devices);
    EXPECT_EQ(f.gathers_per_step, c.stage == 3 ? 2 : 1);
  }
  // The stage's collectives, from rank 0's reports in the event.
  const auto count = [&](CollectiveOp op) {
    return std::count_if(event.collectives.begin(), event.collectives.end(), [op](const CollectiveReport& r) { return r.op == op; });
  };
  if (event.stage.kind == StageKind::GatherParams) {
    EXPECT_EQ(count(CollectiveOp::AllGather), 1);
    EXPECT_EQ(f.stage_bytes, f.flat_padded_numel * 4);
    EXPECT_EQ(f.stage_bytes, f.flat_bytes);
    EXPECT_EQ(f.stage_index == f.backward_gather_index, c.stage == 3 && gathers_so_far == 2);
  }
  if (event.stage.kind == StageKind::ReduceScatter) {
    EXPECT_EQ(count(CollectiveOp::ReduceScatter), 1);
    EXPECT_EQ(f.stage_bytes, f.flat_bytes);
  }
  if (event.stage.kind == StageKind::BroadcastParams) {
    EXPECT_EQ(count(CollectiveOp::Broadcast), static_cast<long>(extents.size()));
    EXPECT_EQ(f.stage_collectives, f.param_count);
    EXPECT_EQ(f.stage_bytes, psi * 4);
  }
}

// What each lesson must say for these facts.
void check_lesson(const std::string& stage, const std::string& text, const LessonFacts& f) {
  if (stage == "gather_params") {
    EXPECT_TRUE(contains(text, "whole flat parameter of " + std::to_string(f.flat_padded_numel) + " elements")) << text;
    EXPECT_TRUE(contains(text, "size is " + std::to_string(f.stage_bytes) + " bytes")) << text;
    EXPECT_EQ(contains(text, "gathered again"), f.backward_gather_index >= 0 && f.stage_index == f.backward_gather_index) << text;
    EXPECT_EQ(contains(text, "padding zero"), f.flat_padded_numel > f.flat_numel) << text;
  }
  if (stage == "reduce_scatter") {
    EXPECT_TRUE(contains(text, "divided by " + python_float(f.pre_divide) + ", then")) << text;
    EXPECT_TRUE(contains(text, "divided by " + python_float(f.post_divide) + ".")) << text;
  }
  if (stage == "broadcast_params") {
    EXPECT_TRUE(contains(text, "ran " + std::to_string(f.param_count) + " broadcast")) << text;
  }
  if (stage == "step" && f.zero_stage == 1 && !f.rank0_owned.empty()) {
    EXPECT_TRUE(contains(text, "Rank 0 steps " + std::to_string(f.rank0_owned.size()) + " parameter")) << text;
  }
  if (stage == "step" && f.zero_stage >= 2) {
    EXPECT_TRUE(contains(text, "its slice of " + std::to_string(f.shard_numel) + " elements")) << text;
    EXPECT_EQ(contains(text, "padding zero"), f.flat_padded_numel > f.flat_numel) << text;
  }
  if (stage == "step") {
    EXPECT_EQ(contains(text, "keeps no state"), f.optimizer_states.empty()) << text;
  }
  if (stage == "backward") {
    EXPECT_EQ(contains(text, "bucket times 1/W"), f.zero_stage == 1) << text;
    EXPECT_EQ(contains(text, "flat gradient of " + std::to_string(f.flat_padded_numel) + " elements"), f.zero_stage >= 2) << text;
  }
}

void walk(const Case& c) {
  SCOPED_TRACE(c.name());
  RunSpec spec;
  spec.devices = "cpu:" + std::to_string(c.devices);
  spec.preset = c.preset;
  spec.batch = c.batch;
  spec.seed = 7;
  spec.strategy = rank_strategy(c.stage);
  spec.optimizer.kind = c.optimizer;
  if (c.optimizer == OptimizerKind::Sgd) spec.optimizer.momentum = c.momentum;
  spec.ddp = teaching_ddp_settings(spec.model_spec());
  const Dataset data = program_data(c.preset, c.batch, 3);
  std::unique_ptr<Strategy> strategy = make_strategy(spec, DeviceSet::create(spec.devices));
  const auto& trainer = dynamic_cast<const DdpTrainer&>(*strategy);
  for (int n = 1; n <= 2; ++n) {
    auto it = strategy->begin_iteration(data.inputs, data.targets);
    it->set_snapshots(true);
    const LessonFacts start = lesson_facts(spec, *strategy, *it, data.inputs, n);
    int gathers = 0;
    int lessons_shown = 0;
    while (!it->finished()) {
      const StageEvent event = it->step();
      const LessonFacts f = lesson_facts_after(start, event);
      gathers += event.stage.kind == StageKind::GatherParams;
      if (!trainer.constructed()) continue;
      check_facts(c, spec.model_spec(), f, trainer, event, gathers);
      const std::string stage = stage_kind_name(event.stage.kind);
      const auto& names = zero_stage_lesson_names();
      if (std::find(names.begin(), names.end(), stage) == names.end()) continue;
      check_lesson(stage, rendered("zero/stages/" + stage, f), f);
      ++lessons_shown;
    }
    // Every backward layer; ZeRO-1: step, broadcast; ZeRO-2: gather, reduce-scatter, step; ZeRO-3: also
    // free, gather again.
    const int layers = Model(spec.model_spec()).num_layers();
    EXPECT_EQ(lessons_shown, layers + (c.stage == 1 ? 2 : c.stage == 2 ? 3 : 5));
  }
}

TEST(ZeroLessons, EveryZeroStageLessonStatesOnlyThisRunsFacts) {
  for (int stage : {1, 2, 3}) {
    walk({"simple", stage, 1, 4, OptimizerKind::Sgd});
    walk({"simple", stage, 3, 6, OptimizerKind::Adam});      // 22 elements: padded to 24
    walk({"simple", stage, 8, 8, OptimizerKind::Sgd, 0.0});  // no state; more ranks than ZeRO-1 has parameters
    walk({"mlp-bn", stage, 2, 8, OptimizerKind::AdamW});
    walk({"mlp-bn", stage, 4, 12, OptimizerKind::Adam});
  }
}

TEST(ZeroLessons, WithoutMomentumTheStepLessonSaysThereIsNoStateToShard) {
  LessonFacts f;
  f.ddp = true;
  f.zero_stage = 2;
  f.devices = 2;
  f.optimizer = "SGD";
  f.flat_numel = 22;
  f.flat_padded_numel = 22;
  f.shard_numel = 11;
  const std::string text = rendered("zero/stages/step", f);
  EXPECT_TRUE(contains(text, "keeps no state")) << text;
  f.optimizer = "Adam";
  f.optimizer_states = {"exp_avg", "exp_avg_sq"};
  f.optimizer_step_counts = true;
  EXPECT_TRUE(contains(rendered("zero/stages/step", f), "Adam keeps exp_avg, exp_avg_sq for every element"));
}

TEST(ZeroLessons, TopicLessonsLoadWithoutARunAndCoverTheEssentials) {
  for (const auto& name : zero_topic_lesson_names()) {
    SCOPED_TRACE(name);
    const std::string text = render_lesson_without_run("zero/" + name, load_lesson(lessons_dir(), "zero/" + name));
    EXPECT_GE(word_count(text), 200);
    EXPECT_LE(word_count(text), 450);
    EXPECT_TRUE(contains(text, "**Common misconceptions.**"));
  }
  const std::string overview = load_lesson(lessons_dir(), "zero/overview");
  for (const char* formula : {"(2 + 2 + K)Ψ", "(2 + 2 + K/W)Ψ", "(2 + (2 + K)/W)Ψ", "(2 + 2 + K)Ψ/W", "(4 + 4 + K)Ψ"})
    EXPECT_TRUE(contains(overview, formula)) << formula;
  EXPECT_TRUE(contains(load_lesson(lessons_dir(), "zero/zero1"),
                       "ZeroRedundancyOptimizer(ddp_model.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)"));
  const std::string fsdp = load_lesson(lessons_dir(), "zero/fsdp");
  EXPECT_TRUE(contains(fsdp, "ShardingStrategy.SHARD_GRAD_OP"));
  EXPECT_TRUE(contains(fsdp, "ShardingStrategy.FULL_SHARD"));
  for (int w : {2, 3, 4, 8})  // the factors the lesson quotes are FSDP's
    EXPECT_TRUE(contains(fsdp, "W = " + std::to_string(w) + ": " + shortest_text(predivide(w)) + " and " +
                                   shortest_text(w / predivide(w))))
        << w;
  EXPECT_TRUE(contains(load_lesson(lessons_dir(), "zero/memory"), "one more all-gather"));
}

TEST(ZeroLessons, StageLessonsHaveEveryPart) {
  for (const auto& name : zero_stage_lesson_names()) {
    SCOPED_TRACE(name);
    const std::string text = load_lesson(lessons_dir(), "zero/stages/" + name);
    for (const char* part : {"**What happens.**", "**Why.**", "**Watch in the animation.**", "**PyTorch source.**",
                             "**Common misconceptions.**"})
      EXPECT_TRUE(contains(text, part)) << "missing " << part;
  }
}

}  // namespace
}  // namespace dpv::course
