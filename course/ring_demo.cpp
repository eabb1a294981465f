// The Ring page's data: a real DDP bucket's ring all-reduce with its values, and DataParallel's
// reduce onto device 0 (see ring_demo.h).
#include "course/ring_demo.h"

#include <algorithm>
#include <cstdint>

#include "engine/data_parallel.h"
#include "engine/ddp/ddp.h"
#include "engine/device.h"
#include "engine/process_groups/in_process_group.h"
#include "engine/error.h"
#include "engine/model.h"
#include "course/sample_program.h"

namespace dpv::course {

namespace {

// Keeps the events of one iteration.
class EventLog final : public Observer {
 public:
  void on_stage(const StageEvent& e) override { events.push_back(e); }
  std::vector<StageEvent> events;
};

const TensorInfo* find_tensor(const DeviceState& d, const std::string& name) {
  for (const TensorInfo& t : d.tensors)
    if (t.name == name) return &t;
  return nullptr;
}

size_t ix(int i) { return static_cast<size_t>(i); }

std::vector<RingFrame> frames_from(const std::vector<const CommSpan*>& spans, int world) {
  std::vector<RingFrame> frames;
  RingFrame start;
  start.phase = "start";
  start.contributors.resize(ix(world));
  for (int r = 0; r < world; ++r) {
    const auto& ring = spans[ix(r)]->ring;
    check(!ring.empty() && !ring[0].before.empty(), "the ring did not record its values (record_ring_values)");
    start.values.push_back(ring[0].before);
    for (int c = 0; c < world; ++c) start.contributors[ix(r)].push_back({r});
  }
  frames.push_back(start);
  const size_t steps = spans[0]->ring.size();
  for (size_t k = 0; k < steps; ++k) {
    const RingFrame& prev = frames.back();
    RingFrame f;
    f.phase = spans[0]->ring[k].phase;
    f.step = spans[0]->ring[k].step;
    f.contributors = prev.contributors;
    for (int r = 0; r < world; ++r) {
      const RingStep& st = spans[ix(r)]->ring.at(k);
      f.moves.push_back({r, st.send_to, st.send_chunk, st.bytes, st.seconds});
      f.values.push_back(st.after);
      // What rank r received this step: chunk recv_chunk from recv_from, as the sender held it before.
      const auto& sent = prev.contributors[ix(st.recv_from)][ix(st.recv_chunk)];
      auto& mine = f.contributors[ix(r)][ix(st.recv_chunk)];
      if (st.phase == "reduce-scatter") {
        mine.insert(mine.end(), sent.begin(), sent.end());
        std::sort(mine.begin(), mine.end());
      } else {
        mine = sent;
      }
    }
    frames.push_back(std::move(f));
  }
  return frames;
}

DpReduceDemo dp_reduce(const RingDemoConfig& config, const Model& model, const TensorMap& state, const Dataset& data,
                       const std::string& param) {
  Trainer trainer(DeviceSet::create(config.run.devices), Model(model.spec()), state, train_options(config.run));
  EventLog log;
  Iteration it(trainer, data.inputs, data.targets, &log);
  it.run_to_end();
  DpReduceDemo dp;
  dp.replicas = it.replicas();
  dp.chunks = it.chunks();
  dp.param = param;
  dp.transport = trainer.collectives().transport();
  const StageEvent* last_backward = nullptr;
  for (const StageEvent& e : log.events) {
    if (e.stage.kind == StageKind::Backward) last_backward = &e;
    if (e.stage.kind != StageKind::ReduceGrads) continue;
    dp.seconds = e.t_end - e.t_start;
    dp.bytes_to_device0 = e.bytes_moved;
    if (const TensorInfo* t = e.devices.empty() ? nullptr : find_tensor(e.devices[0], "grad " + param)) dp.reduced = t->head;
  }
  check(last_backward != nullptr, "DataParallel's iteration had no Backward stage");
  for (int j = 0; j < dp.replicas; ++j) {
    const TensorInfo* t = find_tensor(last_backward->devices.at(ix(j)), "grad " + param);
    dp.replica_grads.push_back(t ? t->head : std::vector<double>{});
  }
  return dp;
}

}  // namespace

RunSpec default_ring_run() {
  RunSpec run;
  run.devices = "cpu:4";
  run.preset = "simple";
  run.batch = 32;
  return run;
}

RingDemo run_ring_demo(const RingDemoConfig& config) {
  const RunSpec& run = config.run;
  const DeviceSpec devices = parse_device_spec(run.devices);
  // The ring records its values as the in-process ranks' host threads pass them.
  check(devices.kind == DeviceKind::Cpu, "the ring runs on in-process CPU ranks (cpu:W), got " + run.devices,
        ErrorClass::ValueError);
  const int world = devices.count;
  check(world >= 2 && world <= 8, "the ring needs 2 to 8 ranks, got " + std::to_string(world), ErrorClass::ValueError);
  check(run.batch >= world, "the global batch (" + std::to_string(run.batch) + ") must hold at least one sample per rank (" +
                            std::to_string(world) + " ranks)", ErrorClass::ValueError);
  const ModelSpec spec = run.model_spec();
  Model model(spec);
  const TensorMap state = model.initial_state(run.seed);
  // The Iteration page's batch for this run (course/sample_program.h), so the ring all-reduces the
  // gradients of that page's iteration 1, not of other data.
  check(!run.model, "the ring runs a preset model (the Iteration page's), not a model file", ErrorClass::ValueError);
  const Dataset data = program_data(run.preset, run.batch, run.seed);

  DdpTrainer trainer(DeviceSet::create(run.devices), Model(spec), state, ddp_options(run));
  for (int r = 0; r < world; ++r) record_ring_values(trainer.group(r), SIZE_MAX);
  EventLog log;
  DdpIteration it(trainer, data.inputs, data.targets, &log);
  it.run_to_end();

  RingDemo demo;
  demo.config = config;
  demo.world_size = world;
  for (const auto& shard : it.shards()) demo.shards.push_back(static_cast<int64_t>(shard.size()));
  // The bucket that was all-reduced first (PyTorch's bucket 0 holds the last layer's parameters,
  // whose gradients are ready first).
  std::vector<const CommSpan*> spans(ix(world), nullptr);
  for (const StageEvent& e : log.events)
    for (const CommSpan& c : e.comm)
      if (c.bucket == 0 && c.device >= 0 && c.device < world) spans[ix(c.device)] = &c;
  for (int r = 0; r < world; ++r) check(spans[ix(r)] != nullptr, "rank " + std::to_string(r) + " reported no all-reduce of bucket 0");
  const CommSpan& first = *spans[0];
  demo.bucket = first.bucket;
  demo.params = first.params;
  demo.bytes = first.report.bytes;
  demo.numel = static_cast<int64_t>(first.ring.empty() ? 0 : first.ring[0].before.size());
  demo.chunk_offsets = ring_chunk_offsets(demo.numel, world);
  demo.frames = frames_from(spans, world);
  for (const RingStep& st : first.ring) demo.bytes_sent_per_rank += st.bytes;
  demo.formula_bytes = 2.0 * (world - 1) / world * static_cast<double>(demo.bytes);
  demo.seconds = first.report.seconds;
  demo.busbw = first.report.busbw;
  demo.algbw = first.report.algbw;
  check(!demo.params.empty(), "bucket 0 holds no parameter");
  demo.dp = dp_reduce(config, model, state, data, demo.params[0]);
  return demo;
}

}  // namespace dpv::course
