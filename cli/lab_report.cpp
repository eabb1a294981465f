#include "cli/lab_report.h"

#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "engine/netmodel/link_model.h"
#include "engine/netmodel/step_measure_json.h"
#include "engine/number_text.h"

namespace dpv::cli {
namespace {

std::string compact(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string padded(const std::string& text, size_t width) {
  return text.size() >= width ? text + " " : text + std::string(width - text.size(), ' ');
}

// The relative L2 error as the table shows it ("3.1e-04"), "-" where no hook was probed.
std::string grad_error_text(const netmodel::PointSummary& s) {
  return s.hook_error ? scientific_text(s.hook_error->relative_l2(), 1) : "-";
}

}  // namespace

void print_lab_header(std::ostream& out, const LabReport& r) {
  out << "dpv lab network: 2 nodes x " << r.nproc_per_node << " rank" << (r.nproc_per_node == 1 ? "" : "s")
      << " (world " << r.world << "), DDP's bucket all-reduces on a ring that crosses the link in both directions\n";
  if (r.simulated) {
    out << "simulated: " << r.simulated_reason << "\n"
        << "link: SIMULATED (in-process ranks; each collective waits out the cost model's time, no packet is sent)\n";
  } else {
    out << "link: veth pair between two network namespaces, tc tbf at the rate on both ends; netem "
        << (r.netem ? "present (delay and loss applied)" : "absent (no delay or loss: tbf only)") << "\n";
  }
  out << "model: ring all-reduce 2(W-1)(a + n/(W b)) per bucket, buckets in order one at a time, overlapped with "
         "the measured backward per layer; medians over the steps after "
      << netmodel::kWarmupSteps << " warm-up steps\n";
}

void print_lab_columns(std::ostream& out) {
  out << padded("rate", 10) << padded("delay", 8) << padded("bucket_mb", 10) << padded("hook", 10) << padded("step_ms", 9)
      << padded("pred_ms", 9) << padded("ratio", 7) << padded("exposed_ms", 11) << padded("pred_exp_ms", 12)
      << padded("MB/step", 9) << padded("MB_saved", 9) << "grad_error\n"
      << std::flush;  // to a pipe or file too: the header shows before the first point ends
}

void print_lab_row(std::ostream& out, const LabPointResult& r) {
  const netmodel::PointSummary& s = r.summary;
  out << padded(netmodel::rate_text(r.point.shape.rate_bits_per_s), 10)
      << padded(netmodel::delay_text(r.point.shape.delay_s), 8) << padded(compact(r.point.bucket_cap_mb), 10)
      << padded(r.point.comm_hook.empty() ? "-" : r.point.comm_hook, 10)
      << padded(fixed_text(s.step_s * 1e3, 2), 9) << padded(fixed_text(s.predicted_step_s * 1e3, 2), 9)
      << padded(fixed_text(s.ratio, 2), 7) << padded(fixed_text(s.exposed_s * 1e3, 2), 11)
      << padded(fixed_text(s.predicted_exposed_s * 1e3, 2), 12) << padded(fixed_text(s.bytes_per_step / 1e6, 3), 9)
      << padded(r.point.comm_hook.empty() ? "-" : fixed_text(s.saved_bytes_per_step / 1e6, 3), 9) << grad_error_text(s)
      << "\n"
      << std::flush;
}

std::string lab_report_json(const LabReport& r) {
  nlohmann::json points = nlohmann::json::array();
  for (const LabPointResult& p : r.points) {
    const netmodel::PointSummary& s = p.summary;
    points.push_back({{"rate_bits_per_s", p.point.shape.rate_bits_per_s},
                      {"delay_s", p.point.shape.delay_s},
                      {"loss_percent", p.point.shape.loss_percent},
                      {"bucket_cap_mb", p.point.bucket_cap_mb},
                      {"comm_hook", p.point.comm_hook.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.point.comm_hook)},
                      {"steps_measured", s.steps_measured},
                      {"step_ms", s.step_s * 1e3},
                      {"predicted_step_ms", s.predicted_step_s * 1e3},
                      {"ratio", s.ratio},
                      {"exposed_ms", s.exposed_s * 1e3},
                      {"predicted_exposed_ms", s.predicted_exposed_s * 1e3},
                      {"bytes_per_step", s.bytes_per_step},
                      {"last_step", netmodel::step_measure_json(p.last_step)}});
    // A hook point: the bytes it saved against allreduce's and the gradient error they cost (its
    // probed step); the error is null where it is not finite (an all-zero exact gradient).
    const nlohmann::json none = nullptr;
    const double error = s.hook_error ? s.hook_error->relative_l2() : 0;
    points.back()["saved_bytes_per_step"] = p.point.comm_hook.empty() ? none : nlohmann::json(s.saved_bytes_per_step);
    points.back()["grad_error"] = s.hook_error && std::isfinite(error) ? nlohmann::json(error) : none;
    points.back()["grad_error_max_abs"] = s.hook_error ? nlohmann::json(s.hook_error->max_abs) : none;
    points.back()["hook_error"] = s.hook_error ? netmodel::hook_error_json(*s.hook_error) : none;
  }
  nlohmann::json doc = {{"format", "dpv-lab-network"}, {"version", 1},
                        {"nproc_per_node", r.nproc_per_node}, {"world", r.world},
                        {"simulated", r.simulated}, {"netem", r.netem}, {"points", points}};
  doc["simulated_reason"] = r.simulated ? nlohmann::json(r.simulated_reason) : nlohmann::json(nullptr);
  return doc.dump(1) + "\n";
}

}  // namespace dpv::cli
