// Scenarios about how the sharded strategies split a model and what they send: ZeroRedundancyOptimizer's
// greedy partition and its parameter broadcasts (ZeRO-1), FSDP's flat parameter, its padding and its
// gradient divide factors (ZeRO-2/3), and the bytes every rank sends per iteration against DDP's,
// each read from a run of the engine's ranks on simulated CPU devices (rank 0's partition and flat
// layout, the stage events' CollectiveReports).
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "course/scenario_support.h"
#include "engine/error.h"
#include "engine/number_text.h"
#include "engine/zero/zero_output.h"

namespace dpv::course::detail {

namespace {

std::string names_of(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out.empty() ? "none" : out;
}

// Bytes one rank sends for `report` in a ring of `report.ranks` ranks: (W-1)/W of the size for an
// all-gather, a reduce-scatter and a (pipelined) broadcast, twice that for an all-reduce (its
// reduce-scatter and all-gather phases), the nccl-tests bus-bandwidth factors.
double ring_bytes_per_rank(const CollectiveReport& report) {
  const double w = report.ranks, size = static_cast<double>(report.bytes);
  if (w <= 1) return 0;
  switch (report.op) {
    case CollectiveOp::AllReduce: return 2 * (w - 1) / w * size;
    case CollectiveOp::AllGather:
    case CollectiveOp::ReduceScatter:
    case CollectiveOp::Broadcast: return (w - 1) / w * size;
    case CollectiveOp::ReduceAdd:
    case CollectiveOp::Barrier: return 0;
  }
  return 0;
}

// Rank 0's collectives of one recorded iteration, by kind and in all.
struct Traffic {
  int all_reduces = 0, all_gathers = 0, reduce_scatters = 0, broadcasts = 0;
  int64_t size = 0;       // summed nccl-tests sizes
  double per_rank = 0;    // bytes rank 0 sends in the ring
};
Traffic traffic_of(const std::vector<StageEvent>& events) {
  Traffic t;
  for (const StageEvent& e : events)
    for (const CollectiveReport& r : e.collectives) {
      t.all_reduces += r.op == CollectiveOp::AllReduce;
      t.all_gathers += r.op == CollectiveOp::AllGather;
      t.reduce_scatters += r.op == CollectiveOp::ReduceScatter;
      t.broadcasts += r.op == CollectiveOp::Broadcast;
      t.size += static_cast<int64_t>(r.bytes);
      t.per_rank += ring_bytes_per_rank(r);
    }
  return t;
}

std::string traffic_line(const std::string& who, const Traffic& t) {
  return who + ": " + count_text(t.all_reduces, "all-reduce") + ", " + count_text(t.all_gathers, "all-gather") + ", " +
         count_text(t.reduce_scatters, "reduce-scatter") + ", " + count_text(t.broadcasts, "broadcast") + " (" +
         std::to_string(t.size) + " bytes in all); rank 0 sends " + std::to_string(std::llround(t.per_rank)) +
         " bytes around the ring.";
}

std::string ratio_text(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", r);
  return buf;
}

const char* stage_name(int stage) { return strategy_short_name(rank_strategy(stage)); }

// Every rank's partition with the elements it steps (ZeRO-1).
void partition_lines(ScenarioResult& r, const DdpRank& rank0) {
  std::vector<int64_t> numel_of;
  for (size_t k = 0; k < rank0.partition().size(); ++k) {
    int64_t elements = 0;
    for (const auto& name : rank0.partition()[k])
      for (const auto& d : rank0.model().parameter_decls())
        if (d.name == name) elements += shape_numel(d.shape);
    r.lines.push_back("Rank " + std::to_string(k) + " steps " + names_of(rank0.partition()[k]) + " (" +
                      count_text(elements, "element") + ").");
  }
}

void layout_lines(ScenarioResult& r, const FlatLayout& layout) {
  std::string entries;
  for (const FlatEntry& e : layout.entries)
    entries += (entries.empty() ? "" : ", ") + e.name + " at " + std::to_string(e.offset) + " (" + std::to_string(e.numel) + ")";
  r.lines.push_back("Flat parameter: " + entries + "; " + count_text(layout.numel, "element") + ", padded to " +
                    std::to_string(layout.padded_numel) + " (a multiple of W = " + std::to_string(layout.world) + "): " +
                    count_text(layout.padding(), "padding zero") + ".");
  for (int k = 0; k < layout.world; ++k)
    r.lines.push_back("Rank " + std::to_string(k) + " keeps elements [" + std::to_string(layout.shard_begin(k)) + ", " +
                      std::to_string(layout.shard_begin(k) + layout.shard_numel()) + "): " +
                      count_text(layout.shard_real_numel(k), "parameter element") + ".");
}

}  // namespace

OptimizerSettings zero_optimizer(const Params& p) {
  OptimizerSettings opt;
  opt.kind = parse_optimizer_kind(p.text("optimizer", "adam"));
  if (opt.kind == OptimizerKind::Sgd) opt.momentum = 0.9;
  return opt;
}

std::unique_ptr<ZeroRun> run_zero(int devices, const ModelSpec& spec, const Batch& batch, int stage,
                                  const OptimizerSettings& optimizer, int iterations) {
  auto run = std::make_unique<ZeroRun>();
  run->devices = DeviceSet::create("cpu:" + std::to_string(devices));
  Model model(spec);
  const TensorMap initial = model.initial_state(7);
  DdpOptions options;
  options.optimizer = optimizer;
  options.zero_stage = stage;
  run->trainer = std::make_unique<DdpTrainer>(run->devices, std::move(model), initial, options);
  for (int i = 0; i < iterations; ++i) {
    const bool last = i + 1 == iterations;
    DdpIteration it(*run->trainer, batch.input, batch.target, last ? &run->recorder : nullptr);
    it.set_memory_accounts(true);
    it.run_to_end();
  }
  return run;
}

TensorMap full_parameters(const ZeroRun& run) {
  const DdpTrainer& t = *run.trainer;
  TensorMap out;
  if (t.options().zero_stage < 2) {
    for (const auto& [name, p] : t.rank(0).params().items()) out.set(name, p.to(nullptr));
    return out;
  }
  std::vector<Tensor> slices;
  for (int r = 0; r < t.world_size(); ++r) slices.push_back(t.rank(r).flat_param_shard().to(nullptr));
  const Tensor flat = concat_slices(slices);  // [L]
  for (const FlatEntry& e : t.rank(0).flat_layout().entries) out.set(e.name, unflatten_entry(flat, e));
  return out;
}

ScenarioResult run_zero_layout(const Params& p) {
  const int world = p.integer("devices"), stage = p.integer("stage");
  const std::string ask = p.text("ask");
  const bool needs_zero1 = ask == "owned_count" || ask == "owner" || ask == "broadcasts";
  const bool right_stage = needs_zero1 ? stage == 1 : stage >= 2;
  check(right_stage, "'" + ask + "' is a question about " + (needs_zero1 ? "ZeRO-1: set 'stage' to 1" : "FSDP: set 'stage' to 2 or 3"),
        ErrorClass::ValueError);
  const ModelSpec spec = scenario_model(p, "simple");
  auto run = run_zero(world, spec, ddp_batch(spec, p.integer("batch"), 37), stage, zero_optimizer(p));
  const DdpRank& rank0 = run->trainer->rank(0);
  ScenarioResult r;
  r.title = std::string(strategy_name(rank_strategy(stage))) + " on cpu:" + std::to_string(world) + ", one iteration";
  if (needs_zero1) {
    partition_lines(r, rank0);
    const ZeroPartition& partition = rank0.partition();
    if (ask == "owned_count") {
      const int rank = p.integer("rank");
      check(rank < world, "'rank' must be less than 'devices'", ErrorClass::ValueError);
      r.answer_value = std::to_string(partition.at(static_cast<size_t>(rank)).size());
    } else if (ask == "owner") {
      const std::string param = p.text("param");
      r.answer_value = "none";
      for (size_t k = 0; k < partition.size(); ++k)
        if (std::find(partition[k].begin(), partition[k].end(), param) != partition[k].end()) r.answer_value = std::to_string(k);
      check(r.answer_value != "none", "the model has no parameter '" + param + "'", ErrorClass::ValueError);
    } else {  // broadcasts: counted in the BroadcastParams stage's reports
      const Traffic t = traffic_of(run->recorder.events);
      int in_stage = 0;
      for (const StageEvent& e : run->recorder.events)
        if (e.stage.kind == StageKind::BroadcastParams) in_stage += static_cast<int>(e.collectives.size());
      r.lines.push_back("After the step: " + count_text(in_stage, "broadcast") + ", one per parameter, each from the rank "
                        "that stepped it; the backward's gradient all-reduce ran as under DDP (" +
                        count_text(t.all_reduces, "all-reduce") + ").");
      r.answer_value = std::to_string(in_stage);
    }
    r.facts = {{"partition", zero_partition_json(partition)}};
    return r;
  }
  const FlatLayout& layout = rank0.flat_layout();
  layout_lines(r, layout);
  r.facts = {{"padded numel", std::to_string(layout.padded_numel)}, {"padding", std::to_string(layout.padding())}};
  if (ask == "padding") {
    r.answer_value = std::to_string(layout.padding());
  } else if (ask == "shard_numel") {
    r.answer_value = std::to_string(layout.shard_numel());
  } else {  // divide
    const DivideFactors divide = fsdp_divide_factors(world);
    const std::string pre = shortest_text(divide.pre), post = shortest_text(divide.post);
    r.lines.push_back("The gradient is divided by " + pre + " before the reduce-scatter and by " + post + " after it: " +
                      pre + " × " + post + " = " + std::to_string(world) + ", so the slice holds the mean over the ranks.");
    r.answer_value = pre + "," + post;
  }
  return r;
}

ScenarioResult run_zero_traffic(const Params& p) {
  const int world = p.integer("devices"), stage = p.integer("stage");
  const std::string ask = p.text("ask");
  const ModelSpec spec = scenario_model(p, "simple");
  const Batch batch = ddp_batch(spec, p.integer("batch"), 41);
  ScenarioResult r;
  if (ask == "vs_ddp") {
    check(stage >= 1, "'vs_ddp' compares a ZeRO stage with DDP: set 'stage' to 1, 2 or 3", ErrorClass::ValueError);
    const Traffic ddp = traffic_of(run_zero(world, spec, batch, 0, OptimizerSettings{})->recorder.events);
    const Traffic zero = traffic_of(run_zero(world, spec, batch, stage, OptimizerSettings{})->recorder.events);
    check(ddp.per_rank > 0, "with one rank nothing is sent; use 'devices' of 2 or more", ErrorClass::ValueError);
    r.title = std::string("Bytes per iteration: DDP against ") + stage_name(stage) + " on cpu:" + std::to_string(world);
    r.lines.push_back(traffic_line("DDP", ddp));
    r.lines.push_back(traffic_line(stage_name(stage), zero));
    const double ratio = zero.per_rank / ddp.per_rank;
    r.lines.push_back(std::string(stage_name(stage)) + " sends " + ratio_text(ratio) + " times DDP's bytes per rank.");
    r.facts = {{"ratio", ratio_text(ratio)}, {"ddp bytes", std::to_string(std::llround(ddp.per_rank))}};
    r.answer_value = ratio_text(ratio);
    return r;
  }
  // zero3_vs_zero2: the peak memory and the all-gathers of FULL_SHARD against SHARD_GRAD_OP, the whole
  // model as one FSDP unit.
  auto two = run_zero(world, spec, batch, 2, OptimizerSettings{});
  auto three = run_zero(world, spec, batch, 3, OptimizerSettings{});
  r.title = "FULL_SHARD against SHARD_GRAD_OP on cpu:" + std::to_string(world) + ", the whole model one FSDP unit";
  const auto peak = [](const ZeroRun& run, int64_t& at_loss) {
    int64_t top = 0;
    for (const StageEvent& e : run.recorder.events) {
      const int64_t total = e.devices.at(0).memory.total() - e.devices.at(0).memory.other;
      top = std::max(top, total);
      if (e.stage.kind == StageKind::Loss) at_loss = total;
    }
    return top;
  };
  int64_t loss2 = 0, loss3 = 0;
  const int64_t peak2 = peak(*two, loss2), peak3 = peak(*three, loss3);
  const Traffic t2 = traffic_of(two->recorder.events), t3 = traffic_of(three->recorder.events);
  r.lines.push_back(traffic_line("SHARD_GRAD_OP", t2));
  r.lines.push_back(traffic_line("FULL_SHARD", t3));
  r.lines.push_back("Rank 0 after the loss: " + std::to_string(loss2) + " bytes (SHARD_GRAD_OP) against " +
                    std::to_string(loss3) + " (FULL_SHARD, parameters freed after the forward).");
  r.lines.push_back("Rank 0's peak: " + std::to_string(peak2) + " bytes against " + std::to_string(peak3) +
                    ": the backward gathers the whole model again.");
  r.facts = {{"peak zero2", std::to_string(peak2)}, {"peak zero3", std::to_string(peak3)}};
  const std::string memory = peak3 < peak2 ? "lower-peak" : peak3 == peak2 ? "same-peak" : "higher-peak";
  const int extra = t3.all_gathers - t2.all_gathers;
  r.answer_value = memory + "+" + (extra == 1 ? "one-more-gather" : std::to_string(extra) + "-more-gathers");
  return r;
}

}  // namespace dpv::course::detail
