#pragma once
// One rank's Reducer (torch/csrc/distributed/c10d/reducer.cpp, PyTorch 1.13, the default
// find_unused_parameters=False path):
//  - iteration 1 uses one bucket with every parameter; before the second forward the buckets are
//    rebuilt once from the order gradients became ready, with limits [1 MiB, bucket_cap_mb];
//  - when a parameter's gradient is ready (mark_ready, called by the backward right after the
//    layer produced it) it is copied into its bucket slot multiplied by 1/world;
//  - a bucket whose gradients are all in is all-reduced (SUM) as soon as every earlier bucket has
//    been launched: buckets go out strictly in index order, so every rank issues the same sequence,
//    and the all-reduce overlaps the rest of the backward. It runs on the group's communication
//    thread when the group has one (ProcessGroup::start_all_reduce_sum: in-process ranks on host
//    memory), else on the rank's (CommThread), which on a GPU issues it on the rank's communication
//    queue behind an event of the compute queue (no host wait between the backward and the bucket);
//  - finalize waits for the all-reduces, makes the compute queue wait for the communication queue,
//    and copies the averaged gradients back into .grad.
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <vector>

#include "engine/ddp/buckets.h"
#include "engine/ddp/comm_hooks/comm_hook.h"
#include "engine/ddp/comm_hooks/hook_error.h"
#include "engine/ddp/comm_thread.h"
#include "engine/process_groups/process_group.h"
#include "engine/tensor_map.h"

namespace dpv {

// One bucket's all-reduce as this rank ran it (times in seconds on the rank's clock).
struct BucketRun {
  int bucket = 0;
  size_t bytes = 0;
  double ready = 0;   // the last gradient of the bucket arrived
  double launch = 0;  // handed to the communication thread (ready, or when the bucket before it launched)
  double start = 0;   // the all-reduce began
  double end = 0;     // the all-reduce finished
  CollectiveReport report;
  std::vector<RingStep> ring;  // in-process ring only
  // With a communication hook: its collectives and bytes (`report` then sums them: the bytes the
  // hook sent, its collectives' seconds).
  CommHookRun hook;
};

class Reducer {
 public:
  // `names` and `params` in registration order (model.parameters()).
  Reducer(ProcessGroup& group, CommThread& comm, std::shared_ptr<Device> device, std::vector<std::string> names,
          std::vector<BucketParam> params, double bucket_cap_mb, std::function<double()> clock,
          size_t first_bucket_bytes = kDdpFirstBucketBytes);
  ~Reducer();
  Reducer(const Reducer&) = delete;
  Reducer& operator=(const Reducer&) = delete;

  // Before each forward: the one rebuild, after the first iteration (Reducer::rebuild_buckets).
  // Returns true when the buckets were rebuilt now.
  bool prepare_for_forward();
  // Before each backward: fresh bucket buffers, nothing ready.
  void prepare_for_backward();
  // The gradient of parameter `index` is complete: copy grad * (1/world) into its bucket slot and
  // launch every bucket that can go.
  void mark_ready(size_t index, const Tensor& grad);
  // Waits for every bucket's all-reduce and copies the averaged gradients into grads[name]
  // (shapes of the parameters). Throws the first all-reduce error, or when a gradient never came.
  // Parameter `index`'s slot in its bucket ([numel], flat), valid from prepare_for_backward until the
  // next one: a backward that writes the gradient there (gradient_as_bucket_view=True's layout)
  // saves the copy into the bucket and the copy back, with the same values.
  Tensor gradient_view(size_t index) const;
  // The rank's backward writes gradients into gradient_view (from the next prepare_for_backward).
  void set_gradients_in_buckets(bool on) { gradients_in_buckets_ = on; }
  void finalize(TensorMap& grads);
  // register_comm_hook: from the next backward, gradients go into the buckets without the 1/world
  // and each ready bucket goes to `hook` (which divides) instead of the all-reduce. `shapes`: every
  // parameter's, in registration order (the hook's bucket.gradients() views).
  void set_comm_hook(std::unique_ptr<CommHook> hook, std::vector<Shape> shapes);
  const CommHook* comm_hook() const { return hook_.get(); }
  // Whether the next backward also measures the hook's gradient error (hook_error.h): one extra
  // all-reduce per bucket, of a copy. Every rank must probe the same backwards. Does nothing
  // without a hook (the exact average is what DDP's own all-reduce gives).
  void set_hook_error_probe(bool on) { probe_next_ = on; }
  // The last backward's error over all its buckets, if it was probed (after finalize).
  const std::optional<HookErrorMeasure>& hook_error() const { return hook_error_; }

  const BucketAssignment& buckets() const { return buckets_; }
  std::vector<std::vector<std::string>> bucket_names() const;
  bool rebuilt() const { return rebuilt_; }
  // The first backward's ready order, which the one rebuild uses (empty before that backward).
  const std::vector<size_t>& first_ready_order() const { return first_ready_order_; }
  // A resumed run: the buckets rebuilt now from `ready_order` (a checkpoint's first_ready_order), as
  // if the first iteration had run here. Without it a resumed run would all-reduce its first
  // iteration in one bucket, whose ring chunks sum some elements in another order (other bits with
  // 3+ ranks). Throws dpv::Error when `ready_order` is not an order of this model's parameters.
  void rebuild_from(const std::vector<size_t>& ready_order);
  const std::vector<size_t>& ready_order() const { return ready_order_; }  // of the last backward
  const std::vector<BucketRun>& runs() const { return runs_; }          // of the last backward
  // Per bucket of the backward in progress (or the last): gradients copied in so far, whether its
  // all-reduce was launched, and whether that all-reduce has finished by now. Empty before the
  // first backward. Read between stages (not while the rank is marking gradients ready).
  std::vector<int> ready_counts() const;
  int launched_count() const { return next_launch_; }
  // Per bucket: the flat buffer [numel of its parameters] the gradients are copied into and the
  // all-reduce runs on (the communication thread may be writing it: read its size, not its values).
  const std::vector<Tensor>& bucket_buffers() const { return flat_; }
  bool all_reduce_finished(int bucket) const;
  // The first `max_count` values of a bucket's flat buffer once every gradient is in (×1/world, then
  // the mean once all-reduced); empty while it fills (the rest is uninitialised), while its
  // all-reduce is in flight (reading would race the communication thread), or without a buffer.
  std::vector<double> bucket_values(int bucket, size_t max_count) const;

 private:
  void launch_ready_buckets();
  void run_hook(int bucket);
  void wait_all() noexcept;

  ProcessGroup& group_;
  CommThread& comm_;
  std::shared_ptr<Device> device_;
  std::vector<std::string> names_;
  std::vector<BucketParam> params_;
  double bucket_cap_mb_;
  size_t first_bucket_bytes_ = kDdpFirstBucketBytes;
  std::function<double()> clock_;

  BucketAssignment buckets_;
  bool rebuilt_ = false;
  int backwards_ = 0;
  std::vector<size_t> first_ready_order_;   // iteration 1's order, for the rebuild
  std::vector<size_t> ready_order_;
  std::vector<std::pair<int, int64_t>> slot_;  // per parameter: (bucket, offset in elements)
  bool gradients_in_buckets_ = false;
  bool premultiply_ = false;  // this backward's buckets get their 1/world in the ring (see prepare_for_backward)
  std::vector<Tensor> flat_;                   // per bucket: [numel of its parameters], kept until a rebuild
  std::vector<int> pending_;                   // per bucket: gradients still to come
  std::vector<bool> marked_;
  int next_launch_ = 0;
  std::vector<BucketRun> runs_;
  std::vector<std::shared_future<void>> done_;  // per bucket, all-reduced on the rank's CommThread
  std::vector<std::shared_ptr<Work>> work_;       // per bucket, started on the group's thread
  std::unique_ptr<CommHook> hook_;
  std::vector<Shape> shapes_;  // per parameter, for the hook
  bool probe_next_ = false;    // set_hook_error_probe
  bool probing_ = false;       // this backward measures the hook's error
  std::vector<HookErrorMeasure> probes_;  // per bucket, written by its hook job
  std::optional<HookErrorMeasure> hook_error_;
};

}  // namespace dpv
