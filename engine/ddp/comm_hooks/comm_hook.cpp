// The hook names and checks, and allreduce_hook and fp16_compress_hook (default_hooks.py).
#include "engine/ddp/comm_hooks/comm_hook.h"

#include <cmath>
#include <vector>

#include "engine/ddp/comm_hooks/powersgd.h"
#include "engine/float16.h"
#include "engine/error.h"

namespace dpv {

const char* comm_hook_name(CommHookKind kind) {
  switch (kind) {
    case CommHookKind::None: return "none";
    case CommHookKind::AllReduce: return "allreduce_hook";
    case CommHookKind::Fp16Compress: return "fp16_compress_hook";
    case CommHookKind::Bf16Compress: return "bf16_compress_hook";
    case CommHookKind::PowerSgd: return "powerSGD_hook";
  }
  return "none";
}

CommHookKind parse_comm_hook(const std::string& name) {
  if (name == "allreduce") return CommHookKind::AllReduce;
  if (name == "fp16") return CommHookKind::Fp16Compress;
  if (name == "bf16") return CommHookKind::Bf16Compress;
  if (name == "powersgd") return CommHookKind::PowerSgd;
  throw Error("unknown communication hook '" + name + "': choose allreduce, fp16, bf16 or powersgd",
              ErrorClass::ValueError);
}

void check_comm_hook_options(const CommHookOptions& options) {
  if (options.kind != CommHookKind::PowerSgd) return;
  const PowerSgdOptions& p = options.powersgd;
  check(p.matrix_approximation_rank >= 1,
        "PowerSGD: matrix_approximation_rank must be at least 1, got " + std::to_string(p.matrix_approximation_rank),
        ErrorClass::ValueError);
  // PowerSGDState's own check, in its words.
  check(!((p.use_error_feedback || p.warm_start) && p.start_powerSGD_iter <= 1),
        "Expect `start_powerSGD_iter` > 1 if `use_error_feedback` or `warm_start` is enabled, because PowerSGD can "
        "only be applied after the first two iterations in DDP.",
        ErrorClass::ValueError);
  check(p.start_powerSGD_iter >= 0, "PowerSGD: start_powerSGD_iter must not be negative", ErrorClass::ValueError);
  check(std::isfinite(p.min_compression_rate) && p.min_compression_rate >= 0,
        "PowerSGD: min_compression_rate must be a finite number >= 0", ErrorClass::ValueError);
  check(std::isfinite(p.orthogonalization_epsilon) && p.orthogonalization_epsilon >= 0,
        "PowerSGD: orthogonalization_epsilon must be a finite number >= 0", ErrorClass::ValueError);
}

namespace {

float* host_floats(Tensor& t) {
  check(t.dtype() == DType::Float32 && t.on_host_memory(),
        "DDP communication hooks run on float32 gradients in CPU memory here (simulated CPU devices, Gloo ranks)");
  return t.data<float>();
}

// tensor.div_(world_size) on float32: an exact IEEE division per element.
void divide(Tensor& t, int world) {
  float* d = host_floats(t);
  const float w = static_cast<float>(world);
  for (int64_t i = 0; i < t.numel(); ++i) d[i] = d[i] / w;
}

// allreduce_hook: _allreduce_fut divides the bucket in place, then all-reduces it (SUM).
class AllReduceHook : public CommHook {
 public:
  CommHookKind kind() const override { return CommHookKind::AllReduce; }
  CommHookRun run(GradBucket& bucket, ProcessGroup& group) override { return allreduce_mean(bucket, group); }
};

// fp16_compress_hook: buffer.to(float16).div_(world), a float16 all-reduce, copied back.
// The group's float16 all-reduce (ProcessGroup::all_reduce_sum_float16) moves 2 bytes per element
// over Gloo, and gives Gloo's bits on every group; its report is the hook's collective.
class Fp16CompressHook : public CommHook {
 public:
  CommHookKind kind() const override { return CommHookKind::Fp16Compress; }
  CommHookRun run(GradBucket& bucket, ProcessGroup& group) override {
    float* d = host_floats(bucket.buffer);
    const int64_t n = bucket.buffer.numel();
    const float world = static_cast<float>(group.size());
    halves_.resize(static_cast<size_t>(n));  // [numel] float16 bits
    // to(float16), then div_ on the half tensor: the float32 quotient of the half, rounded to half.
    for (int64_t i = 0; i < n; ++i)
      halves_[static_cast<size_t>(i)] = float16_bits_from_float(round_to_float16(d[i]) / world);
    const CollectiveReport report = group.all_reduce_sum_float16(halves_.data(), n);
    for (int64_t i = 0; i < n; ++i) d[i] = float_from_float16_bits(halves_[static_cast<size_t>(i)]);  // copy_ back
    CommHookRun run;
    run.collectives.push_back(report);
    run.collective_names.push_back("bucket");
    run.bytes_sent = report.bytes;
    run.bytes_uncompressed = bucket.buffer.nbytes();
    run.compressed = true;
    return run;
  }

 private:
  std::vector<uint16_t> halves_;  // kept between buckets: no allocation per bucket once the largest was seen
};

}  // namespace

CommHookRun allreduce_mean(GradBucket& bucket, ProcessGroup& group) {
  divide(bucket.buffer, group.size());
  CommHookRun run;
  run.collectives.push_back(group.all_reduce_sum(bucket.buffer));
  run.collective_names.push_back("bucket");
  run.bytes_sent = bucket.buffer.nbytes();
  run.bytes_uncompressed = bucket.buffer.nbytes();
  return run;
}

void divide_by_world(Tensor& t, int world) { divide(t, world); }

std::unique_ptr<CommHook> make_comm_hook(const CommHookOptions& options, const ProcessGroup& group) {
  check_comm_hook_options(options);
  switch (options.kind) {
    case CommHookKind::None: return nullptr;
    case CommHookKind::AllReduce: return std::make_unique<AllReduceHook>();
    case CommHookKind::Fp16Compress: return std::make_unique<Fp16CompressHook>();
    case CommHookKind::Bf16Compress:
      throw Error("bf16_compress_hook needs a bfloat16 all-reduce, which torch 1.13's Gloo does not have (it raises "
                  "\"RuntimeError: Invalid scalar type\"; PyTorch runs this hook only with NCCL 2.9.6+ on GPUs), and "
                  "this group is " + group.backend() + ": use fp16_compress_hook for a 16-bit all-reduce",
                  ErrorClass::RuntimeError);
    case CommHookKind::PowerSgd: return std::make_unique<PowerSgdHook>(options.powersgd);
  }
  return nullptr;
}

}  // namespace dpv
