#pragma once
// BatchNorm1d / BatchNorm2d. forward/backward are plain (per-device) BatchNorm; the pieces are
// public so DataParallel can run SyncBatchNorm across replicas: local statistics, the all-gather
// merge (Backend::bn_gather_stats), normalise; and in backward the local reduce, the all-reduce of
// [sum_dy, sum_dy_xmu], and the element-wise gradient with the total count.
#include "engine/layer.h"

namespace dpv {

class BatchNorm final : public Layer {
 public:
  explicit BatchNorm(const LayerSpec& spec);
  LayerKind kind() const override { return two_d_ ? LayerKind::BatchNorm2d : LayerKind::BatchNorm1d; }
  std::string type() const override { return two_d_ ? "BatchNorm2d" : "BatchNorm1d"; }
  std::string describe() const override;
  std::vector<TensorDecl> parameters(DType dtype) const override;
  std::vector<TensorDecl> buffers(DType dtype) const override;
  Shape output_shape(const Shape& input) const override;
  void initialise(TensorMap& state, const std::string& prefix, Rng& rng) const override;
  Tensor forward(LayerRun& run, const Tensor& x) override;
  Tensor backward(LayerRun& run, const Tensor& dy) override;
  bool is_batchnorm() const override { return true; }

  int64_t num_features() const { return c_; }
  double eps() const { return eps_; }
  double momentum() const { return momentum_; }

  // x viewed as [N, C, S].
  struct Layout { int64_t N, C, S; };
  Layout layout(const Shape& x) const;
  // Local batch statistics: mean[C] and biased var[C]. `single_check` raises PyTorch's
  // "Expected more than 1 value per channel when training" for a one-value batch.
  void local_stats(LayerRun& run, const Tensor& x, Tensor& mean, Tensor& var_b, bool single_check) const;
  // Normalises with given statistics and saves what backward needs; `count` is the number of
  // values per channel the statistics came from (local, or the total under sync).
  // `relu`: apply the next layer's ReLU in the same pass (LayerRun::fuse_next_relu).
  Tensor normalize(LayerRun& run, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& var_b,
                   double count, bool relu = false) const;
  // After a forward fused with the next ReLU: this layer's own output (before the ReLU), rebuilt
  // from what it saved, for an observer that looks at it. gamma and beta are the replica's.
  Tensor output_before_relu(Backend& backend, const LayerCache& cache, const Tensor& gamma, const Tensor& beta) const;
  // num_batches_tracked += 1 on the replica's buffer.
  void count_batch(LayerRun& run) const;
  // Backward, local part: sum_dy[C], sum_dy_xmu[C]; accumulates dgamma and dbeta from them.
  void backward_reduce(LayerRun& run, const Tensor& dy, Tensor& sum_dy, Tensor& sum_dy_xmu) const;
  // Backward, element-wise part with (possibly all-reduced) sums over `count` values per channel.
  Tensor backward_elemt(LayerRun& run, const Tensor& dy, const Tensor& sum_dy, const Tensor& sum_dy_xmu,
                        double count) const;

 private:
  // dgamma += sum_dy_xmu * invstd, dbeta += sum_dy ([C] vectors, accumulated on the device).
  void accumulate_affine_grads(LayerRun& run, const Tensor& sum_dy, const Tensor& sum_dy_xmu) const;
  bool two_d_;
  int64_t c_;
  double eps_, momentum_;
};

}  // namespace dpv
