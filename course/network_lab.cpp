#include "course/network_lab.h"

#include <optional>
#include <string>

#include "engine/datasets.h"
#include "engine/ddp/ddp_rank_strategy.h"
#include "engine/device.h"
#include "engine/error.h"
#include "engine/model.h"
#include "engine/model_data.h"
#include "engine/netmodel/simulated_ranks.h"

namespace dpv::course {

NetworkLabPoint run_simulated_network_point(const NetworkLabSetup& setup, const netmodel::Link& link) {
  check(setup.world >= 1, "the network lab needs at least one rank, got " + std::to_string(setup.world),
        ErrorClass::ValueError);
  check(setup.steps >= 1, "the network lab needs at least one step, got " + std::to_string(setup.steps),
        ErrorClass::ValueError);
  check(setup.batch >= setup.world, "the global batch of " + std::to_string(setup.batch) +
                                        " gives some of the " + std::to_string(setup.world) + " ranks no sample",
        ErrorClass::ValueError);
  const Model model(setup.model);
  const TensorMap state = model.initial_state(setup.seed);
  // One global batch, trained on every step: the lab measures time, not learning.
  const Dataset data = make_data_for_model(setup.model, setup.batch, setup.seed + 1);
  const Dataset batch = take_batch(data, 0, setup.batch);
  DdpOptions options;
  options.bucket_cap_mb = setup.bucket_cap_mb;
  options.comm_hook = setup.comm_hook;
  const bool hooked = setup.comm_hook.kind != CommHookKind::None;
  if (hooked) check_comm_hook_options(setup.comm_hook);
  const bool probe = hooked && setup.probe_hook_error;
  if (probe) options.probe_hook_error_at = {setup.steps + 1};  // the extra last step
  std::optional<netmodel::StepMeasure> probed;  // rank 0's probe step
  NetworkLabPoint point;
  point.link = link;
  point.comm_hook = setup.comm_hook;
  point.world = setup.world;
  point.last_step_by_rank.resize(static_cast<size_t>(setup.world));
  netmodel::run_simulated_ranks(setup.world, link, [&](ProcessGroup& group) {
    DdpRankStrategy strategy(group, DeviceSet::create("cpu:1"), Model(setup.model), state, options);
    netmodel::StepMeter meter;
    const bool rank0 = group.rank() == 0;
    // Every rank meters its own steps (a timeline draws each rank); rank 0's are the summary's.
    for (int step = 0; step < setup.steps + (probe ? 1 : 0); ++step) {
      strategy.begin_iteration(batch.inputs, batch.targets, &meter)->run_to_end();
      netmodel::StepMeasure measure = meter.take(setup.world);
      if (step == setup.steps) {  // the probe: its error only (every rank ran it: it is a collective)
        if (rank0) {
          probed = std::move(measure);
          probed->hook_error = strategy.rank().hook_error();
        }
        continue;
      }
      if (step + 1 == setup.steps) point.last_step_by_rank[static_cast<size_t>(group.rank())] = measure;
      if (rank0) point.steps.push_back(std::move(measure));
    }
  });
  std::vector<netmodel::StepMeasure> all = point.steps;
  if (probed) all.push_back(*probed);
  point.summary = netmodel::summarize_point(all, link);  // leaves the probe out of the medians
  return point;
}

std::vector<NetworkLabPoint> run_simulated_network_sweep(const NetworkLabSetup& setup,
                                                         const std::vector<netmodel::Link>& links) {
  std::vector<NetworkLabPoint> points;
  points.reserve(links.size());
  for (const netmodel::Link& link : links) points.push_back(run_simulated_network_point(setup, link));
  return points;
}

}  // namespace dpv::course
