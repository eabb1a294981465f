#pragma once
// A simulated link for in-process ranks, where no real network can be shaped (no CAP_NET_ADMIN):
// a ProcessGroup decorator that runs each collective on the wrapped group, then waits out what
// the cost model (link_model.h) says the collective would take on `link`, minus the time it
// really took (never negative). The wait is the model's, not a network's: every output of a run
// over it must say "simulated". Its reports carry the waited time, so algbw and busbw are the
// simulated link's.
//
// It starts no all-reduce of its own (start_all_reduce_sum stays null), so DDP's Reducer runs
// each bucket on its rank's communication thread, as over Gloo, and the wait overlaps the backward
// as a real transfer would.
#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/netmodel/link_model.h"
#include "engine/process_groups/process_group.h"

namespace dpv::netmodel {

class SimulatedLinkGroup : public ProcessGroup {
 public:
  SimulatedLinkGroup(std::unique_ptr<ProcessGroup> inner, Link link);

  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  std::string backend() const override;  // "in-process ring over a simulated link"
  CollectiveReport all_reduce_sum(Tensor& buf, std::vector<RingStep>* steps = nullptr) override;
  CollectiveReport broadcast(Tensor& buf, int root) override;
  CollectiveReport reduce_scatter_sum(const Tensor& in, Tensor& out, std::vector<RingStep>* steps = nullptr) override;
  CollectiveReport all_gather(const Tensor& in, Tensor& out, std::vector<RingStep>* steps = nullptr) override;
  // The inner group's float16 all-reduce, waited out as an all-reduce of its 2 bytes per element.
  CollectiveReport all_reduce_sum_float16(uint16_t* halves, int64_t n) override;
  void barrier() override { inner_->barrier(); }

  ProcessGroup& inner() { return *inner_; }
  const Link& link() const { return link_; }
  // Seconds this rank has waited for the simulated link so far (the model's time beyond the real one).
  double waited_s() const { return waited_s_; }

 private:
  // Waits until `started` + the modelled time of `report`, and puts the whole time in the report.
  CollectiveReport wait_out(CollectiveKind kind, CollectiveReport report, std::chrono::steady_clock::time_point started);

  std::unique_ptr<ProcessGroup> inner_;
  Link link_;
  double waited_s_ = 0;
};

// Every endpoint of `group` (make_in_process_group's) behind a SimulatedLinkGroup on `link`.
std::vector<std::unique_ptr<ProcessGroup>> simulate_link(std::vector<std::unique_ptr<ProcessGroup>> group, Link link);

}  // namespace dpv::netmodel
