#include "engine/ddp/ddp_rank_strategy.h"

#include <chrono>
#include <utility>

#include "engine/ddp/reducer.h"
#include "engine/ddp/sampler.h"
#include "engine/process_groups/process_group.h"
#include "engine/error.h"

namespace dpv {

namespace {

class DdpRankIteration : public StrategyIteration {
 public:
  DdpRankIteration(DdpRankStrategy& strategy, const Tensor& input, const Tensor& target, Observer* observer)
      : strategy_(strategy), ddp_(strategy.rank()), observer_(observer) {
    SamplerOptions sampler;
    sampler.shuffle = false;
    indices_ = distributed_sampler_indices(input.dim(0), ddp_.world_size(), ddp_.rank(), sampler);
    ddp_.set_batch(input, target, indices_);
    ddp_.set_fuse_batchnorm_relu(true);  // a launched rank builds no snapshots: nobody sees an activation
    plan_ = rank_iteration_plan(ddp_.model(), ddp_.options());
    label_ = "rank " + std::to_string(ddp_.rank()) + " (" + ddp_.device().name() + ")";
    t0_ = strategy_.now();
  }

  StrategyKind strategy() const override { return rank_strategy(ddp_.zero_stage()); }
  const std::vector<Stage>& plan() const override { return plan_; }
  int next_index() const override { return next_; }

  StageEvent step() override {
    check(!finished(), "the iteration has finished");
    const Stage& stage = plan_[static_cast<size_t>(next_)];
    const double start = strategy_.now();
    std::vector<CollectiveReport> reports = run(stage);
    StageEvent e = event_for(stage, start, std::move(reports));
    if (stage.kind == StageKind::Finalize && ddp_.has_reducer()) add_bucket_runs(e);
    ++next_;
    if (observer_) observer_->on_stage(e);
    return e;
  }

  void run_to_end() override {
    if (!observer_ && next_ == 0) {  // nobody looks at the stages: one call, no clocks read
      ddp_.run_iteration();
      next_ = static_cast<int>(plan_.size());
      return;
    }
    while (!finished()) step();
  }

  bool snapshots() const override { return false; }
  void set_snapshots(bool on) override {
    check(!on, "a launched DDP rank builds no value snapshots (the other ranks' tensors are in other processes)");
  }

  double loss() const override { return ddp_.loss(); }
  std::vector<double> rank_losses() const override { return {ddp_.loss()}; }  // this rank's own
  Tensor output() const override { return ddp_.output(); }
  std::vector<int64_t> output_rows() const override { return indices_; }
  const std::vector<BatchNormStats>& batchnorm_stats() const override { return ddp_.batchnorm_stats(); }

 private:
  std::vector<CollectiveReport> run(const Stage& stage) { return ddp_.run_stage(stage); }

  // The stage on this rank's one lane: busy from its start to its end.
  StageEvent event_for(const Stage& stage, double start, std::vector<CollectiveReport> reports) const {
    StageEvent e;
    e.index = next_;
    e.stage = stage;
    e.t_start = start - t0_;
    e.t_end = strategy_.now() - t0_;
    DeviceState d;
    d.device = 0;
    d.label = label_;
    d.has_replica = true;
    d.busy_start = e.t_start;
    d.busy_end = e.t_end;
    e.devices.push_back(d);
    e.collectives = std::move(reports);
    return e;
  }

  // Finalize carries the bucket all-reduces of the backward, where they ran on the rank's
  // communication thread (the lane right under its compute).
  void add_bucket_runs(StageEvent& finalize) const {
    const auto names = ddp_.reducer().bucket_names();
    for (const BucketRun& b : ddp_.reducer().runs()) {
      finalize.comm.push_back(CommSpan{0, b.bucket, b.launch - t0_, b.start - t0_, b.end - t0_, b.bytes,
                                       names[static_cast<size_t>(b.bucket)], b.report, b.ring});
      finalize.collectives.push_back(b.report);
    }
  }

  DdpRankStrategy& strategy_;
  DdpRank& ddp_;
  Observer* observer_;
  std::vector<int64_t> indices_;
  std::vector<Stage> plan_;
  std::string label_;
  double t0_ = 0;
  int next_ = 0;
};

}  // namespace

DdpRankStrategy::DdpRankStrategy(ProcessGroup& group, std::shared_ptr<DeviceSet> devices, Model model,
                                 const TensorMap& state, DdpOptions options)
    : group_(group), devices_(std::move(devices)), model_(std::move(model)) {
  const auto origin = std::chrono::steady_clock::now();
  clock_ = [origin] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - origin).count(); };
  rank_ = std::make_unique<DdpRank>(group_, devices_->shared(0), model_, state, std::move(options), clock_);
}

std::string DdpRankStrategy::transport() const { return group_.backend(); }

std::unique_ptr<StrategyIteration> DdpRankStrategy::begin_iteration(const Tensor& input, const Tensor& target,
                                                                    Observer* observer) {
  return std::make_unique<DdpRankIteration>(*this, input, target, observer);
}

}  // namespace dpv
