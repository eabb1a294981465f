#include "cli/checkpoint.h"

#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <system_error>
#include <vector>

#include "engine/error.h"
#include "cli/train_loop.h"
#include "engine/io/atomic_file.h"
#include "engine/io/input_file.h"
#include "engine/io/safetensors.h"
#include "engine/model_spec.h"
#include "engine/number_text.h"

namespace dpv::cli {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "dpviz training checkpoint 1";
constexpr const char* kPrefix = "checkpoint-";
constexpr const char* kSuffix = ".safetensors";
constexpr const char* kOptimizerPrefix = "optim/";  // optim/<param>/<torch.optim state name>

// FNV-1a, 64 bits: the same model spec gives the same hash on every machine.
std::string fnv1a_hex(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  char out[17];
  std::snprintf(out, sizeof out, "%016llx", static_cast<unsigned long long>(h));
  return out;
}

// The step of DIR/checkpoint-<digits>.safetensors, or nothing for any other name.
std::optional<int64_t> step_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.rfind(prefix, 0) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return std::nullopt;
  const std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.size() > 18 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  return std::stoll(digits);
}

// (step, path) of every checkpoint file in `dir`, newest first.
std::vector<std::pair<int64_t, std::string>> checkpoints_in(const std::string& dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (const auto step = step_of(entry.path().filename().string())) out.emplace_back(*step, entry.path().string());
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  return out;
}

// A metadata value as a one-line message quotes it: control characters as '?', cut at 80 characters.
std::string printable(const std::string& value) {
  std::string out = value.substr(0, 80);
  for (char& c : out)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return value.size() > 80 ? out + "..." : out;
}

// The metadata value `key`, or a dpv::Error saying the file is no complete checkpoint.
const std::string& meta(const std::map<std::string, std::string>& m, const std::string& key, const std::string& source) {
  const auto it = m.find(key);
  check(it != m.end(), source + ": no '" + key + "' in the metadata (not a dpv train checkpoint, or an older format)");
  return it->second;
}

int64_t meta_int(const std::map<std::string, std::string>& m, const std::string& key, const std::string& source) {
  const std::string& text = meta(m, key, source);
  try {
    size_t used = 0;
    const int64_t v = std::stoll(text, &used);
    if (used == text.size() && v >= 0) return v;
  } catch (const std::exception&) {
  }
  throw Error(source + ": metadata '" + key + "' is '" + printable(text) + "', not a count (corrupt checkpoint)");
}

// "3,2,1,0": DDP's first ready order, as serialize_checkpoint writes it.
std::vector<size_t> bucket_order(const std::string& text, const std::string& source) {
  std::vector<size_t> out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    check(!item.empty() && item.size() < 10 && item.find_first_not_of("0123456789") == std::string::npos,
          source + ": metadata 'ddp_bucket_order' is not a list of parameter indices (corrupt checkpoint)");
    out.push_back(static_cast<size_t>(std::stoul(item)));
    at = comma + 1;
  }
  return out;
}

// Throws the mismatch error when the checkpoint's `fact` differs from this run's.
void check_fact(const std::string& source, const std::string& fact, const std::string& theirs,
                const std::string& ours, const std::string& flag) {
  if (theirs == ours) return;
  throw Error(source + " is from another run: its " + fact + " is " + printable(theirs) + ", this run's is " + ours +
                  "; run with the same " + flag + " to resume it, or give this run another --checkpoint DIR",
              ErrorClass::ValueError);
}

std::map<std::string, std::string> facts_metadata(const CheckpointFacts& f) {
  return {{"model_hash", f.model_hash},          {"devices", f.devices},
          {"world_size", std::to_string(f.world_size)}, {"strategy", f.strategy},
          {"seed", std::to_string(f.seed)},      {"batch", std::to_string(f.batch)},
          {"data", f.data},                     {"optimizer", f.optimizer}};
}

}  // namespace

CheckpointFacts checkpoint_facts(const RunSpec& run, const std::string& devices, int world_size, const Dataset& data) {
  CheckpointFacts f;
  f.model_hash = fnv1a_hex(model_spec_to_json(run.model_spec()));
  f.devices = devices;
  f.world_size = world_size;
  f.strategy = strategy_name(run.strategy);
  f.optimizer = optimizer_name(run.optimizer.kind);
  f.seed = run.seed;
  f.batch = run.batch;
  f.data = data.name + ", " + std::to_string(data.inputs.dim(0)) + " samples";
  return f;
}

std::string checkpoint_path(const std::string& dir, int64_t step) {
  char name[64];
  std::snprintf(name, sizeof name, "%s%06lld%s", kPrefix, static_cast<long long>(step), kSuffix);
  return (fs::path(dir) / name).string();
}

std::string serialize_checkpoint(const TrainingState& state, const CheckpointFacts& facts, const RunSpec& run,
                                 int64_t data_position) {
  TensorMap tensors = state.model;
  for (const auto& e : state.optimizer) tensors.items().emplace_back(kOptimizerPrefix + e.param + "/" + e.state, e.value);
  std::map<std::string, std::string> m = facts_metadata(facts);
  m["format"] = kFormat;
  m["producer"] = "dpv train";
  m["step"] = std::to_string(state.step);
  m["data_position"] = std::to_string(data_position);  // the first sample of the next batch
  m["lr"] = shortest_text(run.optimizer.lr);
  m["momentum"] = shortest_text(run.optimizer.momentum);
  m["weight_decay"] = shortest_text(run.optimizer.weight_decay);
  if (run.optimizer.kind != OptimizerKind::Sgd) {
    m["betas"] = shortest_text(run.optimizer.beta1) + "," + shortest_text(run.optimizer.beta2);
    m["eps"] = shortest_text(run.optimizer.eps);
  }
  m["sync_bn"] = run.sync_bn ? "true" : "false";
  if (!state.gemm_choices.empty()) m["gemm_choices"] = cpu_gemm_choices_text(state.gemm_choices);
  if (!state.ddp_bucket_order.empty()) {
    std::string order;
    for (size_t p : state.ddp_bucket_order) order += (order.empty() ? "" : ",") + std::to_string(p);
    m["ddp_bucket_order"] = order;
  }
  return serialize_safetensors(tensors, m);
}

TrainingState parse_checkpoint(const std::string& bytes, const std::string& source, const CheckpointFacts& facts) {
  const SafetensorsFile file = parse_safetensors_file(bytes, source);
  const std::string& format = meta(file.metadata, "format", source);
  check(format == kFormat, source + ": metadata 'format' is '" + printable(format) + "', not '" + kFormat + "'");
  const std::map<std::string, std::string> ours = facts_metadata(facts);
  const std::pair<const char*, const char*> checked[] = {
      {"strategy", "--ddp"}, {"world_size", "--devices (or number of launched processes)"},
      {"devices", "--devices"}, {"model_hash", "--preset or --model"}, {"seed", "--seed"},
      {"batch", "--batch"}, {"data", "--data, --samples or --idx-images"}, {"optimizer", "--optimizer"}};
  for (const auto& [key, flag] : checked)
    check_fact(source, key == std::string("model_hash") ? "model (hash)" : key, meta(file.metadata, key, source),
               ours.at(key), flag);
  TrainingState state;
  state.step = meta_int(file.metadata, "step", source);
  if (const auto order = file.metadata.find("ddp_bucket_order"); order != file.metadata.end())
    state.ddp_bucket_order = bucket_order(order->second, source);
  if (const auto gemm = file.metadata.find("gemm_choices"); gemm != file.metadata.end())
    state.gemm_choices = parse_cpu_gemm_choices(gemm->second, source + ": metadata 'gemm_choices'");
  const std::string prefix = kOptimizerPrefix;
  for (const auto& [name, t] : file.tensors.items()) {
    // optim/<param>/<state>: parameter names have no '/', so the last one splits them.
    const size_t split = name.rfind('/');
    if (name.rfind(prefix, 0) == 0 && split > prefix.size() && split + 1 < name.size())
      state.optimizer.push_back({name.substr(prefix.size(), split - prefix.size()), name.substr(split + 1), t});
    else
      state.model.items().emplace_back(name, t);
  }
  return state;
}

CheckpointFolder::CheckpointFolder(CheckpointOptions options) : options_(std::move(options)) {}

void CheckpointFolder::prepare() const {
  std::error_code ec;
  fs::create_directories(options_.dir, ec);
  if (ec || !fs::is_directory(options_.dir)) {
    throw Error("--checkpoint " + options_.dir + ": cannot be used as a folder (" +
                    (ec ? ec.message() : std::string("it exists and is not a folder")) + "); give another --checkpoint DIR",
                ErrorClass::NotADirectoryError);
  }
  // write_file_atomic's temporaries are ".dpv-tmp-<pid>-<salt>": one whose writer is gone (killed
  // during a write: SIGKILL cannot be caught) is garbage; a living writer's is left alone.
  for (const auto& entry : fs::directory_iterator(options_.dir, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string tag = ".dpv-tmp-";
    if (name.rfind(tag, 0) != 0) continue;
    const long pid = std::strtol(name.c_str() + tag.size(), nullptr, 10);
    if (pid > 0 && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) fs::remove(entry.path(), ec);
  }
}

std::optional<FoundCheckpoint> CheckpointFolder::newest_complete(std::ostream& warn) const {
  for (const auto& [step, path] : checkpoints_in(options_.dir)) {
    try {
      FoundCheckpoint found{path, read_file(path, kSafetensorsInput)};
      const SafetensorsFile file = parse_safetensors_file(found.bytes, path);
      meta(file.metadata, "format", path);
      if (meta_int(file.metadata, "step", path) != step)
        throw Error(path + ": its metadata says step " + printable(file.metadata.at("step")) + ", its name step " +
                    std::to_string(step));
      return found;
    } catch (const Error& e) {
      warn << "dpv: warning: skipping incomplete checkpoint " << path << " (" << e.what() << ")\n";
    }
  }
  return std::nullopt;
}

bool CheckpointFolder::due(int64_t steps_done, int64_t total) const {
  return enabled() && (steps_done % options_.every == 0 || steps_done == total);
}

void CheckpointFolder::save(const std::string& bytes, int64_t step) const {
  write_file_atomic(checkpoint_path(options_.dir, step), bytes);
  int kept = 0;
  std::error_code ec;
  for (const auto& [s, path] : checkpoints_in(options_.dir)) {
    if (s > step) continue;  // skipped as incomplete on start: the run overwrites it when it gets there
    if (++kept > kCheckpointsKept) fs::remove(path, ec);
  }
}

TrainCheckpoints::TrainCheckpoints(CheckpointOptions options, CheckpointFacts facts, RunSpec run, int64_t steps,
                                   int64_t samples)
    : folder_(std::move(options)), facts_(std::move(facts)), run_(std::move(run)), steps_(steps), samples_(samples) {}

std::optional<FoundCheckpoint> TrainCheckpoints::find() const {
  if (!enabled()) return std::nullopt;
  folder_.prepare();
  return folder_.newest_complete(std::cerr);
}

std::optional<TrainingState> TrainCheckpoints::resume(const std::optional<FoundCheckpoint>& found, bool announce) const {
  if (!found) return std::nullopt;
  TrainingState state = parse_checkpoint(found->bytes, found->path, facts_);
  if (announce) {
    std::cout << "resumed from " << found->path << " (step " << state.step << ")";
    if (state.step >= steps_) std::cout << ": already at --steps " << steps_ << ", nothing left to train";
    std::cout << "\n" << std::flush;
  }
  return state;
}

void TrainCheckpoints::after_step(const Strategy& strategy, int64_t steps_done) const {
  if (!folder_.due(steps_done, steps_)) return;
  const TrainingState state = training_state_of(strategy, steps_done);
  folder_.save(serialize_checkpoint(state, facts_, run_, batch_start(steps_done, samples_, run_.batch)), steps_done);
}

}  // namespace dpv::cli
