#include "cli/lab_simulated_ranks.h"

#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/netmodel/link_model.h"
#include "engine/netmodel/simulated_link_group.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/run/run_spec.h"
#include "engine/trace.h"

namespace dpv::cli {
namespace {

// Stops every rank waiting in a collective once one rank failed, so none waits for ever.
void abort_all(std::vector<std::unique_ptr<ProcessGroup>>& group, const std::string& reason) {
  for (auto& endpoint : group) {
    abort_in_process_group(static_cast<netmodel::SimulatedLinkGroup&>(*endpoint).inner(), reason);
  }
}

}  // namespace

void run_simulated_ranks(const TrainDdpInputs& in) {
  check(in.trace.empty(), "--trace cannot be combined with a simulated link: run without --simulated-rate to trace",
        ErrorClass::ValueError);
  check(in.checkpoint.dir.empty(),
        "--checkpoint cannot be combined with a simulated link: a simulated run measures, it keeps nothing",
        ErrorClass::ValueError);
  const DeviceSpec spec = parse_device_spec(in.run.devices);
  check(spec.kind == DeviceKind::Cpu, "--simulated-rate runs CPU ranks: give --devices cpu:K, got --devices " +
                                          in.run.devices, ErrorClass::ValueError);
  const int world = spec.count;
  const netmodel::Link link{in.simulated_link->delay_s, in.simulated_link->rate_bits_per_s / 8};
  auto group = netmodel::simulate_link(make_in_process_group(world), link);
  const Model model(in.run.model_spec());
  const TensorMap state = model.initial_state(in.run.seed);
  const std::string words = netmodel::rate_text(in.simulated_link->rate_bits_per_s) + ", " +
                            netmodel::delay_text(in.simulated_link->delay_s);
  print_ddp_header(in, world, in.run.devices + " in-process ranks over a SIMULATED link (" + words +
                                  ": the cost model's delays, no real network)");
  StepRecorder steps(in.step_json, world, group[0]->backend(), in.simulated_link);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(world));
  std::mutex abort_mutex;
  int first_failed = -1;  // the rank whose own error stopped the run (the others then see the abort)
  std::vector<std::thread> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.emplace_back([&, r] {
      try {
        DdpRankStrategy strategy(*group[static_cast<size_t>(r)], DeviceSet::create("cpu:1"), Model(in.run.model_spec()),
                                 state, ddp_options(in.run));
        TrainLoopInputs loop = ddp_loop_inputs(in, r == 0);
        if (r == 0) steps.attach(loop);
        TraceRecorder unused_trace;  // --trace is refused above
        run_training_loop(strategy, loop, unused_trace);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(abort_mutex);
        errors[static_cast<size_t>(r)] = std::current_exception();
        if (first_failed >= 0) return;
        first_failed = r;
        abort_all(group, "rank " + std::to_string(r) + " failed");
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  if (first_failed >= 0) std::rethrow_exception(errors[static_cast<size_t>(first_failed)]);
  steps.write();
}

}  // namespace dpv::cli
