// A DDP job restarted from a checkpoint (lessons/ddp/faults.md): the engine trains `steps` steps
// uninterrupted, and again as an attempt that stops after `resume_after` steps and a new attempt
// that starts from what a checkpoint holds: fresh ranks built from the saved state dict, with or
// without the optimizer's state (SGD's momentum buffers, Adam's moments and step counts). The final
// weights are compared bit for bit, so the answer (what a checkpoint must hold, whether the resumed
// run is the uninterrupted one) comes from the engine, not from a table.
#include <sstream>

#include "course/scenario_support.h"
#include "engine/error.h"
#include "engine/model.h"

namespace dpv::course::detail {

namespace {

// What a checkpoint written after a step holds, as host copies: rank 0's state dict (every rank
// holds the same after a step), its optimizer state, and the buckets' ready order (a restarted DDP
// rebuilds the same buckets instead of starting again with one).
struct Checkpoint {
  TensorMap state;  // state_dict order: parameters and buffers
  struct Entry {
    std::string param, state;
    Tensor value;
  };
  std::vector<Entry> optimizer;
  std::vector<size_t> bucket_order;
};

Checkpoint checkpoint_of(const DdpTrainer& trainer) {
  const DdpRank& rank = trainer.rank(0);
  Checkpoint c;
  for (const TensorDecl& d : rank.model().state_decls()) {
    const Tensor* t = rank.params().find(d.name);
    if (!t) t = &rank.buffers().at(d.name);
    c.state.items().emplace_back(d.name, t->to(nullptr));
  }
  for (const TensorDecl& d : rank.model().parameter_decls())
    for (const auto& [state_name, t] : rank.optimizer().state_of(d.name)) c.optimizer.push_back({d.name, state_name, t.to(nullptr)});
  c.bucket_order = rank.reducer().first_ready_order();
  return c;
}

// One training job: its own devices and DDP ranks, step `i` on batch `i` of a fixed sequence.
struct Job {
  const ModelSpec& spec;
  int world, batch, classes;
  DdpOptions options;

  std::unique_ptr<DdpTrainer> make(const TensorMap& state, std::shared_ptr<DeviceSet>& devices) const {
    devices = DeviceSet::create("cpu:" + std::to_string(world));
    return std::make_unique<DdpTrainer>(devices, Model(spec), state, options);
  }
  void train(DdpTrainer& trainer, int from_step, int to_step) const {
    const Shape shape = {batch, spec.layers.front().in_features};
    for (int i = from_step; i < to_step; ++i) {
      const Tensor x = make_input(shape, spec.dtype, 1000 + static_cast<uint64_t>(i));  // [batch, in_features]
      const Tensor t = make_targets(batch, classes, 1000 + static_cast<uint64_t>(i));  // [batch]
      DdpIteration(trainer, x, t, nullptr).run_to_end();
    }
  }
  // A new attempt from checkpoint `c`: fresh ranks, the optimizer's state only when asked.
  TensorMap resumed(const Checkpoint& c, bool with_optimizer, int from_step, int to_step) const {
    std::shared_ptr<DeviceSet> devices;
    auto trainer = make(c.state, devices);
    trainer->construct();
    for (int r = 0; r < trainer->world_size(); ++r) {
      DdpRank& rank = trainer->rank(r);
      if (with_optimizer)
        for (const auto& e : c.optimizer)
          rank.optimizer().set_state(e.param, e.state, e.state == "step" ? e.value : e.value.to(rank.device_ptr()));
      if (!c.bucket_order.empty()) rank.restore_buckets(c.bucket_order);
    }
    train(*trainer, from_step, to_step);
    return checkpoint_of(*trainer).state;
  }
};

std::string difference_text(double d) {
  if (d == 0) return "identical, bit for bit";
  std::ostringstream o;
  o.precision(3);
  o << "largest difference " << d;
  return o.str();
}

}  // namespace

ScenarioResult run_ddp_resume(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch");
  const int steps = p.integer("steps"), k = p.integer("resume_after");
  check(k >= 1 && k < steps, "'resume_after' must be at least 1 and less than 'steps'", ErrorClass::ValueError);
  const ModelSpec spec = scenario_model(p, "simple");
  check(!spec.layers.empty() && spec.layers.front().kind == LayerKind::Linear,
        "this scenario needs a model whose first layer is linear (it feeds rows of features)", ErrorClass::ValueError);
  Job job{spec, world, batch, 0, {}};
  job.classes = model_classes(spec, {batch, spec.layers.front().in_features});
  job.options.optimizer.kind = parse_optimizer_kind(p.text("optimizer", "sgd"));
  if (job.options.optimizer.kind == OptimizerKind::Sgd) job.options.optimizer.momentum = 0.9;
  const TensorMap initial = Model(spec).initial_state(7);

  std::shared_ptr<DeviceSet> devices;
  auto whole = job.make(initial, devices);
  job.train(*whole, 0, steps);
  const TensorMap uninterrupted = checkpoint_of(*whole).state;
  auto first = job.make(initial, devices);
  job.train(*first, 0, k);
  const Checkpoint saved = checkpoint_of(*first);

  ScenarioResult r;
  const std::string opt = optimizer_class_name(job.options.optimizer.kind);
  r.title = "DDP on cpu:" + std::to_string(world) + ", " + opt + (opt == "SGD" ? " (momentum 0.9)" : "") + ", " +
            std::to_string(steps) + " steps, restarted from the checkpoint of step " + std::to_string(k);
  r.lines.push_back("Run A trained " + std::to_string(steps) + " steps without a break.");
  r.lines.push_back("Run B trained " + std::to_string(k) + " steps; then new ranks were built from the checkpoint of step " +
                    std::to_string(k) + " (" + std::to_string(saved.optimizer.size()) +
                    " optimizer state tensors beside the weights) and trained steps " + std::to_string(k + 1) + " to " +
                    std::to_string(steps) + ".");
  const double with_state = max_difference(job.resumed(saved, true, k, steps), uninterrupted);
  r.lines.push_back("Weights and optimizer state restored: final weights against run A: " + difference_text(with_state) + ".");
  r.facts = {{"with optimizer state", difference_text(with_state)}};
  if (p.text("ask") == "final_weights") {
    r.answer_value = with_state == 0 ? "same" : with_state < 1e-5 ? "close" : "differs";
    return r;
  }
  // checkpoint_contents: what a checkpoint must hold for the restart to be the uninterrupted run.
  const double weights_only = max_difference(job.resumed(saved, false, k, steps), uninterrupted);
  r.lines.push_back("Weights only (the optimizer started afresh): final weights against run A: " +
                    difference_text(weights_only) + ".");
  r.facts.push_back({"weights only", difference_text(weights_only)});
  r.answer_value = weights_only == 0 ? "weights" : with_state == 0 ? "weights+optimizer" : "neither";
  return r;
}

}  // namespace dpv::course::detail
