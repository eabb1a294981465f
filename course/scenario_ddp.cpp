// Scenarios about what DistributedDataParallel computes: which samples each rank sees
// (DistributedSampler), the loss rank 0 prints, and the gradients every rank ends up with, each
// run on in-process ranks over simulated CPU devices and compared with one device.
#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "course/scenario_support.h"
#include "engine/ddp/sampler.h"
#include "engine/error.h"
#include "engine/model.h"

namespace dpv::course::detail {

namespace {

std::string number(double v, int precision = 6) {
  std::ostringstream o;
  o.precision(precision);
  o << v;
  return o.str();
}

// One device, one iteration with `lr` on rows `rows` of the batch (all rows when empty).
std::unique_ptr<IterationRun> one_device(const ModelSpec& spec, const Batch& b, const std::vector<int64_t>& rows,
                                         double lr = 0.01) {
  TrainOptions opt;
  opt.optimizer.lr = lr;
  auto run = rows.empty() ? run_iteration(1, spec, b.input, b.target, opt)
                          : run_iteration(1, spec, take_rows(b.input, rows), take_rows(b.target, rows), opt);
  if (!run->error.empty()) throw Error(run->error);
  return run;
}

// Least-squares factor c in a ~ c * b over every tensor the maps share.
double ratio(const TensorMap& a, const TensorMap& b) {
  double dot = 0, norm = 0;
  for (const auto& [name, x] : a.items()) {
    const Tensor* y = b.find(name);
    if (!y) continue;
    const auto xs = x.to_doubles(), ys = y->to_doubles();
    for (size_t i = 0; i < xs.size() && i < ys.size(); ++i) dot += xs[i] * ys[i], norm += ys[i] * ys[i];
  }
  check(norm > 0, "the reference gradient is zero; pick another batch");
  return dot / norm;
}

// Sum of several gradient maps (host copies).
TensorMap sum_maps(const std::vector<const TensorMap*>& maps) {
  TensorMap out;
  for (const auto& [name, first] : maps.front()->items()) {
    std::vector<double> acc(static_cast<size_t>(first.numel()), 0.0);
    for (const TensorMap* m : maps) {
      const auto v = m->at(name).to_doubles();
      for (size_t i = 0; i < acc.size(); ++i) acc[i] += v[i];
    }
    out.set(name, Tensor::from_doubles(first.shape(), first.dtype(), acc));
  }
  return out;
}

// "same" when a equals b up to rounding, else "1/k", "k" or "differs".
std::string compare_to(const TensorMap& a, const TensorMap& b, int k) {
  const double scale = std::max(max_magnitude(b), 1e-12);
  if (max_difference(a, b) / scale < 1e-4) return "same";
  const double c = ratio(a, b);
  const auto near = [](double x, double y) { return std::fabs(x - y) < 1e-3 * std::max(1.0, std::fabs(y)); };
  if (k > 1 && near(c, 1.0 / k)) return "1/k";
  if (k > 1 && near(c, double(k))) return "k";
  return "differs";
}

std::string index_list(const std::vector<int64_t>& v) { return v.empty() ? "none" : join_ints(v); }

// A rank's indices for a line of text: all of them when few, else the first ones and the count.
std::string shown_indices(const std::vector<int64_t>& v) {
  if (v.size() <= 12) return join_ints(v, ", ");
  return join_ints(std::vector<int64_t>(v.begin(), v.begin() + 8), ", ") + ", ... (" + std::to_string(v.size()) + " samples)";
}

}  // namespace

Batch ddp_batch(const ModelSpec& spec, int batch, uint64_t seed) {
  check(!spec.layers.empty() && spec.layers.front().kind == LayerKind::Linear,
        "this scenario needs a model whose first layer is linear (it feeds rows of features)", ErrorClass::ValueError);
  const Shape shape = {batch, spec.layers.front().in_features};
  return {make_input(shape, spec.dtype, seed), make_targets(batch, model_classes(spec, shape), seed)};
}

ScenarioResult run_sampler(const Params& p) {
  const int world = p.integer("devices");
  const int64_t n = p.integer("dataset");
  const std::string ask = p.text("ask");
  SamplerOptions opt;
  opt.shuffle = false;
  opt.drop_last = p.flag("drop_last");
  ScenarioResult r;
  r.title = "DistributedSampler(shuffle=False" + std::string(opt.drop_last ? ", drop_last=True" : "") + ") over " +
            std::to_string(n) + " samples, " + std::to_string(world) + " ranks";
  std::map<int64_t, int> seen;
  int64_t counted = 0;
  std::vector<std::vector<int64_t>> shards;
  for (int rank = 0; rank < world; ++rank) {
    shards.push_back(distributed_sampler_indices(n, world, rank, opt));
    for (int64_t i : shards.back()) ++seen[i], ++counted;
    r.lines.push_back("Rank " + std::to_string(rank) + ": samples " + shown_indices(shards.back()));
  }
  const int64_t per_rank = sampler_num_samples(n, world, opt.drop_last);
  r.lines.push_back("num_samples = " + std::to_string(per_rank) + " per rank, " + std::to_string(counted) +
                    " in all for a data set of " + std::to_string(n) + ".");
  std::vector<int64_t> twice, missing;
  for (int64_t i = 0; i < n; ++i) {
    if (seen[i] > 1) twice.push_back(i);
    if (seen[i] == 0) missing.push_back(i);
  }
  r.lines.push_back("Seen more than once (padding): " + index_list(twice) + "; never seen: " + index_list(missing) + ".");
  // DataParallel's contiguous chunks of the same samples, for contrast.
  const auto chunks = chunk_sizes(n, world);
  int64_t start = 0;
  std::string dp;
  for (size_t d = 0; d < chunks.size(); ++d) {
    dp += (d ? "; " : "") + std::string("GPU ") + std::to_string(d) + ": " +
          (chunks[d] ? std::to_string(start) + ".." + std::to_string(start + chunks[d] - 1) : std::string("none"));
    start += chunks[d];
  }
  r.lines.push_back("DataParallel would scatter contiguous chunks instead: " + dp + ".");
  r.facts = {{"per rank", std::to_string(per_rank)}, {"counted", std::to_string(counted)}, {"padding", index_list(twice)}};
  if (ask == "rank_indices") {
    const int rank = p.integer("rank");
    check(rank >= 0 && rank < world, "'rank' must be between 0 and devices - 1", ErrorClass::ValueError);
    r.answer_value = join_ints(shards[static_cast<size_t>(rank)]);
  } else if (ask == "counted") {
    r.answer_value = std::to_string(counted);
  } else if (ask == "duplicates") {
    r.answer_value = index_list(twice);
  } else {  // steps_per_epoch with a DataLoader of batch_size `batch` per process
    const int64_t batch = p.integer("batch", 1);
    const int64_t steps = (per_rank + batch - 1) / batch;
    r.lines.push_back("DataLoader(batch_size=" + std::to_string(batch) + ") on each rank: ceil(" + std::to_string(per_rank) +
                      " / " + std::to_string(batch) + ") = " + std::to_string(steps) + " steps per epoch; each step trains on " +
                      std::to_string(batch * world) + " samples (" + std::to_string(batch) + " per rank x " + std::to_string(world) +
                      " ranks).");
    r.facts.push_back({"steps per epoch", std::to_string(steps)});
    r.answer_value = std::to_string(steps);
  }
  return r;
}

ScenarioResult run_ddp_loss(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch");
  const ModelSpec spec = scenario_model(p, "simple");
  const Batch b = ddp_batch(spec, batch, 29);
  auto ddp = run_ddp(world, spec, b.input, b.target, DdpOptions{});
  const double rank0 = ddp->trainer->rank(0).loss();
  const double mean = ddp->iteration->mean_rank_loss();
  const auto& shard0 = ddp->iteration->shards().front();
  const double own = one_device(spec, b, shard0)->iteration->loss();
  const double whole = one_device(spec, b, {})->iteration->loss();
  ScenarioResult r;
  r.title = "loss.item() on every rank: DDP on cpu:" + std::to_string(world) + ", global batch " + std::to_string(batch);
  for (int k = 0; k < world; ++k)
    r.lines.push_back("Rank " + std::to_string(k) + " (samples " + join_ints(ddp->iteration->shards()[static_cast<size_t>(k)], ", ") +
                      "): loss " + number(ddp->trainer->rank(k).loss()));
  r.lines.push_back("print(loss.item()) on rank 0 shows " + number(rank0) + ".");
  r.lines.push_back("One device on rank 0's samples alone: " + number(own) + "; on the whole batch: " + number(whole) +
                    "; the mean of the ranks' losses: " + number(mean) + ".");
  r.lines.push_back("DDP averages gradients, never losses: to report the global loss, all-reduce it yourself and divide by " +
                    std::to_string(world) + ".");
  r.facts = {{"rank 0 loss", number(rank0)}, {"mean over ranks", number(mean)}, {"whole batch", number(whole)}};
  const auto same = [](double a, double c) { return std::fabs(a - c) < 1e-5 * std::max(1.0, std::fabs(c)); };
  r.answer_value = same(rank0, whole) ? "global" : same(rank0, own) ? "rank0" : "other";
  return r;
}

ScenarioResult run_ddp_gradients(const Params& p) {
  const int world = p.integer("devices"), batch = p.integer("batch");
  const std::string ask = p.text("ask");
  const ModelSpec spec = scenario_model(p, "simple");
  const Batch b = ddp_batch(spec, batch, 31);
  DdpOptions opt;
  if (p.j.contains("lr")) opt.optimizer.lr = p.j.at("lr").get<double>();
  auto ddp = run_ddp(world, spec, b.input, b.target, opt);
  const TensorMap& averaged = ddp->trainer->rank(0).grads();
  ScenarioResult r;
  r.title = "Gradients after one DDP backward: cpu:" + std::to_string(world) + ", global batch " + std::to_string(batch);
  std::string shards;
  for (const auto& s : ddp->iteration->shards()) shards += (shards.empty() ? "" : " | ") + join_ints(s, ",");
  r.lines.push_back("Shards (DistributedSampler): " + shards);
  bool equal_on_ranks = true;
  for (int k = 1; k < world; ++k) equal_on_ranks = equal_on_ranks && max_difference(ddp->trainer->rank(k).grads(), averaged) < 1e-7;
  r.lines.push_back(equal_on_ranks ? "Every rank holds the same .grad after the backward."
                                   : "The ranks' .grad differ (they should not).");
  if (ask == "reduction") {
    // Each rank's own gradient: one device on that rank's shard (its mean loss).
    std::vector<std::unique_ptr<IterationRun>> local;
    std::vector<const TensorMap*> maps;
    for (const auto& s : ddp->iteration->shards()) {
      local.push_back(one_device(spec, b, s));
      maps.push_back(&local.back()->trainer->grads());
    }
    const TensorMap total = sum_maps(maps);
    const double c = ratio(averaged, total);
    r.lines.push_back("DDP's .grad / (sum of the " + std::to_string(world) + " ranks' own gradients) = " + number(c) +
                      " (1/" + std::to_string(world) + " = " + number(1.0 / world) + ").");
    const auto near = [](double x, double y) { return std::fabs(x - y) < 1e-4; };
    r.answer_value = near(c, 1.0 / world) ? "mean" : near(c, 1.0) ? "sum" : "other";
    r.facts = {{"ratio to the sum", number(c)}};
  } else if (ask == "vs_single") {
    auto single = one_device(spec, b, {});
    const double gap = max_difference(averaged, single->trainer->grads());
    r.lines.push_back("One device on all " + std::to_string(batch) + " samples: largest |difference| of a gradient = " +
                      number(gap) + " (largest gradient " + number(max_magnitude(single->trainer->grads())) + ").");
    const int64_t used = static_cast<int64_t>(ddp->iteration->shards().size() * ddp->iteration->shards().front().size());
    if (used != batch)
      r.lines.push_back("The ranks trained on " + std::to_string(used) + " samples, not " + std::to_string(batch) +
                        ": the sampler padded with repeats, so those samples weigh twice.");
    r.answer_value = compare_to(averaged, single->trainer->grads(), world);
    r.facts = {{"max difference", number(gap)}, {"samples trained on", std::to_string(used)}};
  } else if (ask == "vs_dp") {
    auto dp = run_iteration(world, spec, b.input, b.target, TrainOptions{});
    if (!dp->error.empty()) throw Error(dp->error);
    const double gap = max_difference(averaged, dp->trainer->grads());
    r.lines.push_back("DataParallel on the same cpu:" + std::to_string(world) + " and batch (contiguous chunks " +
                      join_ints(dp->chunks, ", ") + ", replica gradients SUMMED onto GPU 0): largest |difference| = " +
                      number(gap) + ".");
    r.lines.push_back("DP sums gradients of a loss already divided by " + std::to_string(batch) + "; DDP averages " +
                      std::to_string(world) + " gradients of losses divided by " +
                      std::to_string(ddp->iteration->shards().front().size()) + ": the same when the shards are equal.");
    r.answer_value = compare_to(averaged, dp->trainer->grads(), world);
    r.facts = {{"max difference", number(gap)}};
  } else {  // matching_step: which one-device run takes the same optimizer step?
    const TensorMap& after = ddp->trainer->rank(0).params();
    const auto& shard0 = ddp->iteration->shards().front();
    struct Candidate {
      std::string value, text;
      std::unique_ptr<IterationRun> run;
    };
    std::vector<Candidate> candidates;
    candidates.push_back({"global@lr", "whole batch, lr " + number(opt.optimizer.lr), one_device(spec, b, {}, opt.optimizer.lr)});
    candidates.push_back({"global@Wlr", "whole batch, lr " + number(opt.optimizer.lr * world), one_device(spec, b, {}, opt.optimizer.lr * world)});
    candidates.push_back({"shard@lr", "rank 0's " + std::to_string(shard0.size()) + " samples, lr " + number(opt.optimizer.lr),
                          one_device(spec, b, shard0, opt.optimizer.lr)});
    candidates.push_back({"shard@Wlr", "rank 0's " + std::to_string(shard0.size()) + " samples, lr " + number(opt.optimizer.lr * world),
                          one_device(spec, b, shard0, opt.optimizer.lr * world)});
    r.answer_value = "none";
    for (auto& c : candidates) {
      const double gap = max_difference(after, c.run->trainer->state());
      const bool match = gap < 1e-6;
      r.lines.push_back("One device, " + c.text + ": largest |parameter difference| after the step = " + number(gap) +
                        (match ? "  <- the same step" : ""));
      if (match && r.answer_value == "none") r.answer_value = c.value;
    }
    r.facts = {{"per-rank batch", std::to_string(shard0.size())}, {"global batch", std::to_string(batch)}};
  }
  return r;
}

}  // namespace dpv::course::detail
