// `dpv sample`: the source document's sample program, run by the engine.
//   model = SimpleModel()  (nn.Linear(10, 2));  DataParallel when more than one device
//   inputs = torch.randn(32, 10); labels = torch.randint(0, 2, (32,))
//   loss = CrossEntropyLoss; optimizer = SGD(lr=0.01); one step; print(f"Loss: {loss.item():.4f}")
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/format.h"
#include "engine/backend_registry.h"
#include "engine/data_parallel.h"
#include "engine/datasets.h"
#include "engine/device.h"
#include "engine/model.h"

namespace dpv::cli {
namespace {

struct SampleOptions {
  std::string devices;  // empty: every GPU when CUDA is available, else cpu:1
  uint64_t seed = 0;
};

void run_sample(const SampleOptions& o) {
  std::string spec = o.devices;
  if (spec.empty()) spec = cuda_available() ? "cuda" : "cpu:1";
  auto devices = DeviceSet::create(spec);

  // The seed program's two branches, keyed on the number of devices as it keys on device_count().
  if (devices->size() > 1) {
    std::cout << "Using " << devices->size() << " GPUs\n";
  } else {
    std::cout << "Using single GPU or CPU\n";
  }

  Model model(preset_model("simple"));
  TensorMap state = model.initial_state(o.seed);
  // Dummy data: inputs ~ N(0, 1) [32, 10], labels in {0, 1} [32].
  Rng rng(o.seed + 1);
  std::vector<double> x(32 * 10);
  for (double& v : x) v = rng.normal();
  std::vector<int64_t> y(32);
  for (int64_t& v : y) v = rng.randint(2);
  Tensor inputs = Tensor::from_doubles({32, 10}, model.dtype(), x);
  Tensor labels = Tensor::from_int64({32}, y);

  Trainer trainer(devices, std::move(model), state, TrainOptions{0.01, 0.0, 0.0, false});
  Iteration it(trainer, inputs, labels);
  it.run_to_end();

  std::cout << "  model: SimpleModel = " << trainer.model().layer(0).describe() << "\n";
  std::cout << "  devices: " << spec << " (" << devices->size() << "): ";
  for (int d = 0; d < devices->size(); ++d) std::cout << (d ? ", " : "") << (*devices)[d].label();
  std::cout << "\n";
  if (it.replicas() > 1) {
    std::cout << "  scatter: batch 32 -> torch.chunk sizes " << list_str(it.chunks()) << ", one replica per chunk;"
              << " outputs gathered on device 0 " << shape_str(it.output().shape()) << "\n";
    std::cout << "  backward: gradients of the " << it.replicas() << " replicas summed onto device 0, then one SGD step\n";
  } else {
    std::cout << "  one device: no scatter, replicate or gather; the model runs on the whole batch of 32\n";
  }
  char line[64];
  std::snprintf(line, sizeof line, "Loss: %.4f", it.loss());
  std::cout << line << std::endl;
}

}  // namespace

void add_sample_command(CLI::App& app, Action& run) {
  auto opts = std::make_shared<SampleOptions>();
  auto* sub = app.add_subcommand("sample", "The source document's sample program: SimpleModel, batch 32, one SGD step");
  sub->add_option("--devices", opts->devices, "Device spec: cpu:K, cuda, cuda:0,1, cuda:0xK (default: every GPU, else cpu:1)");
  sub->add_option("--seed", opts->seed, "Seed for the weights and the dummy data")->capture_default_str();
  sub->callback([opts, &run] { run = [opts] { run_sample(*opts); }; });
}

}  // namespace dpv::cli
