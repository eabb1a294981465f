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

// One gradient viewed as the matrix [rows, cols] (tensor.view(tensor.shape[0], -1)) at `offset`
// in the bucket, with its slices of the bucket's P and Q memory.
struct Compressed {
  int64_t offset = 0, rows = 0, cols = 0, rank = 0;
  int64_t p_offset = 0, q_offset = 0;
};

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

}  // namespace

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

  // Which gradients to compress, grouped by matrix shape in first-appearance order
  // (shape_to_tensors), and which to all-reduce as they are.
  std::vector<std::pair<std::pair<int64_t, int64_t>, std::vector<Compressed>>> by_shape;
  std::vector<std::pair<int64_t, int64_t>> uncompressed;  // (offset, numel)
  int64_t p_size = 0, q_size = 0;
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
      p_size += rows * rank;
      q_size += cols * rank;
      numel_after_ += compressed_size;
    } else {
      uncompressed.emplace_back(bucket.offsets[t], numel);
      numel_after_ += numel;
    }
  }
  std::vector<Compressed> matrices;
  for (const auto& [shape, list] : by_shape) matrices.insert(matrices.end(), list.begin(), list.end());
  int64_t p_at = 0, q_at = 0;
  for (Compressed& m : matrices) {
    m.p_offset = p_at;
    m.q_offset = q_at;
    p_at += m.rows * m.rank;
    q_at += m.cols * m.rank;
  }

  const bool randomize = !options_.warm_start || !state.has_memory;
  if (randomize) {
    state.has_memory = true;
    state.p.assign(static_cast<size_t>(p_size), 0.0f);
    state.q.assign(static_cast<size_t>(q_size), 0.0f);
  }
  check(state.p.size() == static_cast<size_t>(p_size) && state.q.size() == static_cast<size_t>(q_size),
        "PowerSGD: bucket " + std::to_string(bucket.index) + " changed its parameters since its P and Q were made");
  std::vector<float> scratch;
  auto orthogonalize_slice = [&](std::vector<float>& memory, int64_t offset, int64_t rows, int64_t rank) {
    scratch.assign(memory.begin() + offset, memory.begin() + offset + rows * rank);
    orthogonalize_gram_schmidt(scratch, rows, rank, options_.orthogonalization_epsilon);
    std::copy(scratch.begin(), scratch.end(), memory.begin() + offset);
  };
  if (randomize) {
    // torch.manual_seed(state.rng.randint(1_000_000_000)), then torch.randn for each Q in turn.
    TorchCpuGenerator generator(static_cast<uint64_t>(numpy_legacy_randint(rng_, 1'000'000'000)));
    for (const Compressed& m : matrices) {
      const std::vector<float> values = generator.randn_float(m.cols * m.rank);
      std::copy(values.begin(), values.end(), state.q.begin() + m.q_offset);
      orthogonalize_slice(state.q, m.q_offset, m.cols, m.rank);
    }
  } else {
    for (const Compressed& m : matrices) orthogonalize_slice(state.q, m.q_offset, m.cols, m.rank);
  }
  for (const Compressed& m : matrices)  // P = M Q
    matmul([&](int64_t i, int64_t j) { return data[m.offset + i * m.cols + j]; }, m.rows, m.cols,
           state.q.data() + m.q_offset, m.rank, state.p.data() + m.p_offset);

  CommHookRun run;
  run.bytes_uncompressed = input.nbytes();
  run.compressed = true;
  auto all_reduce = [&](Tensor& t, const char* name) {
    if (t.numel() == 0) return;  // as for the uncompressed ones below
    run.collectives.push_back(group.all_reduce_sum(t));
    run.collective_names.push_back(name);
    run.bytes_sent += t.nbytes();
  };
  // The uncompressed gradients: one flat SUM all-reduce (skipped when there are none: every rank
  // skips it alike, where PyTorch all-reduces an empty tensor).
  if (!uncompressed.empty()) {
    std::vector<float> flat;
    for (const auto& [offset, numel] : uncompressed) flat.insert(flat.end(), data + offset, data + offset + numel);
    Tensor memory = host_copy(flat);  // [sum of their numel]
    all_reduce(memory, "uncompressed");
    divide_by_world(memory, world);
    const float* reduced = memory.data<float>();
    for (const auto& [offset, numel] : uncompressed) {
      std::copy(reduced, reduced + numel, data + offset);
      reduced += numel;
    }
  }
  Tensor p_memory = host_copy(state.p);  // [sum rows * r]
  all_reduce(p_memory, "P");
  state.p.assign(p_memory.data<float>(), p_memory.data<float>() + p_size);
  for (const Compressed& m : matrices) orthogonalize_slice(state.p, m.p_offset, m.rows, m.rank);
  for (const Compressed& m : matrices)  // Q = M^T P
    matmul([&](int64_t j, int64_t i) { return data[m.offset + i * m.cols + j]; }, m.cols, m.rows,
           state.p.data() + m.p_offset, m.rank, state.q.data() + m.q_offset);
  Tensor q_memory = host_copy(state.q);  // [sum cols * r]
  all_reduce(q_memory, "Q");
  divide_by_world(q_memory, world);
  state.q.assign(q_memory.data<float>(), q_memory.data<float>() + q_size);
  for (const Compressed& m : matrices) {  // M = P Q^T
    std::vector<float> q_transposed(static_cast<size_t>(m.rank * m.cols));  // [r, cols]
    for (int64_t j = 0; j < m.cols; ++j)
      for (int64_t k = 0; k < m.rank; ++k) q_transposed[static_cast<size_t>(k * m.cols + j)] = state.q[static_cast<size_t>(m.q_offset + j * m.rank + k)];
    const float* p = state.p.data() + m.p_offset;
    matmul([&](int64_t i, int64_t k) { return p[i * m.rank + k]; }, m.rows, m.rank, q_transposed.data(), m.cols,
           data + m.offset);
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
