#include "course/network_facts.h"

#include <cstdio>
#include <string>

#include "engine/error.h"
#include "engine/netmodel/link_model.h"
#include "engine/number_text.h"

namespace dpv::course {

std::vector<NamedFact> network_fact_table(const NetworkLabPoint& p) {
  check(!p.steps.empty(), "the network lab point has no measured step: run it first", ErrorClass::ValueError);
  const netmodel::StepMeasure& last = p.steps.back();  // rank 0's
  const int world = last.facts.world;
  const auto kind = netmodel::CollectiveKind::AllReduce;
  const int messages = netmodel::collective_messages(kind, world);
  // The alpha and beta parts of the step's all-reduces, bucket by bucket, by the cost model.
  double total = 0;
  for (const netmodel::MeasuredBucket& b : last.buckets) total += netmodel::collective_seconds(kind, world, b.facts.bytes, p.link);
  const double latency = static_cast<double>(last.buckets.size()) * messages * p.link.latency_s;
  const double sent = static_cast<double>(netmodel::link_bytes(last.bytes, last.sent_bytes));
  const CommHookKind hook = p.comm_hook.kind;
  const netmodel::PointSummary& s = p.summary;
  return {
      {"world", int64_t{world}, "ranks"},
      {"rate", netmodel::rate_text(p.link.bandwidth_bytes_per_s * 8), "the link's rate, tc's form"},
      {"delay", netmodel::delay_text(p.link.latency_s), "the link's one-way delay (alpha)"},
      {"simulated", p.simulated, "the link was simulated (in-process ranks, the cost model's delays)"},
      {"step_ms", fixed_text(s.step_s * 1e3, 1), "the measured step (median), ms"},
      {"predicted_ms", fixed_text(s.predicted_step_s * 1e3, 1), "the cost model's step, ms"},
      {"ratio", fixed_text(s.ratio, 2), "measured over predicted"},
      {"exposed_ms", fixed_text(s.exposed_s * 1e3, 1), "communication the backward did not hide, ms"},
      {"predicted_exposed_ms", fixed_text(s.predicted_exposed_s * 1e3, 1), "the model's exposed time, ms"},
      {"exposed", s.exposed_s > 0, "some communication was left after the backward"},
      {"backward_ms", fixed_text((last.backward_end_s - last.facts.forward_s) * 1e3, 1), "rank 0's backward, ms"},
      {"buckets", static_cast<int64_t>(last.buckets.size()), "buckets in rank 0's last step"},
      {"several_buckets", last.buckets.size() > 1, "more than one bucket"},
      {"messages", int64_t{messages}, "messages one rank sends per ring all-reduce, 2(W-1)"},
      {"latency_ms", fixed_text(latency * 1e3, 1), "the alpha part of the step's all-reduces, ms"},
      {"bandwidth_ms", fixed_text((total - latency) * 1e3, 1), "the beta part of the step's all-reduces, ms"},
      {"latency_bound", latency > total - latency, "the delays cost more than the bytes"},
      {"buffer_mb", fixed_text(static_cast<double>(last.bytes) / 1e6, 3), "the buckets' float32 bytes, MB"},
      {"sent_mb", fixed_text(sent / 1e6, 3), "what the collectives sent, MB"},
      {"sent_percent", fixed_text(last.bytes > 0 ? 100 * sent / static_cast<double>(last.bytes) : 0, 1),
       "sent over the buckets' bytes, percent"},
      {"hooked", hook != CommHookKind::None, "a communication hook was registered"},
      {"hook", std::string(comm_hook_name(hook)), "the hook's PyTorch name"},
      {"fp16", hook == CommHookKind::Fp16Compress, "fp16_compress_hook"},
      {"powersgd", hook == CommHookKind::PowerSgd, "powerSGD_hook"},
      {"powersgd_rank", int64_t{p.comm_hook.powersgd.matrix_approximation_rank}, "PowerSGD's matrix_approximation_rank"},
      {"compressed", sent < static_cast<double>(last.bytes), "the hook sent fewer bytes than the buckets hold"},
      {"probed", s.hook_error.has_value(), "an extra step measured the hook's gradient error"},
      {"grad_error", s.hook_error ? scientific_text(s.hook_error->relative_l2(), 1) : std::string("-"),
       "the hook's averaged gradient against the exact average, relative L2 (the probed step)"},
  };
}

}  // namespace dpv::course
