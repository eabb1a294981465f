#include "engine/run/run_spec.h"

#include <algorithm>

#include "engine/ddp/ddp.h"
#include "engine/model.h"

namespace dpv {

ModelSpec RunSpec::model_spec() const { return model ? *model : preset_model(preset); }

TrainOptions train_options(const RunSpec& spec) {
  TrainOptions options;
  options.optimizer = spec.optimizer;
  options.sync_bn = spec.sync_bn;
  return options;
}

DdpOptions ddp_options(const RunSpec& spec) {
  DdpOptions options;
  static_cast<DdpSettings&>(options) = spec.ddp;
  options.optimizer = spec.optimizer;
  options.sync_bn = spec.sync_bn;
  options.zero_stage = zero_stage(spec.strategy);
  return options;
}

int64_t teaching_bucket_bytes(const ModelSpec& spec) {
  const Model model(spec);
  std::string last_layer;  // the prefix of the last layer with parameters ("6.")
  for (const auto& d : model.parameter_decls()) last_layer = d.name.substr(0, d.name.find('.') + 1);
  return std::max<int64_t>(1, parameter_bytes(model, last_layer));
}

DdpSettings teaching_ddp_settings(const ModelSpec& spec) {
  const int64_t bytes = teaching_bucket_bytes(spec);
  DdpSettings settings;
  settings.bucket_cap_mb = static_cast<double>(bytes) / (1024.0 * 1024.0);
  settings.first_bucket_bytes = static_cast<size_t>(bytes);
  return settings;
}

std::unique_ptr<Strategy> make_strategy(const RunSpec& spec, std::shared_ptr<DeviceSet> devices,
                                        const TensorMap* state) {
  Model model(spec.model_spec());
  const TensorMap initial = state ? TensorMap{} : model.initial_state(spec.seed);
  const TensorMap& start = state ? *state : initial;
  switch (spec.strategy) {
    case StrategyKind::DistributedDataParallel:
    case StrategyKind::Zero1:
    case StrategyKind::Zero2:
    case StrategyKind::Zero3:
      return std::make_unique<DdpTrainer>(std::move(devices), std::move(model), start, ddp_options(spec));
    case StrategyKind::DataParallel:
      break;
  }
  return std::make_unique<Trainer>(std::move(devices), std::move(model), start, train_options(spec));
}

}  // namespace dpv
