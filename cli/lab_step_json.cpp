#include "cli/lab_step_json.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "cli/train_loop.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"
#include "engine/netmodel/step_measure_json.h"

namespace dpv::cli {
namespace {

constexpr const char* kFormat = "dpv-ddp-steps";
// A log of 100,000 steps of a 1,000-bucket model stays far below this.
constexpr InputKind kStepLogInput{"step log", 256 * kMiB};

nlohmann::json step_json(const netmodel::StepMeasure& m, size_t index) {
  nlohmann::json step = netmodel::step_measure_json(m);
  step["step"] = index + 1;
  return step;
}

}  // namespace

std::string step_log_json(const StepLog& log) {
  nlohmann::json steps = nlohmann::json::array();
  for (size_t i = 0; i < log.steps.size(); ++i) steps.push_back(step_json(log.steps[i], i));
  nlohmann::json link = nullptr;
  if (log.simulated_link) {
    link = {{"rate_bits_per_s", log.simulated_link->rate_bits_per_s}, {"delay_s", log.simulated_link->delay_s}};
  }
  const nlohmann::json doc = {{"format", kFormat}, {"version", 1},          {"world", log.world},
                              {"transport", log.transport}, {"simulated_link", link}, {"steps", steps}};
  return doc.dump(1) + "\n";
}

StepLog read_step_log(const std::string& path) {
  const nlohmann::json doc = parse_json(read_file(path, kStepLogInput), path, kStepLogInput.max_bytes);
  check(doc.is_object() && doc.value("format", "") == kFormat && doc.value("version", 0) == 1,
        path + ": not a step log (format '" + std::string(kFormat) + "' version 1): write it with dpv train --ddp --step-json",
        ErrorClass::ValueError);
  StepLog log;
  log.world = static_cast<int>(netmodel::json_number_at(doc, "world", path));
  check(log.world >= 1, path + ": 'world' must be at least 1", ErrorClass::ValueError);
  log.transport = doc.value("transport", "");
  if (doc.contains("simulated_link") && doc.at("simulated_link").is_object()) {
    const auto& l = doc.at("simulated_link");
    log.simulated_link = SimulatedLinkFacts{netmodel::json_number_at(l, "rate_bits_per_s", path), netmodel::json_number_at(l, "delay_s", path)};
  }
  check(doc.contains("steps") && doc.at("steps").is_array(), path + ": 'steps' must be a list", ErrorClass::ValueError);
  for (const auto& s : doc.at("steps")) {
    log.steps.push_back(netmodel::step_measure_from_json(s, path + " step " + std::to_string(log.steps.size() + 1), log.world));
  }
  return log;
}

}  // namespace dpv::cli

namespace dpv::cli {

StepRecorder::StepRecorder(std::string path, int world, std::string transport, std::optional<SimulatedLinkFacts> link)
    : path_(std::move(path)) {
  log_.world = world;
  log_.transport = std::move(transport);
  log_.simulated_link = link;
}

void StepRecorder::attach(TrainLoopInputs& loop, HookErrorSource hook_error) {
  if (path_.empty()) return;
  loop.observer = &meter_;
  loop.after_step = [this, next = loop.after_step, hook_error = std::move(hook_error)](int64_t done) {
    log_.steps.push_back(meter_.take(log_.world));
    if (hook_error) log_.steps.back().hook_error = hook_error();
    if (next) next(done);
  };
}

void StepRecorder::write() const {
  if (!path_.empty()) write_file_atomic(path_, step_log_json(log_));
}

}  // namespace dpv::cli
