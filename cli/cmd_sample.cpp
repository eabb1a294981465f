// `dpv sample`: the source document's sample program (course/sample_program.h), run by the engine.
//   model = SimpleModel()  (nn.Linear(10, 2));  DataParallel when more than one device
//   inputs = torch.randn(32, 10); labels = torch.randint(0, 2, (32,))
//   loss = CrossEntropyLoss; optimizer = SGD(lr=0.01); one step; print(f"Loss: {loss.item():.4f}")
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/flag_errors.h"
#include "cli/int_options.h"
#include "cli/format.h"
#include "course/sample_program.h"
#include "engine/backend_registry.h"
#include "engine/device.h"

namespace dpv::cli {
namespace {

struct SampleOptions {
  std::string devices;  // empty: every GPU when CUDA is available, else cpu:1
  uint64_t seed = 0;
};

void run_sample(const SampleOptions& o) {
  std::string spec = o.devices;
  if (spec.empty()) spec = cuda_available() ? "cuda" : "cpu:1";
  auto devices = o.devices.empty() ? DeviceSet::create(spec) : devices_from_flag(spec);

  // The seed program's two branches, keyed on the number of devices as it keys on device_count().
  if (devices->size() > 1) {
    std::cout << "Using " << devices->size() << " GPUs\n";
  } else {
    std::cout << "Using single GPU or CPU\n";
  }

  const course::SampleRun run = course::run_sample_program(devices, o.seed);

  std::cout << "  model: SimpleModel = " << run.model_text << "\n";
  std::cout << "  devices: " << spec << " (" << devices->size() << "): ";
  for (int d = 0; d < devices->size(); ++d) std::cout << (d ? ", " : "") << (*devices)[d].label();
  std::cout << "\n";
  if (run.chunks.size() > 1) {
    std::cout << "  scatter: batch " << course::kSampleBatch << " -> torch.chunk sizes " << list_str(run.chunks)
              << ", one replica per chunk; outputs gathered on device 0 " << shape_str(run.output_shape) << "\n";
    std::cout << "  backward: gradients of the " << run.chunks.size()
              << " replicas summed onto device 0, then one SGD step\n";
  } else {
    std::cout << "  one device: no scatter, replicate or gather; the model runs on the whole batch of "
              << course::kSampleBatch << "\n";
  }
  std::cout << "Loss: " << py_fixed(run.loss, 4) << std::endl;
}

}  // namespace

void add_sample_command(CLI::App& app, Action& run) {
  auto opts = std::make_shared<SampleOptions>();
  auto* sub = app.add_subcommand("sample", "The source document's sample program: SimpleModel, batch 32, one SGD step");
  sub->add_option("--devices", opts->devices, "Device spec: cpu:K, cuda, cuda:0,1, cuda:0xK (default: every GPU, else cpu:1)");
  sub->add_option("--seed", opts->seed, "Seed for the weights and the dummy data")->capture_default_str()->transform(integer_in<uint64_t>());
  sub->callback([opts, &run] { run = [opts] { run_sample(*opts); }; });
}

}  // namespace dpv::cli
