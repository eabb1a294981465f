// powerSGD_hook (see powersgd.h).
#include "engine/ddp/comm_hooks/powersgd.h"

#include <algorithm>
#include <cmath>

#include "engine/ddp/comm_hooks/torch_random.h"
#include "engine/error.h"

namespace dpv {

void orthogonalize_gram_schmidt(std::vector<float>& matrix, int64_t rows, int64_t cols, double epsilon) {
  auto at = [&](int64_t i, int64_t k) -> float& { return matrix[static_cast<size_t>(i * cols + k)]; };
  for (int64_t c = 0; c < cols; ++c) {
    // torch.norm(col, dim=1): float32 result of the sum of squares (accumulated wider here; torch's
    // vectorised sum rounds in another order: the last bit may differ).
    double squares = 0;
    for (int64_t i = 0; i < rows; ++i) squares += static_cast<double>(at(i, c)) * at(i, c);
    float norm = static_cast<float>(std::sqrt(squares));
    // col /= norm (+ epsilon); with epsilon 0 a zero column becomes NaN, as in PyTorch (tensors do
    // not raise ZeroDivisionError).
    if (epsilon != 0) norm = norm + static_cast<float>(epsilon);
    for (int64_t i = 0; i < rows; ++i) at(i, c) = at(i, c) / norm;
    // rest -= sum(col * rest, dim=1) * col
    for (int64_t k = c + 1; k < cols; ++k) {
      double dot = 0;
      for (int64_t i = 0; i < rows; ++i) dot += static_cast<double>(at(i, c) * at(i, k));
      const float projection = static_cast<float>(dot);
      for (int64_t i = 0; i < rows; ++i) at(i, k) = at(i, k) - projection * at(i, c);
    }
  }
}

PowerSgdHook::PowerSgdHook(PowerSgdOptions options) : options_(options), rng_(options.random_seed) {
  check_comm_hook_options({CommHookKind::PowerSgd, options_});
}

void PowerSgdHook::maybe_increase_iter(const GradBucket& bucket) {
  if (bucket.is_last) ++iter_;
}

namespace {

// out[a, k] = sum_b left(a, b) * right[b, k] for a matrix `left` given by an accessor; the float32
// products are summed in double and rounded once (torch's bmm sums in BLAS's order: within a few
// float32 roundings of this).
template <typename Left>
void matmul(Left left, int64_t a_count, int64_t b_count, const float* right, int64_t k_count, float* out) {
  for (int64_t a = 0; a < a_count; ++a)
    for (int64_t k = 0; k < k_count; ++k) {
      double sum = 0;
      for (int64_t b = 0; b < b_count; ++b) sum += static_cast<double>(left(a, b)) * right[b * k_count + k];
      out[a * k_count + k] = static_cast<float>(sum);
    }
}

Tensor host_copy(const std::vector<float>& values) {
  Tensor t = Tensor::empty({static_cast<int64_t>(values.size())}, DType::Float32);  // [n]
  std::copy(values.begin(), values.end(), t.data<float>());
  return t;
}

void orthogonalize_slice(std::vector<float>& memory, int64_t offset, int64_t rows, int64_t rank, double epsilon) {
  std::vector<float> matrix(memory.begin() + offset, memory.begin() + offset + rows * rank);  // [rows, rank]
  orthogonalize_gram_schmidt(matrix, rows, rank, epsilon);
  std::copy(matrix.begin(), matrix.end(), memory.begin() + offset);
}

}  // namespace

PowerSgdHook::BucketPlan PowerSgdHook::plan_bucket(const GradBucket& bucket) {
  // Which gradients to compress, grouped by matrix shape in first-appearance order
  // (shape_to_tensors), and which to all-reduce as they are.
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<Compressed>>> by_shape;
  BucketPlan plan;
  for (size_t t = 0; t < bucket.shapes.size(); ++t) {
    const Shape& shape = bucket.shapes[t];
    const int64_t numel = shape_numel(shape);
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const int64_t cols = rows == 0 ? 0 : numel / rows;
    const int64_t rank = std::min({rows, cols, static_cast<int64_t>(options_.matrix_approximation_rank)});
    const int64_t compressed_size = (rows + cols) * rank;
    numel_before_ += numel;
    if (static_cast<double>(compressed_size) * options_.min_compression_rate < static_cast<double>(numel)) {
      auto it = std::find_if(by_shape.begin(), by_shape.end(), [&](const auto& e) { return e.first == std::pair{rows, cols}; });
      if (it == by_shape.end()) it = by_shape.insert(by_shape.end(), {{rows, cols}, {}});
      it->second.push_back({bucket.offsets[t], rows, cols, rank, 0, 0});
      numel_after_ += compressed_size;
    } else {
      plan.uncompressed.emplace_back(bucket.offsets[t], numel);
      numel_after_ += numel;
    }
  }
  for (const auto& [shape, list] : by_shape)
    for (Compressed m : list) {
      m.p_offset = plan.p_size;
      m.q_offset = plan.q_size;
      plan.p_size += m.rows * m.rank;
      plan.q_size += m.cols * m.rank;
      plan.matrices.push_back(m);
    }
  return plan;
}

void PowerSgdHook::prepare_q(PowerSgdBucketState& state, const BucketPlan& plan, int bucket) {
  const double epsilon = options_.orthogonalization_epsilon;
  if (options_.warm_start && state.has_memory) {
    check(state.p.size() == static_cast<size_t>(plan.p_size) && state.q.size() == static_cast<size_t>(plan.q_size),
          "PowerSGD: bucket " + std::to_string(bucket) + " changed its parameters since its P and Q were made");
    for (const Compressed& m : plan.matrices) orthogonalize_slice(state.q, m.q_offset, m.cols, m.rank, epsilon);
    return;
  }
  state.has_memory = true;
  state.p.assign(static_cast<size_t>(plan.p_size), 0.0f);
  state.q.assign(static_cast<size_t>(plan.q_size), 0.0f);
  // torch.manual_seed(state.rng.randint(1_000_000_000)), then torch.randn for each Q in turn (the
  // seed is drawn even when nothing in the bucket compresses).
  TorchCpuGenerator generator(static_cast<uint64_t>(numpy_legacy_randint(rng_, 1'000'000'000)));
  for (const Compressed& m : plan.matrices) {
    const std::vector<float> values = generator.randn_float(m.cols * m.rank);
    std::copy(values.begin(), values.end(), state.q.begin() + m.q_offset);
    orthogonalize_slice(state.q, m.q_offset, m.cols, m.rank, epsilon);
  }
}

CommHookRun PowerSgdHook::run(GradBucket& bucket, ProcessGroup& group) {
  if (iter_ < options_.start_powerSGD_iter) {
    maybe_increase_iter(bucket);
    return allreduce_mean(bucket, group);
  }
  const int world = group.size();
  Tensor& input = bucket.buffer;
  check(input.dtype() == DType::Float32 && input.on_host_memory(),
        "powerSGD_hook runs on float32 gradients in CPU memory here (simulated CPU devices, Gloo ranks)");
  float* data = input.data<float>();
  const int64_t total = input.numel();
  PowerSgdBucketState& state = buckets_[bucket.index];
  std::vector<float> input_copy;
  if (options_.use_error_feedback) {
    if (state.error.size() == static_cast<size_t>(total)) {
      for (int64_t i = 0; i < total; ++i) data[i] = data[i] + state.error[static_cast<size_t>(i)];
    } else {
      state.error.assign(static_cast<size_t>(total), 0.0f);  // a zero local error the first time
    }
    input_copy.assign(data, data + total);
  }
  const BucketPlan plan = plan_bucket(bucket);
  prepare_q(state, plan, bucket.index);
  auto matrix = [&](const Compressed& m) { return [&, m](int64_t i, int64_t j) { return data[m.offset + i * m.cols + j]; }; };
  auto transposed = [&](const Compressed& m) { return [&, m](int64_t j, int64_t i) { return data[m.offset + i * m.cols + j]; }; };
  for (const Compressed& m : plan.matrices)  // P = M Q
    matmul(matrix(m), m.rows, m.cols, state.q.data() + m.q_offset, m.rank, state.p.data() + m.p_offset);

  CommHookRun run;
  run.bytes_uncompressed = input.nbytes();
  run.compressed = true;
  auto all_reduce = [&](Tensor& t, const char* name) {
    if (t.numel() == 0) return;  // every rank skips it alike, where PyTorch all-reduces an empty tensor
    run.collectives.push_back(group.all_reduce_sum(t));
    run.collective_names.push_back(name);
    run.bytes_sent += t.nbytes();
  };
  // The uncompressed gradients: one flat SUM all-reduce, then divided by world.
  std::vector<float> flat;
  for (const auto& [offset, numel] : plan.uncompressed) flat.insert(flat.end(), data + offset, data + offset + numel);
  Tensor uncompressed = host_copy(flat);  // [sum of their numel]
  all_reduce(uncompressed, "uncompressed");
  divide_by_world(uncompressed, world);
  const float* reduced = uncompressed.data<float>();
  for (const auto& [offset, numel] : plan.uncompressed) {
    std::copy(reduced, reduced + numel, data + offset);
    reduced += numel;
  }
  Tensor p_memory = host_copy(state.p);  // [sum rows * r]
  all_reduce(p_memory, "P");
  state.p.assign(p_memory.data<float>(), p_memory.data<float>() + plan.p_size);
  for (const Compressed& m : plan.matrices)
    orthogonalize_slice(state.p, m.p_offset, m.rows, m.rank, options_.orthogonalization_epsilon);
  for (const Compressed& m : plan.matrices)  // Q = M^T P
    matmul(transposed(m), m.cols, m.rows, state.p.data() + m.p_offset, m.rank, state.q.data() + m.q_offset);
  Tensor q_memory = host_copy(state.q);  // [sum cols * r]
  all_reduce(q_memory, "Q");
  divide_by_world(q_memory, world);
  state.q.assign(q_memory.data<float>(), q_memory.data<float>() + plan.q_size);
  for (const Compressed& m : plan.matrices) {  // M = P Q^T
    const float* p = state.p.data() + m.p_offset;
    const float* q = state.q.data() + m.q_offset;
    for (int64_t i = 0; i < m.rows; ++i)
      for (int64_t j = 0; j < m.cols; ++j) {
        double sum = 0;
        for (int64_t k = 0; k < m.rank; ++k) sum += static_cast<double>(p[i * m.rank + k]) * q[j * m.rank + k];
        data[m.offset + i * m.cols + j] = static_cast<float>(sum);
      }
  }
  if (options_.use_error_feedback)
    for (int64_t i = 0; i < total; ++i) state.error[static_cast<size_t>(i)] = input_copy[static_cast<size_t>(i)] - data[i];
  if (!options_.warm_start) {
    state.p.clear();
    state.q.clear();
    state.has_memory = false;
  }
  maybe_increase_iter(bucket);
  return run;
}

}  // namespace dpv
