#include "course/batchnorm_stats.h"

#include <algorithm>

namespace dpv::course {

BatchNormStats merge_batchnorm_stats(const std::vector<BatchNormStats>& chunks) {
  BatchNormStats merged;
  merged.device = -1;
  if (chunks.empty()) return merged;
  merged.layer = chunks.front().layer;
  const size_t channels = chunks.front().mean.size();
  merged.mean.assign(channels, 0.0);  // [C]
  merged.var.assign(channels, 0.0);   // [C]
  for (const auto& c : chunks) merged.count += c.count;
  if (merged.count <= 0) return merged;
  for (const auto& c : chunks) {
    for (size_t ch = 0; ch < channels && ch < c.mean.size(); ++ch) merged.mean[ch] += c.count * c.mean[ch];
  }
  for (double& m : merged.mean) m /= merged.count;
  // Biased variance of the union: within-chunk spread plus the spread of the chunk means.
  for (const auto& c : chunks) {
    for (size_t ch = 0; ch < channels && ch < c.var.size(); ++ch) {
      const double d = c.mean[ch] - merged.mean[ch];
      merged.var[ch] += c.count * (c.var[ch] + d * d);
    }
  }
  for (double& v : merged.var) v /= merged.count;
  return merged;
}

void update_running_stats(std::vector<double>& running_mean, std::vector<double>& running_var,
                          const BatchNormStats& batch, double momentum) {
  const double n = batch.count;
  const double unbias = n > 1 ? n / (n - 1) : 1.0;
  for (size_t c = 0; c < running_mean.size() && c < batch.mean.size(); ++c) {
    running_mean[c] = (1 - momentum) * running_mean[c] + momentum * batch.mean[c];
  }
  for (size_t c = 0; c < running_var.size() && c < batch.var.size(); ++c) {
    running_var[c] = (1 - momentum) * running_var[c] + momentum * batch.var[c] * unbias;
  }
}

double accuracy(const Tensor& logits, const Tensor& targets) {
  if (!logits.defined() || logits.ndim() != 2 || !targets.defined()) return kNoAccuracy;
  const int64_t rows = logits.dim(0), classes = logits.dim(1);
  const std::vector<int64_t> labels = targets.to_int64();  // [N]
  if (rows == 0 || static_cast<int64_t>(labels.size()) != rows) return kNoAccuracy;
  const std::vector<double> values = logits.to_doubles();  // [N, classes]
  int64_t right = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const auto begin = values.begin() + r * classes;
    if (std::max_element(begin, begin + classes) - begin == labels[static_cast<size_t>(r)]) ++right;
  }
  return static_cast<double>(right) / static_cast<double>(rows);
}

double accuracy_over_ranks(const std::vector<RankOutput>& outputs, const Tensor& targets) {
  // One [rows, classes] tensor of every rank's logits and the targets of their rows, so the count
  // is course::accuracy's. Float64 holds every logit exactly, whatever the model's dtype.
  const std::vector<int64_t> all_targets = targets.to_int64();
  std::vector<double> logits;
  std::vector<int64_t> labels;
  int64_t classes = 0;
  for (const RankOutput& out : outputs) {
    if (!out.logits.defined() || out.logits.ndim() != 2) return kNoAccuracy;
    classes = out.logits.dim(1);
    const std::vector<double> values = out.logits.to_doubles();
    logits.insert(logits.end(), values.begin(), values.end());
    for (int64_t row : out.rows) labels.push_back(all_targets.at(static_cast<size_t>(row)));
  }
  if (labels.empty()) return kNoAccuracy;
  const auto rows = static_cast<int64_t>(labels.size());
  return accuracy(Tensor::from_doubles({rows, classes}, DType::Float64, logits), Tensor::from_int64({rows}, labels));
}

}  // namespace dpv::course
