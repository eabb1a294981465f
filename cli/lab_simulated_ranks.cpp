#include "cli/lab_simulated_ranks.h"

#include <optional>
#include <string>

#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/netmodel/link_model.h"
#include "engine/netmodel/simulated_ranks.h"
#include "engine/trace.h"

namespace dpv::cli {

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
  const Model model(in.run.model_spec());
  const TensorMap state = model.initial_state(in.run.seed);
  const std::string words = netmodel::rate_text(in.simulated_link->rate_bits_per_s) + ", " +
                            netmodel::delay_text(in.simulated_link->delay_s);
  print_ddp_header(in, world, in.run.devices + " in-process ranks over a SIMULATED link (" + words +
                                  ": the cost model's delays, no real network)");
  std::optional<StepRecorder> steps;
  netmodel::run_simulated_ranks(world, link, [&](ProcessGroup& group) {
    DdpRankStrategy strategy(group, DeviceSet::create("cpu:1"), Model(in.run.model_spec()), state, train_ddp_options(in));
    TrainLoopInputs loop = ddp_loop_inputs(in, group.rank() == 0);
    if (group.rank() == 0)
      steps.emplace(in.step_json, world, group.backend(), in.simulated_link)
          .attach(loop, [&strategy] { return strategy.rank().hook_error(); });
    TraceRecorder unused_trace;  // --trace is refused above
    run_training_loop(strategy, loop, unused_trace);
  });
  if (steps) steps->write();
}

}  // namespace dpv::cli
