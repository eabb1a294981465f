// What DDP's stage snapshots say each rank holds, by kind (StageEvent::devices: tensors and
// MemoryBreakdown): the parts add up to the device's own allocation counter, each tensor counts
// once and in the part its kind names, and the sizes are what DDP must hold: every rank the whole
// module, its .grad, its momentum and flat buckets holding every gradient once (DDP's own kind),
// its own shard and no gathered output, so every rank holds the same (no device-0 hump).
#include <gtest/gtest.h>

#include <set>

#include "dp_test_support.h"
#include "engine/ddp/ddp.h"

using namespace dpv;
using namespace dpv::testing;

namespace {

struct Recorder : Observer {
  std::vector<StageEvent> events;
  void on_stage(const StageEvent& e) override { events.push_back(e); }
};

int64_t bytes_of(const TensorMap& m) {
  int64_t b = 0;
  for (const auto& [name, t] : m.items()) b += static_cast<int64_t>(t.nbytes());
  return b;
}

}  // namespace

TEST(DdpMemory, PartsByKindAddUpToEachRanksCounterAtEveryStage) {
  const auto spec = mlp_bn();
  const Model model(spec);
  const TensorMap state = model.initial_state(3);
  int64_t param_bytes = 0, state_bytes = bytes_of(state);
  for (const auto& d : model.parameter_decls()) param_bytes += static_cast<int64_t>(state.at(d.name).nbytes());
  DdpOptions options;
  options.optimizer.momentum = 0.9;
  options.bucket_cap_mb = 100.0 / (1024.0 * 1024.0);  // several buckets after the rebuild
  options.first_bucket_bytes = 100;
  const int W = 4;
  const int64_t N = 10;  // shards of 3: ranks 2 and 3 repeat a sample
  DdpTrainer trainer(DeviceSet::create("cpu:4"), Model(spec), state, options);
  const Batch batch = random_batch(N, 4, 3, 31);
  const int64_t shard_bytes = 3 * 4 * 8 + 3 * 8;  // [3, 4] float64 inputs and [3] int64 labels

  for (int iteration = 0; iteration < 2; ++iteration) {
    Recorder rec;
    DdpIteration(trainer, batch.input, batch.target, &rec).run_to_end();
    bool finalized = false, stepped = iteration > 0, backward = false;
    for (const StageEvent& e : rec.events) {
      const std::string where = "iteration " + std::to_string(iteration) + ", " + e.stage.title;
      finalized = finalized || e.stage.kind == StageKind::Finalize;
      backward = backward || e.stage.kind == StageKind::Backward;
      stepped = stepped || e.stage.kind == StageKind::Step;
      ASSERT_EQ(static_cast<int>(e.devices.size()), W) << where;
      for (const DeviceState& d : e.devices) {
        const std::string at = where + ", rank " + std::to_string(d.device);
        if (e.stage.kind == StageKind::Construct) continue;  // listed from Sample on
        // The parts add up to the counter; nothing is left unaccounted for unless a bucket's
        // all-reduce (its scratch) may still be running on the communication thread.
        EXPECT_EQ(d.memory.total(), d.memory_bytes) << at;
        if (e.stage.kind == StageKind::Backward) {
          EXPECT_GE(d.memory.other, 0) << at;
        } else {
          EXPECT_EQ(d.memory.other, 0) << at;
        }
        // Each tensor once, in the part its kind names.
        MemoryBreakdown by_kind;
        std::set<std::string> names;
        for (const TensorInfo& t : d.tensors) {
          EXPECT_TRUE(names.insert(t.name).second) << at << ": " << t.name << " listed twice";
          EXPECT_EQ(t.device, d.device) << at << ": " << t.name;
          EXPECT_FALSE(t.why.empty()) << at << ": " << t.name;
          if (t.view) continue;
          const auto b = static_cast<int64_t>(t.bytes);
          switch (t.memory) {
            case MemoryKind::Batch: by_kind.batch += b; break;
            case MemoryKind::Parameters: by_kind.parameters += b; break;
            case MemoryKind::Gradients: by_kind.gradients += b; break;
            case MemoryKind::Activations: by_kind.activations += b; break;
            case MemoryKind::Optimizer: by_kind.optimizer += b; break;
            case MemoryKind::Output: by_kind.output += b; break;
            case MemoryKind::Buckets: by_kind.buckets += b; break;
            case MemoryKind::Gathered: by_kind.gathered += b; break;
          }
        }
        EXPECT_EQ(by_kind.batch, d.memory.batch) << at;
        EXPECT_EQ(by_kind.parameters, d.memory.parameters) << at;
        EXPECT_EQ(by_kind.gradients, d.memory.gradients) << at;
        EXPECT_EQ(by_kind.activations, d.memory.activations) << at;
        EXPECT_EQ(by_kind.optimizer, d.memory.optimizer) << at;
        EXPECT_EQ(by_kind.buckets, d.memory.buckets) << at;
        // What DDP holds on every rank.
        EXPECT_EQ(d.memory.parameters, state_bytes) << at << ": the whole module on every rank";
        EXPECT_EQ(d.memory.output, 0) << at << ": DDP gathers no output";
        EXPECT_EQ(d.memory.batch, shard_bytes) << at << ": this rank's shard only";
        const bool buckets_exist = iteration > 0 || e.stage.kind == StageKind::Backward || finalized;
        EXPECT_EQ(d.memory.buckets, buckets_exist ? param_bytes : 0) << at << ": the buckets hold every gradient once";
        const bool all_grads = finalized || (iteration > 0 && !backward) ||
                               (e.stage.kind == StageKind::Backward && e.stage.layer == 0);
        if (all_grads) {
          EXPECT_EQ(d.memory.gradients, param_bytes) << at;
        } else {  // before the first backward, or part-way: the backward starts with zero_grad(set_to_none)
          EXPECT_LT(d.memory.gradients, param_bytes) << at;
        }
        EXPECT_EQ(d.memory.optimizer, stepped ? param_bytes : 0) << at << ": SGD momentum from the first step on";
      }
      // Every rank holds the same: no device-0 hump under DDP.
      if (e.stage.kind != StageKind::Construct && e.stage.kind != StageKind::Backward) {
        for (const DeviceState& d : e.devices) EXPECT_EQ(d.memory.total(), e.devices[0].memory.total()) << where;
      }
    }
  }
}

TEST(DdpMemory, WithoutSnapshotsNoTensorIsListed) {
  const auto spec = mlp_bn();
  DdpTrainer trainer(DeviceSet::create("cpu:2"), Model(spec), Model(spec).initial_state(4), {});
  const Batch batch = random_batch(8, 4, 3, 32);
  struct Timings : Observer {
    std::vector<StageEvent> events;
    void on_stage(const StageEvent& e) override { events.push_back(e); }
    bool wants_snapshots() const override { return false; }
  } timings;
  DdpIteration(trainer, batch.input, batch.target, &timings).run_to_end();
  for (const StageEvent& e : timings.events)
    for (const DeviceState& d : e.devices) {
      EXPECT_TRUE(d.tensors.empty()) << e.stage.title;
      EXPECT_EQ(d.memory.total(), 0) << e.stage.title;
      EXPECT_GT(d.memory_bytes, 0) << e.stage.title << ": the counter is still read";
    }
}
