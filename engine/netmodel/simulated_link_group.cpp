#include "engine/netmodel/simulated_link_group.h"

#include <thread>
#include <utility>

namespace dpv::netmodel {

SimulatedLinkGroup::SimulatedLinkGroup(std::unique_ptr<ProcessGroup> inner, Link link)
    : inner_(std::move(inner)), link_(link) {
  // Checks the link once here rather than in the middle of a collective.
  (void)collective_seconds(CollectiveKind::AllReduce, 1, 0, link_);
}

std::string SimulatedLinkGroup::backend() const { return inner_->backend() + " over a simulated link"; }

CollectiveReport SimulatedLinkGroup::wait_out(CollectiveKind kind, CollectiveReport report,
                                              std::chrono::steady_clock::time_point started) {
  const double modelled = collective_seconds(kind, size(), report.bytes, link_);
  const auto deadline = started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                      std::chrono::duration<double>(modelled));
  const auto before_wait = std::chrono::steady_clock::now();
  if (before_wait < deadline) {
    std::this_thread::sleep_until(deadline);
    waited_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - before_wait).count();
  }
  report.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  finish_report(report);
  return report;
}

CollectiveReport SimulatedLinkGroup::all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps) {
  const auto started = std::chrono::steady_clock::now();
  return wait_out(CollectiveKind::AllReduce, inner_->all_reduce_sum(buf, steps), started);
}

CollectiveReport SimulatedLinkGroup::broadcast(Tensor& buf, int root) {
  const auto started = std::chrono::steady_clock::now();
  return wait_out(CollectiveKind::Broadcast, inner_->broadcast(buf, root), started);
}

CollectiveReport SimulatedLinkGroup::reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) {
  const auto started = std::chrono::steady_clock::now();
  return wait_out(CollectiveKind::ReduceScatter, inner_->reduce_scatter_sum(in, out, steps), started);
}

CollectiveReport SimulatedLinkGroup::all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps) {
  const auto started = std::chrono::steady_clock::now();
  return wait_out(CollectiveKind::AllGather, inner_->all_gather(in, out, steps), started);
}

CollectiveReport SimulatedLinkGroup::all_reduce_sum_float16(uint16_t* halves, int64_t n) {
  const auto started = std::chrono::steady_clock::now();
  return wait_out(CollectiveKind::AllReduce, inner_->all_reduce_sum_float16(halves, n), started);
}

std::vector<std::unique_ptr<ProcessGroup>> simulate_link(std::vector<std::unique_ptr<ProcessGroup>> group, Link link) {
  std::vector<std::unique_ptr<ProcessGroup>> out;
  out.reserve(group.size());
  for (auto& endpoint : group) out.push_back(std::make_unique<SimulatedLinkGroup>(std::move(endpoint), link));
  return out;
}

}  // namespace dpv::netmodel
