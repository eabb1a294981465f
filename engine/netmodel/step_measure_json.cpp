#include "engine/netmodel/step_measure_json.h"

#include "engine/error.h"

namespace dpv::netmodel {

nlohmann::json step_measure_json(const StepMeasure& m) {
  nlohmann::json buckets = nlohmann::json::array();
  for (const MeasuredBucket& b : m.buckets) {
    buckets.push_back({{"bytes", b.buffer_bytes}, {"ready_layer", b.facts.ready_layer}, {"start_s", b.start},
                       {"end_s", b.end}, {"sent_bytes", b.sent_bytes}});
  }
  nlohmann::json j = {{"step_s", m.step_s},         {"exposed_s", m.exposed_s},
          {"bytes", m.bytes},           {"sent_bytes", m.sent_bytes},
          {"forward_s", m.facts.forward_s}, {"backward_s", m.facts.backward_s},
          {"backward_end_s", m.backward_end_s}, {"after_backward_s", m.facts.after_backward_s},
          {"buckets", buckets}};
  // Only on a probed step (--probe-hook-error); the relative error is derived, so never infinite here.
  if (m.hook_error) j["hook_error"] = hook_error_json(*m.hook_error);
  return j;
}

nlohmann::json hook_error_json(const HookErrorMeasure& e) {
  return {{"error_sq", e.error_sq}, {"exact_sq", e.exact_sq}, {"max_abs", e.max_abs}, {"elements", e.elements}};
}

HookErrorMeasure hook_error_from_json(const nlohmann::json& e, const std::string& where) {
  return HookErrorMeasure{json_number_at(e, "error_sq", where), json_number_at(e, "exact_sq", where),
                          json_number_at(e, "max_abs", where), static_cast<int64_t>(json_number_at(e, "elements", where))};
}

double json_number_at(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.is_object() && j.contains(key) && j.at(key).is_number() && j.at(key).get<double>() >= 0,
        where + ": '" + key + "' must be a number of 0 or more", ErrorClass::ValueError);
  return j.at(key).get<double>();
}

StepMeasure step_measure_from_json(const nlohmann::json& j, const std::string& where, int world) {
  StepMeasure m;
  m.step_s = json_number_at(j, "step_s", where);
  m.exposed_s = json_number_at(j, "exposed_s", where);
  m.bytes = static_cast<size_t>(json_number_at(j, "bytes", where));
  m.sent_bytes = static_cast<size_t>(json_number_at(j, "sent_bytes", where));
  m.backward_end_s = json_number_at(j, "backward_end_s", where);
  m.facts.forward_s = json_number_at(j, "forward_s", where);
  m.facts.after_backward_s = json_number_at(j, "after_backward_s", where);
  m.facts.world = world;
  check(j.contains("backward_s") && j.at("backward_s").is_array(), where + ": 'backward_s' must be a list",
        ErrorClass::ValueError);
  for (const auto& s : j.at("backward_s")) {
    check(s.is_number() && s.get<double>() >= 0, where + ": 'backward_s' must hold times of 0 or more",
          ErrorClass::ValueError);
    m.facts.backward_s.push_back(s.get<double>());
  }
  if (j.contains("hook_error") && !j.at("hook_error").is_null())
    m.hook_error = hook_error_from_json(j.at("hook_error"), where + " hook_error");
  check(j.contains("buckets") && j.at("buckets").is_array(), where + ": 'buckets' must be a list",
        ErrorClass::ValueError);
  const std::string bucket_where = where + " bucket";
  for (const auto& b : j.at("buckets")) {
    MeasuredBucket mb;
    mb.buffer_bytes = static_cast<size_t>(json_number_at(b, "bytes", bucket_where));
    mb.facts.ready_layer = static_cast<int>(json_number_at(b, "ready_layer", bucket_where));
    mb.start = json_number_at(b, "start_s", bucket_where);
    mb.end = json_number_at(b, "end_s", bucket_where);
    mb.sent_bytes = static_cast<size_t>(json_number_at(b, "sent_bytes", bucket_where));
    mb.facts.bytes = link_bytes(mb.buffer_bytes, mb.sent_bytes);
    m.facts.buckets.push_back(mb.facts);
    m.buckets.push_back(mb);
  }
  return m;
}

}  // namespace dpv::netmodel
