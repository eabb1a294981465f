// The Network page's lessons (lessons/network/*.md) render from a real simulated point's facts
// (course/network_facts.h) with and without a hook: no placeholder is left, the run's own numbers
// appear, and sentences true only for some runs (the hook's bytes, latency bound) follow the facts.
#include <gtest/gtest.h>

#include <string>
#include <variant>

#include "course/lesson_template.h"
#include "course/lessons.h"
#include "course/network_facts.h"
#include "course_test_util.h"
#include "engine/error.h"
#include "engine/model_spec.h"

namespace dpv::course {
namespace {

using testing::lessons_dir;

NetworkLabPoint point(CommHookKind hook, const netmodel::Link& link) {
  NetworkLabSetup setup;
  setup.model = preset_model("mlp-bn");
  setup.world = 2;
  setup.batch = 32;
  setup.steps = 4;
  setup.comm_hook.kind = hook;
  setup.comm_hook.powersgd.start_powerSGD_iter = 2;
  return run_simulated_network_point(setup, link);
}

std::string fact_text(const std::vector<NamedFact>& facts, const std::string& name) {
  for (const NamedFact& f : facts)
    if (f.name == name) return std::holds_alternative<std::string>(f.value) ? std::get<std::string>(f.value) : "";
  return "";
}

bool fact_flag(const std::vector<NamedFact>& facts, const std::string& name) {
  for (const NamedFact& f : facts)
    if (f.name == name) return std::get<bool>(f.value);
  ADD_FAILURE() << "no fact " << name;
  return false;
}

std::string render_all(const std::vector<NamedFact>& facts) {
  std::string text;
  for (const std::string& name : network_lesson_names()) {
    const std::string id = "network/" + name;
    text += render_lesson(id, load_lesson(lessons_dir(), id), facts) + "\n";
  }
  return text;
}

TEST(NetworkLessons, AreRegisteredAndRenderFromTheRunsFacts) {
  for (const std::string& name : network_lesson_names())
    EXPECT_NE(std::find(lesson_ids().begin(), lesson_ids().end(), "network/" + name), lesson_ids().end());
  const netmodel::Link slow_far{0.020, 10e6 / 8};  // tiny buckets, 20 ms: the delays dominate
  for (CommHookKind hook : {CommHookKind::None, CommHookKind::Fp16Compress}) {
    SCOPED_TRACE(comm_hook_name(hook));
    const std::vector<NamedFact> facts = network_fact_table(point(hook, slow_far));
    const std::string text = render_all(facts);
    EXPECT_EQ(text.find("{{"), std::string::npos);
    EXPECT_NE(text.find(fact_text(facts, "step_ms") + " ms"), std::string::npos);
    EXPECT_NE(text.find("20ms one-way"), std::string::npos);
    EXPECT_TRUE(fact_flag(facts, "latency_bound"));
    EXPECT_NE(text.find("**latency bound**"), std::string::npos);
    EXPECT_EQ(text.find("The ranks ran `fp16_compress_hook`") != std::string::npos, hook == CommHookKind::Fp16Compress);
    if (hook == CommHookKind::Fp16Compress) {
      EXPECT_EQ(fact_text(facts, "sent_percent"), "50.0");
      EXPECT_NE(text.find("50.0% of them"), std::string::npos);
      // The probed step's error, float16 rounding's size, appears with the run's own value.
      EXPECT_TRUE(fact_flag(facts, "probed"));
      EXPECT_NE(text.find("off by " + fact_text(facts, "grad_error")), std::string::npos);
      EXPECT_NE(fact_text(facts, "grad_error").find("e-0"), std::string::npos) << fact_text(facts, "grad_error");
    }
  }
}

TEST(NetworkLessons, AFastLinkIsBandwidthBoundNotLatencyBound) {
  const std::vector<NamedFact> facts = network_fact_table(point(CommHookKind::None, {0, 1e9}));
  EXPECT_FALSE(fact_flag(facts, "latency_bound"));
  const std::string text = render_all(facts);
  EXPECT_NE(text.find("**bandwidth bound**"), std::string::npos);
  EXPECT_EQ(text.find("latency bound"), std::string::npos);
}

TEST(NetworkLessons, APointWithoutStepsIsRefused) {
  EXPECT_THROW(network_fact_table(NetworkLabPoint{}), Error);
}

}  // namespace
}  // namespace dpv::course
