#pragma once
// powerSGD_hook with its PowerSGDState (torch/distributed/algorithms/ddp_comm_hooks/
// powerSGD_hook.py, PyTorch 1.13, batch_tensors_with_same_shape=False), per bucket:
//  - before start_powerSGD_iter: allreduce_hook (divide, all-reduce); the iteration counter grows
//    when the last bucket of an iteration went through;
//  - then: add the bucket's error (error feedback; zeros the first time), keep a copy; view each
//    gradient as a matrix [shape[0], numel / shape[0]] of rank r = min(rows, cols, rank); compress
//    it when (rows + cols) * r * min_compression_rate < rows * cols, else all-reduce it
//    uncompressed (biases, small layers) in one flat SUM all-reduce, divided by world after;
//  - compressed matrices M, grouped by shape (first appearance order), each with P [rows, r] and
//    Q [cols, r] slices of the bucket's P and Q memory: a fresh Q (the first time, or every time
//    without warm start) is torch.randn with the seed rng.randint(1_000_000_000), then
//    orthogonalised; a kept Q is orthogonalised again. P = M Q; all-reduce P (SUM); orthogonalise
//    P; Q = M^T P; all-reduce Q and divide by world; M = P Q^T;
//  - error = the copy - the result (what compression lost on this rank).
// Orthogonalisation is _orthogonalize_gram_schmidt (rank 1 and 2; PyTorch uses QR above 2).
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/ddp/comm_hooks/comm_hook.h"

namespace dpv {

// _orthogonalize_gram_schmidt on one matrix [rows, cols] (row-major, cols <= rows): each column
// divided by its norm (+ epsilon), then removed from the later columns.
void orthogonalize_gram_schmidt(std::vector<float>& matrix, int64_t rows, int64_t cols, double epsilon);

// One bucket's PowerSGD memory (what PowerSGDState keeps per bucket index).
struct PowerSgdBucketState {
  std::vector<float> error;  // [bucket numel] error_dict (with use_error_feedback)
  std::vector<float> p;      // [sum rows * r] p_memory_dict (with warm_start)
  std::vector<float> q;      // [sum cols * r] q_memory_dict
  bool has_memory = false;   // p_memory_dict holds this bucket (an empty P when nothing compresses)
};

class PowerSgdHook : public CommHook {
 public:
  explicit PowerSgdHook(PowerSgdOptions options);
  CommHookKind kind() const override { return CommHookKind::PowerSgd; }
  CommHookRun run(GradBucket& bucket, ProcessGroup& group) override;

  const PowerSgdOptions& options() const { return options_; }
  int64_t iteration() const { return iter_; }  // PowerSGDState.iter
  const std::map<int, PowerSgdBucketState>& buckets() const { return buckets_; }
  // PowerSGDState.compression_stats()'s element counts, summed over the compressed iterations.
  int64_t total_numel_before_compression() const { return numel_before_; }
  int64_t total_numel_after_compression() const { return numel_after_; }

 private:
  // One gradient viewed as the matrix [rows, cols] (tensor.view(tensor.shape[0], -1)) at `offset`
  // in the bucket, with its slices of the bucket's P and Q memory.
  struct Compressed {
    int64_t offset = 0, rows = 0, cols = 0, rank = 0;
    int64_t p_offset = 0, q_offset = 0;
  };
  struct BucketPlan {
    std::vector<Compressed> matrices;                        // grouped by shape, P/Q memory order
    std::vector<std::pair<int64_t, int64_t>> uncompressed;   // (offset, numel) in bucket order
    int64_t p_size = 0, q_size = 0;
  };
  void maybe_increase_iter(const GradBucket& bucket);
  BucketPlan plan_bucket(const GradBucket& bucket);  // counts the compression statistics too
  // A warm-started Q orthogonalised again, or fresh P/Q memory with Q drawn and orthogonalised.
  void prepare_q(PowerSgdBucketState& state, const BucketPlan& plan, int bucket);

  PowerSgdOptions options_;
  std::mt19937 rng_;  // np.random.RandomState(random_seed)
  int64_t iter_ = 0;
  int64_t numel_before_ = 0, numel_after_ = 0;
  std::map<int, PowerSgdBucketState> buckets_;
};

}  // namespace dpv
