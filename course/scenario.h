#pragma once
// Runs a quiz question's scenario on the real engine and reports what it computed. The answer
// a scenario implies comes from the engine (chunk sizes of the Scatter stage, the gathered output
// shape, the error the engine raised, the running statistics that survived, ...), then is matched
// against the options' "value" fields: the engine, not a table, says which option is right.
#include <string>
#include <utility>
#include <vector>

#include "course/quiz.h"

namespace dpv::course {

struct ScenarioResult {
  std::string title;                                       // one line: what ran
  std::vector<std::string> lines;                          // what happened, in order, plain text
  std::vector<std::pair<std::string, std::string>> facts;  // key/value: "chunks" -> "4, 4"
  std::string answer_value;  // the engine's answer in the options' "value" vocabulary
  std::string answer_label;  // the option whose value matches ("" when none does)
  int answer_line = -1;      // index in `lines` of the sentence naming that option (or none); -1: no such line
  bool failed = false;       // the scenario itself could not run (message in `lines`)
};

// Scenario types: "scatter", "output_shape", "dtype_mismatch", "batchnorm", "gradients",
// "loss_in_model", "memory", "plan"; for DDP: "sampler", "ddp_loss", "ddp_gradients", "ddp_buffers",
// "ddp_memory", "ddp_buckets", "ddp_resume"; for ZeRO and FSDP: "zero_layout", "zero_traffic", "zero_state";
// for the network: "ddp_network".
const std::vector<std::string>& scenario_types();

// Checks a scenario's type and parameters without running anything; empty when fine.
std::string scenario_problem(const QuizScenario& scenario);

// Runs the scenario on simulated CPU devices ("cpu:K"). Engine errors the scenario expects are
// part of the result; unexpected ones give failed = true with the message. Never throws.
// Runs in the calling thread (the app calls it from a worker thread); it can take a second or two.
ScenarioResult run_scenario(const QuizScenario& scenario);
// Same, and fills answer_label from the question's options.
ScenarioResult run_question_scenario(const QuizQuestion& question);

}  // namespace dpv::course
