#pragma once
// The seed's sample program, once: its Python text, its model (SimpleModel = nn.Linear(10, 2)) and
// its data (torch.randn inputs, torch.randint labels). `dpv sample` runs it, the app's Iteration page
// shows its text and, for the SimpleModel preset, trains on its data.
//
//   model = SimpleModel(); model = nn.DataParallel(model)
//   inputs = torch.randn(32, 10); labels = torch.randint(0, 2, (32,))
//   loss = CrossEntropyLoss()(model(inputs), labels); SGD(lr=0.01); one step
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/datasets.h"
#include "engine/model_spec.h"
#include "engine/observer.h"

namespace dpv {
class DeviceSet;
}

namespace dpv::course {

// The program's fixed numbers.
inline constexpr int64_t kSampleBatch = 32;
inline constexpr int64_t kSampleFeatures = 10;
inline constexpr int kSampleClasses = 2;
inline constexpr double kSampleLr = 0.01;
inline constexpr const char* kSamplePreset = "simple";  // preset_model's name for SimpleModel

// SimpleModel: nn.Linear(10, 2).
ModelSpec sample_model();

// The program's data for `rows` samples: inputs [rows, 10] ~ N(0, 1), labels [rows] in [0, 2).
// The weights take `seed` (Model::initial_state), the data a generator seeded with seed + 1, so the
// same seed gives the same program run everywhere.
Dataset sample_data(int64_t rows, uint64_t seed, DType dtype = DType::Float32);

// The data the program text (sample_program below) builds for any preset: `inputs =
// torch.randn(rows, <the model's input shape>)`, `labels = torch.randint(0, <classes>, (rows,))`,
// drawn as sample_data draws them (so "simple" gives sample_data's values). Any batch of at least
// one sample works for any number of classes. Throws dpv::Error for an unknown preset or rows < 1.
Dataset program_data(const std::string& preset, int64_t rows, uint64_t seed);

// The smallest batch of at least `batch` samples (and at least 4 per device) that leaves every
// device at least 2 samples when `preset` has BatchNorm layers (a chunk of 1 sample makes BatchNorm
// raise in training, as in PyTorch); `batch` itself otherwise. `devices` is the device count.
int64_t batch_that_works(const std::string& preset, int64_t batch, int devices);

// What one run of the program shows.
struct SampleRun {
  int devices = 0;                // devices in the set (DataParallel splits over them when > 1)
  std::vector<int64_t> chunks;    // torch.chunk sizes of the batch, one per replica
  Shape output_shape;             // the gathered output [32, 2]
  std::string model_text;         // "Linear(in_features=10, out_features=2, bias=True)"
  double loss = 0;                // loss.item() of the one step
};
// Builds SimpleModel from `seed`, takes one SGD step (lr 0.01) on the program's 32 samples over
// `devices`. Throws dpv::Error as the engine does.
SampleRun run_sample_program(const std::shared_ptr<DeviceSet>& devices, uint64_t seed);

// The program's text for a preset: the seed's SimpleModel class for "simple", an nn.Sequential of
// the preset's layers otherwise. With `sync_bn` it also shows the DDP + SyncBatchNorm code whose
// whole-batch statistics the app computes (nn.DataParallel itself cannot sync BatchNorm). Each line
// names the stages it stands for (outputs = model(inputs): scatter, replicate, forward, gather) and
// the layer it defines, so a view can highlight the line of the stage that runs.
struct ProgramLine {
  std::string text;
  std::vector<StageKind> stages;
  int layer = -1;
};
struct ProgramOptions {
  std::string preset = kSamplePreset;
  bool sync_bn = false;
  int64_t batch = kSampleBatch;
  double lr = kSampleLr;
  std::string devices = "cpu:4";
};
// Throws dpv::Error for an unknown preset.
std::vector<ProgramLine> sample_program(const ProgramOptions& options);

// Where the model's definition leaves it: moved to the GPU (`.cuda()`, as the DataParallel program
// does) or where it was built (a DDP rank's script, which runs one process per device).
enum class ModelPlacement { Cuda, AsBuilt };
// The lines that define a preset's model, ending with `model = ...`: the seed's SimpleModel class
// for "simple", an nn.Sequential of the preset's layers otherwise. Each layer's line names it.
// Throws dpv::Error for an unknown preset.
std::vector<ProgramLine> model_definition(const std::string& preset, ModelPlacement placement);

// The name the program's model (model_definition) gives a parameter or buffer the engine names as
// nn.Sequential does ("0.weight"): "linear.weight" for the seed's SimpleModel (its one layer is
// self.linear), the name unchanged for a Sequential preset. The module's own name, without the
// "module." that DataParallel and DistributedDataParallel add in front of it in their state_dict.
std::string program_parameter_name(const std::string& preset, const std::string& engine_name);

// The script every DDP rank runs (init_process_group, DistributedSampler, DistributedDataParallel)
// for a global batch of `rows` samples on `ranks` ranks with buckets of `bucket_bytes`
// (dist._DEFAULT_FIRST_BUCKET_BYTES and bucket_cap_mb); its model is the DataParallel program's.
struct DdpProgramOptions {
  std::string preset = kSamplePreset;
  int ranks = 1;
  int64_t rows = kSampleBatch;
  int64_t bucket_bytes = 0;
  double lr = kSampleLr;
};
// Throws dpv::Error for an unknown preset.
std::vector<ProgramLine> ddp_program(const DdpProgramOptions& options);
// DistributedDataParallel's own code (PyTorch 1.13, abridged, with file:line references), each
// line naming the DDP stages it stands for.
std::vector<ProgramLine> ddp_source_program();

}  // namespace dpv::course
