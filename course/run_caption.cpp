// The one-line description of a run a page's numbers come from (see run_caption.h).
#include "course/run_caption.h"

#include "engine/strategy.h"

namespace dpv::course {

std::string run_caption(const RunSpec& run, int64_t batch, const std::string& modes) {
  // A model given as a spec (a file, or a lab's own) has no preset name: its layer count says which.
  const std::string model = run.model ? "of " + std::to_string(run.model->layers.size()) + " layers" : run.preset;
  return "model " + model + " · seed " + std::to_string(run.seed) + " · batch " +
         std::to_string(batch > 0 ? batch : run.batch) + " · " + (modes.empty() ? strategy_name(run.strategy) : modes) +
         " · " + run.devices;
}

}  // namespace dpv::course
