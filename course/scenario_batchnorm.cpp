// BatchNorm under DataParallel: per-device statistics against the synchronised ones, which
// replica's running statistics survive, and the one-sample chunk.
#include <algorithm>
#include <cmath>
#include <regex>

#include "course/batchnorm_stats.h"
#include "course/scenario_support.h"
#include "engine/error.h"

namespace dpv::course::detail {

namespace {

std::vector<BatchNormStats> stats_of(const IterationRun& run, int layer) {
  std::vector<BatchNormStats> out;
  if (!run.iteration) return out;
  for (const auto& s : run.iteration->batchnorm_stats())
    if (s.layer == layer) out.push_back(s);
  return out;
}

double max_abs_diff(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace

ScenarioResult run_batchnorm(const Params& p) {
  const int k = p.integer("devices"), batch = p.integer("batch"), features = p.integer("features", 3);
  const std::string ask = p.text("ask");
  const bool sync = p.flag("sync_bn");
  const ModelSpec spec = batchnorm_scenario_model(features);
  // Rows drift with their index, so chunks from different parts of the batch have different means.
  const Tensor x = make_input({batch, features}, spec.dtype, 23, 0.5);
  const Tensor t = make_targets(batch, 2, 23);
  TrainOptions opt;
  opt.sync_bn = sync;
  ScenarioResult r;
  r.title = std::string(sync ? "Synchronised" : "Per-device") + " BatchNorm1d(" + std::to_string(features) +
            "), batch " + std::to_string(batch) + " on cpu:" + std::to_string(k);
  if (sync) r.lines.push_back("Synchronised BatchNorm here computes what DDP + SyncBatchNorm computes; nn.DataParallel itself does not support it.");

  if (ask == "one_sample" || ask == "failing_replica") {
    auto run = run_iteration(k, spec, x, t, opt);
    r.lines.push_back("Chunks: " + join_ints(run->chunks, ", ") + ".");
    r.facts = {{"chunks", join_ints(run->chunks, ", ")}};
    if (run->error.empty()) {
      r.lines.push_back("The iteration ran through: no error.");
      r.answer_value = ask == "one_sample" ? "runs" : "none";
      return r;
    }
    r.lines.push_back("The engine raised, at " + run->error_stage + ":");
    r.lines.push_back(run->error);
    r.facts.push_back({"error", run->error});
    if (ask == "one_sample") {
      r.answer_value = "raises";
    } else {
      std::smatch m;
      r.answer_value = std::regex_search(run->error, m, std::regex("in replica ([0-9]+)")) ? "replica " + m[1].str() : "unknown";
    }
    return r;
  }

  auto plain = run_iteration(k, spec, x, t, opt);
  if (!plain->error.empty()) throw Error(plain->error);
  const auto per_device = stats_of(*plain, 0);
  check(!per_device.empty(), "the engine reported no BatchNorm statistics for layer 0");
  for (const auto& s : per_device)
    if (s.device >= 0)
      r.lines.push_back("Device " + std::to_string(s.device) + " (" + std::to_string(static_cast<int64_t>(s.count)) +
                        " rows): mean " + format_values(s.mean) + ", var " + format_values(s.var));

  if (ask == "per_device_vs_global") {
    TrainOptions synced = opt;
    synced.sync_bn = true;
    auto global_run = run_iteration(k, spec, x, t, synced);
    auto single = run_iteration(1, spec, x, t, TrainOptions{});
    if (!global_run->error.empty()) throw Error(global_run->error);
    if (!single->error.empty()) throw Error(single->error);
    std::vector<double> global_mean;
    for (const auto& s : stats_of(*global_run, 0))
      if (s.device < 0) global_mean = s.mean;
    check(!global_mean.empty(), "the synchronised run reported no global statistics");
    std::vector<double> single_mean = stats_of(*single, 0).empty() ? std::vector<double>{} : stats_of(*single, 0).front().mean;
    r.lines.push_back("Synchronised (global) mean over all " + std::to_string(batch) + " rows: " + format_values(global_mean));
    r.lines.push_back("One device with the whole batch: mean " + format_values(single_mean) +
                      (max_abs_diff(single_mean, global_mean) < 1e-4 ? " (the same as the synchronised one)" : ""));
    double worst = 0;
    for (const auto& s : per_device)
      if (s.device >= 0) worst = std::max(worst, max_abs_diff(s.mean, global_mean));
    r.lines.push_back("Largest gap between a device's mean and the global mean: " + std::to_string(worst));
    r.facts = {{"global mean", format_values(global_mean)}, {"largest per-device gap", std::to_string(worst)}};
    r.answer_value = worst > 1e-4 ? "differs" : "same";
    return r;
  }

  // running_stats_device: which device's statistics does the saved running_mean follow?
  const double m = spec.layers.front().momentum;
  const auto before = plain->initial_state.at("0.running_mean").to_doubles();
  const auto after = plain->trainer->state().at("0.running_mean").to_doubles();
  r.lines.push_back("running_mean before: " + format_values(before) + ", after the iteration: " + format_values(after));
  std::vector<int> matches;
  for (const auto& s : per_device) {
    if (s.device < 0) continue;
    std::vector<double> expected = before, expected_var = before;  // the variance is not compared
    update_running_stats(expected, expected_var, s, m);
    const bool match = max_abs_diff(expected, after) < 1e-5;
    r.lines.push_back("(1 - " + std::to_string(m).substr(0, 4) + ") * before + " + std::to_string(m).substr(0, 4) +
                      " * device " + std::to_string(s.device) + "'s mean = " + format_values(expected) +
                      (match ? "  <- matches" : ""));
    if (match) matches.push_back(s.device);
  }
  r.answer_value = matches.size() == 1 ? std::to_string(matches.front()) : matches.empty() ? "none" : "several";
  r.facts = {{"running_mean", format_values(after)}, {"follows device", r.answer_value}};
  return r;
}

}  // namespace dpv::course::detail
