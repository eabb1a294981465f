#include "cli/lab_step_json.h"

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "cli/train_loop.h"
#include "engine/io/atomic_file.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"

namespace dpv::cli {
namespace {

constexpr const char* kFormat = "dpv-ddp-steps";
// A log of 100,000 steps of a 1,000-bucket model stays far below this.
constexpr InputKind kStepLogInput{"step log", 256 * kMiB};

nlohmann::json step_json(const netmodel::StepMeasure& m, size_t index) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const netmodel::MeasuredBucket& b : m.buckets) {
    buckets.push_back({{"bytes", b.buffer_bytes}, {"ready_layer", b.facts.ready_layer}, {"start_s", b.start},
                       {"end_s", b.end}, {"sent_bytes", b.sent_bytes}});
  }
  nlohmann::json j = {{"step", index + 1},        {"step_s", m.step_s},
                      {"exposed_s", m.exposed_s}, {"bytes", m.bytes},
                      {"sent_bytes", m.sent_bytes}, {"forward_s", m.facts.forward_s},
                      {"backward_s", m.facts.backward_s}, {"backward_end_s", m.backward_end_s},
                      {"after_backward_s", m.facts.after_backward_s}, {"buckets", buckets}};
  // Only on a probed step (--probe-hook-error); the relative error is derived, so never infinite here.
  if (const auto& e = m.hook_error)
    j["hook_error"] = {{"error_sq", e->error_sq}, {"exact_sq", e->exact_sq}, {"max_abs", e->max_abs},
                       {"elements", e->elements}};
  return j;
}

// The number at `key` of `j`, which must be there and be a number of 0 or more.
double number_at(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key) && j.at(key).is_number() && j.at(key).get<double>() >= 0,
        where + ": '" + key + "' must be a number of 0 or more", ErrorClass::ValueError);
  return j.at(key).get<double>();
}

netmodel::StepMeasure step_from_json(const nlohmann::json& j, const std::string& where, int world) {
  netmodel::StepMeasure m;
  m.step_s = number_at(j, "step_s", where);
  m.exposed_s = number_at(j, "exposed_s", where);
  m.bytes = static_cast<size_t>(number_at(j, "bytes", where));
  m.sent_bytes = static_cast<size_t>(number_at(j, "sent_bytes", where));
  m.backward_end_s = number_at(j, "backward_end_s", where);
  m.facts.forward_s = number_at(j, "forward_s", where);
  m.facts.after_backward_s = number_at(j, "after_backward_s", where);
  m.facts.world = world;
  check(j.contains("backward_s") && j.at("backward_s").is_array(), where + ": 'backward_s' must be a list",
        ErrorClass::ValueError);
  for (const auto& s : j.at("backward_s")) {
    check(s.is_number() && s.get<double>() >= 0, where + ": 'backward_s' must hold times of 0 or more",
          ErrorClass::ValueError);
    m.facts.backward_s.push_back(s.get<double>());
  }
  if (j.contains("hook_error") && !j.at("hook_error").is_null()) {
    const auto& e = j.at("hook_error");
    const std::string at = where + " hook_error";
    m.hook_error = HookErrorMeasure{number_at(e, "error_sq", at), number_at(e, "exact_sq", at),
                                    number_at(e, "max_abs", at), static_cast<int64_t>(number_at(e, "elements", at))};
  }
  check(j.contains("buckets") && j.at("buckets").is_array(), where + ": 'buckets' must be a list",
        ErrorClass::ValueError);
  for (const auto& b : j.at("buckets")) {
    netmodel::MeasuredBucket mb;
    mb.buffer_bytes = static_cast<size_t>(number_at(b, "bytes", where + " bucket"));
    mb.facts.ready_layer = static_cast<int>(number_at(b, "ready_layer", where + " bucket"));
    mb.start = number_at(b, "start_s", where + " bucket");
    mb.end = number_at(b, "end_s", where + " bucket");
    mb.sent_bytes = static_cast<size_t>(number_at(b, "sent_bytes", where + " bucket"));
    mb.facts.bytes = netmodel::link_bytes(mb.buffer_bytes, mb.sent_bytes);
    m.facts.buckets.push_back(mb.facts);
    m.buckets.push_back(mb);
  }
  return m;
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
  log.world = static_cast<int>(number_at(doc, "world", path));
  check(log.world >= 1, path + ": 'world' must be at least 1", ErrorClass::ValueError);
  log.transport = doc.value("transport", "");
  if (doc.contains("simulated_link") && doc.at("simulated_link").is_object()) {
    const auto& l = doc.at("simulated_link");
    log.simulated_link = SimulatedLinkFacts{number_at(l, "rate_bits_per_s", path), number_at(l, "delay_s", path)};
  }
  check(doc.contains("steps") && doc.at("steps").is_array(), path + ": 'steps' must be a list", ErrorClass::ValueError);
  for (const auto& s : doc.at("steps")) {
    log.steps.push_back(step_from_json(s, path + " step " + std::to_string(log.steps.size() + 1), log.world));
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
