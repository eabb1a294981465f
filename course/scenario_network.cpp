// The network quiz's scenario (lessons/quiz/10-network.json): what a link costs DDP's all-reduce,
// from the alpha-beta model the Network page draws (engine/netmodel/link_model.h), and what a
// communication hook puts on the link, measured by running DDP's ranks with the hook over a
// simulated link (course/network_lab.h). The answers are computed here, never typed into the quiz.
#include <cmath>
#include <cstdio>
#include <string>

#include "course/network_lab.h"
#include "course/scenario_support.h"
#include "engine/error.h"
#include "engine/netmodel/ddp_step_model.h"
#include "engine/netmodel/link_model.h"
#include "engine/number_text.h"

namespace dpv::course::detail {

namespace {

netmodel::Link scenario_link(const Params& p) {
  return {netmodel::parse_delay_s(p.text("delay", "0"), "'delay'"),
          netmodel::parse_rate_bits_per_s(p.text("rate"), "'rate'") / 8};
}

// DDP's ranks over a simulated `link` with the scenario's model and hook, 4 steps (PowerSGD
// compresses from its second step).
NetworkLabPoint run_point(const Params& p, const netmodel::Link& link, bool error_feedback = true) {
  NetworkLabSetup setup;
  setup.model = scenario_model(p, "simple");
  setup.world = p.integer("devices");
  setup.batch = p.integer("batch", 8);
  setup.steps = 4;
  setup.bucket_cap_mb = p.j.value("bucket_cap_mb", 25.0);
  if (p.j.contains("hook")) setup.comm_hook.kind = parse_comm_hook(p.text("hook"));
  setup.comm_hook.powersgd.matrix_approximation_rank = p.integer("rank", 1);
  setup.comm_hook.powersgd.start_powerSGD_iter = 2;
  setup.comm_hook.powersgd.use_error_feedback = error_feedback;
  return run_simulated_network_point(setup, link);
}

std::string hook_title(const Params& p) {
  return (p.j.contains("hook") ? std::string(comm_hook_name(parse_comm_hook(p.text("hook")))) : std::string("DDP")) +
         " on cpu:" + std::to_string(p.integer("devices")) + ", the last of 4 DDP steps";
}

// The share of the plain all-reduce's bytes a hook sends: rank 0's last step.
ScenarioResult hook_bytes(const Params& p, const netmodel::Link& link) {
  const netmodel::StepMeasure last = run_point(p, link).steps.back();
  check(last.bytes > 0, "the run all-reduced no bucket: give a model with parameters", ErrorClass::ValueError);
  const double percent = 100.0 * static_cast<double>(netmodel::link_bytes(last.bytes, last.sent_bytes)) /
                         static_cast<double>(last.bytes);
  ScenarioResult r;
  r.title = hook_title(p);
  r.lines.push_back("The buckets hold " + std::to_string(last.bytes) + " bytes of float32 gradients.");
  r.lines.push_back("The hook's collectives sent " + std::to_string(last.sent_bytes) + " bytes: " + fixed_text(percent, 1) +
                    "% of the plain all-reduce's.");
  r.facts = {{"bucket bytes", std::to_string(last.bytes)}, {"sent bytes", std::to_string(last.sent_bytes)}};
  r.answer_value = fixed_text(percent, 1) + "%";
  return r;
}

// PowerSGD with and without error feedback: what each sends in its last step.
ScenarioResult error_feedback_bytes(const Params& p, const netmodel::Link& link) {
  const netmodel::StepMeasure with = run_point(p, link, true).steps.back();
  const netmodel::StepMeasure without = run_point(p, link, false).steps.back();
  ScenarioResult r;
  r.title = hook_title(p) + ", with and without error feedback";
  r.lines.push_back("With error feedback the hook sent " + std::to_string(with.sent_bytes) + " bytes; without, " +
                    std::to_string(without.sent_bytes) + ".");
  r.answer_value = with.sent_bytes == without.sent_bytes ? "same" : with.sent_bytes > without.sent_bytes ? "more" : "less";
  return r;
}

// Whether rank 0's first bucket goes out before its backward ends (the overlap buckets buy), by the
// step model on the run's own compute times (each layer's measured backward): the rule DDP follows,
// not a race between two measured clocks on a busy machine.
ScenarioResult overlap(const Params& p, const netmodel::Link& link) {
  const netmodel::StepMeasure last = run_point(p, link).steps.back();
  check(!last.buckets.empty(), "the run all-reduced no bucket: give a model with parameters", ErrorClass::ValueError);
  const netmodel::DdpStepPrediction model = netmodel::predict_ddp_step(last.facts, link);
  ScenarioResult r;
  r.title = hook_title(p);
  r.lines.push_back("Rank 0 had " + std::to_string(last.buckets.size()) + " buckets; the first was ready at " +
                    fixed_text(model.buckets.front().ready * 1e3, 2) + " ms and the backward ended at " +
                    fixed_text(model.backward_end * 1e3, 2) + " ms.");
  r.answer_value = last.buckets.size() > 1 && model.buckets.front().start < model.backward_end ? "overlap" : "after";
  return r;
}

}  // namespace

ScenarioResult run_network_cost(const Params& p) {
  const int world = p.integer("devices");
  const std::string ask = p.text("ask");
  const netmodel::Link link = scenario_link(p);
  if (ask == "bytes_ratio") return hook_bytes(p, link);
  if (ask == "error_feedback_bytes") return error_feedback_bytes(p, link);
  if (ask == "overlap") return overlap(p, link);
  check(world >= 2, "one rank sends nothing: use 'devices' of 2 or more", ErrorClass::ValueError);
  const auto kind = netmodel::CollectiveKind::AllReduce;
  const auto bytes = static_cast<size_t>(p.integer("bytes"));
  const int messages = netmodel::collective_messages(kind, world);
  const double total = netmodel::collective_seconds(kind, world, bytes, link);
  const double latency = messages * link.latency_s;
  ScenarioResult r;
  r.title = "A ring all-reduce of " + std::to_string(bytes) + " bytes on " + std::to_string(world) + " ranks over " +
            netmodel::rate_text(link.bandwidth_bytes_per_s * 8) + ", " + netmodel::delay_text(link.latency_s) + " one-way";
  r.lines.push_back("Each rank sends " + std::to_string(messages) + " messages of " + std::to_string(bytes / world) +
                    " bytes: 2(W-1) steps of n/W.");
  r.lines.push_back("Latency (alpha) part: " + fixed_text(latency * 1e3, 1) + " ms; bandwidth (beta) part: " +
                    fixed_text((total - latency) * 1e3, 1) + " ms; in all " + fixed_text(total * 1e3, 1) + " ms.");
  r.facts = {{"messages", std::to_string(messages)}, {"all-reduce ms", fixed_text(total * 1e3, 1)}};
  if (ask == "messages") {
    r.answer_value = std::to_string(messages);
  } else if (ask == "bound") {
    r.answer_value = latency > total - latency ? "latency" : "bandwidth";
  } else if (ask == "growth") {  // this all-reduce against the same bytes on 2 ranks
    const double two = netmodel::collective_seconds(kind, 2, bytes, link);
    r.lines.push_back("On 2 ranks the same all-reduce takes " + fixed_text(two * 1e3, 1) + " ms.");
    r.answer_value = fixed_text(total / two, 1) + "x";
  } else {  // allreduce_ms
    r.answer_value = fixed_text(total * 1e3, 0);
  }
  return r;
}

}  // namespace dpv::course::detail
