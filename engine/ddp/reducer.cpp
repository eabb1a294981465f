// The Reducer: buckets, 1/world copies, in-order launches on the communication thread, finalize.
#include "engine/ddp/reducer.h"

#include <chrono>

#include "engine/backend.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv {

Reducer::Reducer(ProcessGroup& group, CommThread& comm, std::shared_ptr<Device> device, std::vector<std::string> names,
                 std::vector<BucketParam> params, double bucket_cap_mb, std::function<double()> clock,
                 size_t first_bucket_bytes)
    : group_(group),
      comm_(comm),
      device_(std::move(device)),
      names_(std::move(names)),
      params_(std::move(params)),
      bucket_cap_mb_(bucket_cap_mb),
      first_bucket_bytes_(first_bucket_bytes),
      clock_(std::move(clock)) {
  check(names_.size() == params_.size(), "Reducer: one name per parameter");
  bucket_bytes_cap(bucket_cap_mb_);  // validates the cap now, not at the rebuild
  buckets_ = initial_buckets(params_);
}

Reducer::~Reducer() {
  wait_all();
  // The bucket buffers are freed in the compute queue's order: after the all-reduces that used them.
  try {
    comm_.join_compute();
  } catch (...) {  // a device already in a failed state: nothing more to order
  }
}

void Reducer::wait_all() noexcept {
  for (auto& f : done_)
    if (f.valid()) f.wait();
  for (auto& w : work_) {
    if (!w) continue;
    try {
      w->wait();
    } catch (...) {  // finalize reports it; here only nothing may still be running
    }
  }
}

bool Reducer::prepare_for_forward() {
  if (rebuilt_ || backwards_ == 0) return false;
  buckets_ = rebuilt_buckets(params_, first_ready_order_, bucket_cap_mb_, first_bucket_bytes_);
  rebuilt_ = true;  // the old bucket buffers stay until prepare_for_backward makes the new ones
  return true;
}

void Reducer::rebuild_from(const std::vector<size_t>& ready_order) {
  std::vector<bool> seen(params_.size(), false);
  bool permutation = ready_order.size() == params_.size();
  for (size_t i = 0; permutation && i < ready_order.size(); ++i) {
    permutation = ready_order[i] < params_.size() && !seen[ready_order[i]];
    if (permutation) seen[ready_order[i]] = true;
  }
  check(permutation, "DDP: the bucket order to restore is not an order of the model's " +
                         std::to_string(params_.size()) + " parameters (a checkpoint of another model?)");
  first_ready_order_ = ready_order;
  buckets_ = rebuilt_buckets(params_, first_ready_order_, bucket_cap_mb_, first_bucket_bytes_);
  rebuilt_ = true;
}

void Reducer::prepare_for_backward() {
  wait_all();
  const size_t nb = buckets_.buckets.size();
  slot_.assign(params_.size(), {-1, 0});
  // The bucket buffers live from one backward to the next (every slot is overwritten by mark_ready
  // and read back by finalize; the previous all-reduces are done): new ones only after a rebuild.
  flat_.resize(nb);
  pending_.assign(nb, 0);
  for (size_t b = 0; b < nb; ++b) {
    int64_t offset = 0;
    for (size_t p : buckets_.buckets[b]) {
      slot_[p] = {static_cast<int>(b), offset};
      offset += params_[p].numel;
    }
    pending_[b] = static_cast<int>(buckets_.buckets[b].size());
    const DType dtype = params_[buckets_.buckets[b][0]].dtype;
    if (!flat_[b].defined() || flat_[b].numel() != offset || flat_[b].dtype() != dtype)
      flat_[b] = Tensor::empty({offset}, dtype, device_);  // [bucket numel]
  }
  marked_.assign(params_.size(), false);
  // Nobody looks at a bucket before its all-reduce when the gradients live in it: the started ring
  // can apply the 1/world (premultiplied sum) instead of a pass of its own over every bucket.
  premultiply_ = gradients_in_buckets_ && !comm_.threaded() && group_.size() > 1 && !hook_;
  ready_order_.clear();
  next_launch_ = 0;
  runs_.assign(nb, {});
  probing_ = probe_next_ && hook_ != nullptr;
  probes_.assign(probing_ ? nb : 0, {});
  hook_error_.reset();
  done_.assign(nb, {});
  work_.assign(nb, {});
}

void Reducer::mark_ready(size_t index, const Tensor& grad) {
  // Messages are built only on failure: this runs for every parameter of every backward.
  if (index >= params_.size()) throw Error("Reducer: parameter index " + std::to_string(index) + " out of range");
  if (marked_[index])
    throw Error("Expected to mark a variable ready only once. This error is caused by one of the following "
                "reasons: 1) Use of a module parameter outside the `forward` function.");
  if (grad.numel() != params_[index].numel || grad.dtype() != params_[index].dtype)
    throw Error("Reducer: the gradient of " + names_[index] + " does not match its parameter");
  marked_[index] = true;
  ready_order_.push_back(index);
  const auto [b, offset] = slot_[index];
  // bucket_view = grad * (1 / world_size) (mul_out in mark_variable_ready_dense). A gradient the
  // backward wrote into its bucket view (gradient_views) is scaled where it is.
  Tensor view = flat_[static_cast<size_t>(b)].slice0(offset, offset + grad.numel());
  if (grad.raw() != view.raw()) view.copy_from(grad);
  // With premultiply_, the ring multiplies it by 1/world as it first touches it, with the same bits.
  // With a comm hook PyTorch copies the gradient as it is: the hook divides.
  if (!premultiply_ && !hook_) device_->backend().scale_inplace(view, 1.0 / static_cast<double>(group_.size()));
  if (--pending_[static_cast<size_t>(b)] == 0) runs_[static_cast<size_t>(b)].ready = clock_();
  launch_ready_buckets();
}

void Reducer::launch_ready_buckets() {
  const int nb = static_cast<int>(flat_.size());
  while (next_launch_ < nb && pending_[static_cast<size_t>(next_launch_)] == 0) {
    const int b = next_launch_++;
    BucketRun& run = runs_[static_cast<size_t>(b)];
    run.bucket = b;
    run.bytes = flat_[static_cast<size_t>(b)].nbytes();
    run.launch = clock_();
    // The bucket's copies are ordered before its all-reduce: on a GPU by the event CommThread::submit
    // records on the compute queue (the communication queue waits for it, the host does not); the
    // group's own thread reads host memory, where the copies are done already.
    if (hook_) {
      run_hook(b);
      continue;
    }
    if (!comm_.threaded()) {
      work_[static_cast<size_t>(b)] = group_.start_all_reduce_sum(
          flat_[static_cast<size_t>(b)], premultiply_ ? 1.0 / static_cast<double>(group_.size()) : 1.0);
      check(work_[static_cast<size_t>(b)] != nullptr,
            "Reducer: the group (" + group_.backend() + ") cannot start an all-reduce on its own thread");
      continue;
    }
    done_[static_cast<size_t>(b)] = comm_.submit([this, b] {
      BucketRun& r = runs_[static_cast<size_t>(b)];
      r.start = clock_();
      r.report = group_.all_reduce_sum(flat_[static_cast<size_t>(b)], &r.ring);
      r.end = clock_();
    });
  }
}

void Reducer::set_comm_hook(std::unique_ptr<CommHook> hook, std::vector<Shape> shapes) {
  check(shapes.size() == params_.size(), "Reducer: one shape per parameter for the communication hook");
  hook_ = std::move(hook);
  shapes_ = std::move(shapes);
}

void Reducer::run_hook(int b) {
  // The hook's collectives are blocking: on the rank's communication thread when it has one, else
  // here (in-process ranks on host memory: every rank reaches the same bucket in the same order).
  auto job = [this, b] {
    BucketRun& r = runs_[static_cast<size_t>(b)];
    GradBucket bucket{b, b + 1 == static_cast<int>(flat_.size()), flat_[static_cast<size_t>(b)], {}, {}};
    int64_t offset = 0;
    for (size_t p : buckets_.buckets[static_cast<size_t>(b)]) {
      bucket.shapes.push_back(shapes_[p]);
      bucket.offsets.push_back(offset);
      offset += params_[p].numel;
    }
    // The probe's copy of the raw bucket is taken before the hook changes it (PowerSGD adds its
    // error feedback in place); the exact mean is all-reduced after the hook's timing ends.
    Tensor raw = probing_ ? bucket.buffer.clone() : Tensor();  // [bucket numel]
    r.start = clock_();
    r.hook = hook_->run(bucket, group_);
    r.end = clock_();
    if (probing_) probes_[static_cast<size_t>(b)] = measure_hook_error(bucket, std::move(raw), group_);
    r.report = {CollectiveOp::AllReduce, group_.size(), r.hook.bytes_sent, 0, 0, 0};
    for (const CollectiveReport& c : r.hook.collectives) r.report.seconds += c.seconds;
    finish_report(r.report);
  };
  if (comm_.threaded())
    done_[static_cast<size_t>(b)] = comm_.submit(job);
  else
    job();
}

void Reducer::finalize(TensorMap& grads) {
  for (size_t p = 0; p < params_.size(); ++p)
    check(marked_[p], "Expected to have finished reduction in the prior iteration before starting a new one. This "
                      "error indicates that your module has parameters that were not used in producing loss. (the "
                      "gradient of " + names_[p] + " never became ready)");
  std::exception_ptr first;
  for (auto& f : done_) {
    if (!f.valid()) continue;
    try {
      f.get();
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  // The group's thread timed its all-reduces on the steady clock: move them onto the rank's clock.
  const double clock_now = clock_();
  const auto steady_now = std::chrono::steady_clock::now();
  auto on_clock = [&](std::chrono::steady_clock::time_point t) {
    return clock_now - std::chrono::duration<double>(steady_now - t).count();
  };
  for (size_t b = 0; b < work_.size(); ++b) {
    if (!work_[b]) continue;
    try {
      work_[b]->wait();
      BucketRun& run = runs_[b];
      run.report = work_[b]->report();
      run.ring = work_[b]->ring();
      run.start = on_clock(work_[b]->started());
      run.end = on_clock(work_[b]->finished());
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  // Every all-reduce is queued: the compute queue (the copies into .grad below, the optimizer)
  // waits for the communication queue, as DDP's finalize_backward waits for the buckets' work.
  comm_.join_compute();
  if (first) std::rethrow_exception(first);
  if (probing_) {
    hook_error_.emplace();
    for (const HookErrorMeasure& m : probes_) hook_error_->add(m);
  }
  for (size_t p = 0; p < params_.size(); ++p) {
    const auto [b, offset] = slot_[p];
    const Tensor view = flat_[static_cast<size_t>(b)].slice0(offset, offset + params_[p].numel);
    Tensor& grad = grads.at(names_[p], "the gradients");
    if (grad.raw() != view.raw()) grad.copy_from(view);  // a bucket view already holds the average
  }
  ++backwards_;
  if (backwards_ == 1) first_ready_order_ = ready_order_;
}

Tensor Reducer::gradient_view(size_t index) const {
  check(index < params_.size() && index < slot_.size(), "Reducer: no gradient view before the backward");
  const auto [b, offset] = slot_[index];
  return flat_[static_cast<size_t>(b)].slice0(offset, offset + params_[index].numel);
}

std::vector<int> Reducer::ready_counts() const {
  std::vector<int> out;
  if (pending_.size() != buckets_.buckets.size()) return out;  // rebuilt since that backward
  for (size_t b = 0; b < pending_.size(); ++b)
    out.push_back(static_cast<int>(buckets_.buckets[b].size()) - pending_[b]);
  return out;
}

bool Reducer::all_reduce_finished(int bucket) const {
  if (bucket < 0 || bucket >= static_cast<int>(done_.size())) return false;
  if (const auto& w = work_[static_cast<size_t>(bucket)]) return w->completed();
  const auto& f = done_[static_cast<size_t>(bucket)];
  return f.valid() && f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

std::vector<double> Reducer::bucket_values(int bucket, size_t max_count) const {
  if (bucket < 0 || bucket >= static_cast<int>(flat_.size()) || !flat_[static_cast<size_t>(bucket)].defined()) return {};
  // A bucket still filling is partly uninitialised memory (at::empty in PyTorch too).
  if (static_cast<size_t>(bucket) >= pending_.size() || pending_[static_cast<size_t>(bucket)] != 0) return {};
  if (bucket < next_launch_ && !all_reduce_finished(bucket)) return {};
  return flat_[static_cast<size_t>(bucket)].to_doubles(max_count);
}

std::vector<std::vector<std::string>> Reducer::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (const auto& b : buckets_.buckets) {
    out.emplace_back();
    for (size_t p : b) out.back().push_back(names_[p]);
  }
  return out;
}

}  // namespace dpv
