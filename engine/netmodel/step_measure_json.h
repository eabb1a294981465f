#pragma once
// One step's measure (step_meter.h StepMeasure) as JSON, and back: the one way every file that
// carries a step writes and reads it, `dpv train --step-json`'s step log (cli/lab_step_json.h),
// `dpv lab network --json`'s last step per point (cli/lab_report.h) and the app's reader of that
// report (course/network_real.h). The object (docs/cli-lab-network.md):
//   {"step_s", "exposed_s", "bytes", "sent_bytes", "forward_s", "backward_s": [per layer],
//    "backward_end_s", "after_backward_s", "buckets": [{"bytes", "ready_layer", "start_s", "end_s",
//    "sent_bytes"}], "hook_error": {"error_sq", "exact_sq", "max_abs", "elements"} on a probed step only}
// Times are seconds from the start of the step on rank 0.
#include <string>

#include <nlohmann/json.hpp>

#include "engine/netmodel/step_meter.h"

namespace dpv::netmodel {

nlohmann::json step_measure_json(const StepMeasure& measure);

// Reads a step written by step_measure_json; `world` fills facts.world (the file's own). Throws
// dpv::Error (ValueError) naming `where` and the field that is missing or not a number of 0 or more.
StepMeasure step_measure_from_json(const nlohmann::json& step, const std::string& where, int world);

// A hook's gradient error (HookErrorMeasure) as {"error_sq", "exact_sq", "max_abs", "elements"},
// and back (throws as step_measure_from_json does): a probed step's, and a lab point's.
nlohmann::json hook_error_json(const HookErrorMeasure& error);
HookErrorMeasure hook_error_from_json(const nlohmann::json& error, const std::string& where);

// The number at `key` of `object`, which must be there and be a number of 0 or more; throws
// dpv::Error (ValueError) naming `where` and `key` otherwise.
double json_number_at(const nlohmann::json& object, const char* key, const std::string& where);

}  // namespace dpv::netmodel
