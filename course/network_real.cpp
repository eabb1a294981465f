#include "course/network_real.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/io/checked_json.h"
#include "engine/io/input_file.h"
#include "engine/netmodel/step_measure_json.h"

namespace dpv::course {
namespace {

constexpr const char* kReportFormat = "dpv-lab-network";
// 256 points (the lab's most) of a 1,000-bucket model's last step stay far below this.
constexpr InputKind kLabReportInput{"lab network report", 64 * kMiB};

std::string number_text(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

// `dpv lab network --comm-hook`'s names (the hooks the lab sweeps; bf16 is not one of them).
std::string hook_name(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::None: return "";
    case CommHookKind::AllReduce: return "allreduce";
    case CommHookKind::Fp16Compress: return "fp16";
    case CommHookKind::Bf16Compress: return "bf16";
    case CommHookKind::PowerSgd: return "powersgd";
  }
  return "";
}

CommHookOptions hook_from_report(const nlohmann::json& point, const std::string& where) {
  CommHookOptions hook;
  if (!point.contains("comm_hook") || point.at("comm_hook").is_null()) return hook;
  check(point.at("comm_hook").is_string(), where + ": 'comm_hook' must be a hook's name or null", ErrorClass::ValueError);
  hook.kind = parse_comm_hook(point.at("comm_hook").get<std::string>());
  // The lab passes --powersgd-start-iter 2 with a PowerSGD point (cli/lab_point.cpp).
  if (hook.kind == CommHookKind::PowerSgd) hook.powersgd.start_powerSGD_iter = 2;
  return hook;
}

NetworkLabPoint point_from_report(const nlohmann::json& j, const LabNetworkReport& report, const std::string& where) {
  NetworkLabPoint p;
  p.world = report.world;
  p.simulated = report.simulated;
  p.simulated_reason = report.simulated_reason;
  p.netem = report.netem;
  p.link.bandwidth_bytes_per_s = netmodel::json_number_at(j, "rate_bits_per_s", where) / 8;
  p.link.latency_s = netmodel::json_number_at(j, "delay_s", where);
  p.comm_hook = hook_from_report(j, where);
  netmodel::PointSummary& s = p.summary;
  s.steps_measured = static_cast<size_t>(netmodel::json_number_at(j, "steps_measured", where));
  s.step_s = netmodel::json_number_at(j, "step_ms", where) / 1e3;
  s.predicted_step_s = netmodel::json_number_at(j, "predicted_step_ms", where) / 1e3;
  s.ratio = netmodel::json_number_at(j, "ratio", where);
  s.exposed_s = netmodel::json_number_at(j, "exposed_ms", where) / 1e3;
  s.predicted_exposed_s = netmodel::json_number_at(j, "predicted_exposed_ms", where) / 1e3;
  s.bytes_per_step = netmodel::json_number_at(j, "bytes_per_step", where);
  // A hook point's saving and its probed step's gradient error (null without a hook).
  if (j.contains("saved_bytes_per_step") && !j.at("saved_bytes_per_step").is_null())
    s.saved_bytes_per_step = netmodel::json_number_at(j, "saved_bytes_per_step", where);
  if (j.contains("hook_error") && !j.at("hook_error").is_null())
    s.hook_error = netmodel::hook_error_from_json(j.at("hook_error"), where + " hook_error");
  check(j.contains("last_step") && j.at("last_step").is_object(),
        where + ": no 'last_step' (rank 0's last step): the report is from an older dpv; run the lab again",
        ErrorClass::ValueError);
  const netmodel::StepMeasure last = netmodel::step_measure_from_json(j.at("last_step"), where + " last_step", report.world);
  p.steps = {last};
  p.last_step_by_rank = {last};
  return p;
}

}  // namespace

std::vector<std::string> lab_network_arguments(const NetworkLabSetup& setup, const std::string& preset,
                                               const netmodel::Link& link, const std::string& json_path) {
  check(setup.world >= 2 && setup.world % 2 == 0,
        "the real lab puts the same number of ranks on each of its two nodes: choose an even number of ranks, got " +
            std::to_string(setup.world),
        ErrorClass::ValueError);
  std::vector<std::string> args{"lab", "network", "--nproc-per-node", std::to_string(setup.world / 2),
                                "--rate", netmodel::rate_text(link.bandwidth_bytes_per_s * 8),
                                "--delay", netmodel::delay_text(link.latency_s),
                                "--bucket-cap-mb", number_text(setup.bucket_cap_mb)};
  if (setup.comm_hook.kind != CommHookKind::None) args.insert(args.end(), {"--comm-hook", hook_name(setup.comm_hook.kind)});
  if (!json_path.empty()) args.insert(args.end(), {"--json", json_path});
  args.insert(args.end(), {"--", "train", "--ddp", "--preset", preset, "--batch", std::to_string(setup.batch),
                           "--steps", std::to_string(setup.steps), "--seed", std::to_string(setup.seed)});
  return args;
}

std::vector<std::string> netem_probe_arguments(const NetworkLabSetup& setup, const std::string& preset,
                                               const netmodel::Link& link, const std::string& json_path) {
  NetworkLabSetup probe = setup;
  probe.steps = 1;  // the report's "netem" is what it is for, not the step
  probe.comm_hook = {};
  return lab_network_arguments(probe, preset, netmodel::Link{0, link.bandwidth_bytes_per_s}, json_path);
}

std::string shell_command(const std::string& program, const std::vector<std::string>& args) {
  auto quoted = [](const std::string& word) {
    const bool plain = !word.empty() && word.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                                "0123456789_./:=,+-@%") == std::string::npos;
    if (plain) return word;
    std::string text(1, '\'');
    for (char c : word) {
      if (c == '\'') text.append("'\\''");  // end the quote, an escaped quote, quote again
      else text.push_back(c);
    }
    text.push_back('\'');
    return text;
  };
  std::string text = quoted(program);
  for (const std::string& a : args) {
    text.push_back(' ');
    text += quoted(a);
  }
  return text;
}

std::string why_no_real_link(const RealLinkFacts& facts) {
  if (!facts.privileged)
    return "the app lacks CAP_NET_ADMIN, which network namespaces and tc need: start it as root for the real link";
  if (facts.dpv_exe.empty()) return facts.dpv_missing_reason;
  return "";
}

NetworkRunPlan plan_network_run(bool want_real, const RealLinkFacts& facts, const netmodel::Link& link) {
  NetworkRunPlan plan;
  if (!want_real) return plan;
  plan.simulated_reason = why_no_real_link(facts);
  if (!plan.simulated_reason.empty()) return plan;
  if (link.latency_s > 0 && facts.netem == false) {
    plan.simulated_reason = "this kernel has no netem qdisc (the lab found none), so a real link cannot add the " +
                            netmodel::delay_text(link.latency_s) +
                            " delay; set the delay to 0 for the real link, or load netem (modprobe sch_netem)";
    return plan;
  }
  plan.real = true;
  plan.probe_netem = link.latency_s > 0 && !facts.netem.has_value();
  return plan;
}

LabNetworkReport read_lab_network_report(const std::string& path) {
  const nlohmann::json doc = parse_json(read_file(path, kLabReportInput), path, kLabReportInput.max_bytes);
  check(doc.is_object() && doc.value("format", "") == kReportFormat && doc.value("version", 0) == 1,
        path + ": not a lab report (format '" + std::string(kReportFormat) +
            "' version 1): write it with dpv lab network --json",
        ErrorClass::ValueError);
  LabNetworkReport report;
  report.world = static_cast<int>(netmodel::json_number_at(doc, "world", path));
  check(report.world >= 1, path + ": 'world' must be at least 1", ErrorClass::ValueError);
  check(doc.contains("simulated") && doc.at("simulated").is_boolean() && doc.contains("netem") &&
            doc.at("netem").is_boolean(),
        path + ": 'simulated' and 'netem' must be true or false", ErrorClass::ValueError);
  report.simulated = doc.at("simulated").get<bool>();
  report.netem = doc.at("netem").get<bool>();
  if (doc.contains("simulated_reason") && doc.at("simulated_reason").is_string())
    report.simulated_reason = doc.at("simulated_reason").get<std::string>();
  check(doc.contains("points") && doc.at("points").is_array(), path + ": 'points' must be a list", ErrorClass::ValueError);
  for (const auto& j : doc.at("points"))
    report.points.push_back(point_from_report(j, report, path + " point " + std::to_string(report.points.size() + 1)));
  return report;
}

std::string network_link_text(const NetworkLabPoint& p) {
  const std::string rate = netmodel::rate_text(p.link.bandwidth_bytes_per_s * 8);
  if (!p.simulated) {
    std::string text = "Real shaped link: 2 network namespaces joined by a veth pair, tc tbf at " + rate;
    if (p.netem) text += ", netem delay " + netmodel::delay_text(p.link.latency_s);
    text += "; the " + std::to_string(p.world) + " ranks' Gloo messages crossed it.";
    if (static_cast<int>(p.last_step_by_rank.size()) < p.world)
      text += " The lab logs rank 0's steps only, so the timeline draws rank 0 alone.";
    return text;
  }
  std::string text = "Simulated link: " + rate + ", " + netmodel::delay_text(p.link.latency_s) +
                     " one-way; the delays come from the cost model, no packet crossed a network.";
  if (!p.simulated_reason.empty()) text += " Not the real link: " + p.simulated_reason + ".";
  return text;
}

}  // namespace dpv::course
