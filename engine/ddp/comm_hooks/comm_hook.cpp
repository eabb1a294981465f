// The hook names and checks, and allreduce_hook and fp16_compress_hook (default_hooks.py).
#include "engine/ddp/comm_hooks/comm_hook.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "engine/ddp/comm_hooks/powersgd.h"
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
  check(p.matrix_approximation_rank <= 2,
        "PowerSGD: matrix_approximation_rank " + std::to_string(p.matrix_approximation_rank) +
            " is not supported: PyTorch orthogonalises ranks above 2 with LAPACK's QR (torch.linalg.qr), which dpv "
            "does not reproduce; use rank 1 or 2 (Gram-Schmidt, as PyTorch)",
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

float round_to_float16(float x) {
  // c10/util/Half.h fp16_ieee_from_fp32_value, then the half's exact float value.
  const float scale_to_inf = 0x1.0p+112f, scale_to_zero = 0x1.0p-110f;
  float base = (std::fabs(x) * scale_to_inf) * scale_to_zero;
  const uint32_t w = std::bit_cast<uint32_t>(x);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = std::bit_cast<float>((bias >> 1) + 0x07800000u) + base;
  const uint32_t bits = std::bit_cast<uint32_t>(base);
  const uint32_t half = (sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : ((bits >> 13) & 0x7C00u) + (bits & 0x0FFFu));
  // Back to float: exponent and mantissa of the half.
  const uint32_t exponent = (half >> 10) & 0x1F, mantissa = half & 0x3FF;
  float value = 0;
  if (exponent == 0x1F)
    value = mantissa ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  else if (exponent == 0)
    value = std::ldexp(static_cast<float>(mantissa), -24);
  else
    value = std::ldexp(static_cast<float>(mantissa | 0x400), static_cast<int>(exponent) - 25);
  return (half & 0x8000) ? -value : value;
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
// Gloo's float16 all-reduce is a ring: the buffer is cut into 2 * world segments of
// ceil(n / (2 * world)) elements, rank c owning segments 2c and 2c + 1, and an element of rank c's
// chunk is summed starting at rank c - 1, down around the ring (c - 2, ..., c + 1), rank c's own
// value last, each partial sum rounded to float16 (gloo::float16's operator+ adds as float32).
// Found by probing torch 1.13's Gloo with 3 and 4 ranks, and checked against it. The group here has no float16 collective:
// every rank's float16 values are all-gathered (in float32 words) and added in that order, which
// gives Gloo's bits; the report is the float16 all-reduce's (2 bytes per element, the time of the
// gather).
class Fp16CompressHook : public CommHook {
 public:
  CommHookKind kind() const override { return CommHookKind::Fp16Compress; }
  CommHookRun run(GradBucket& bucket, ProcessGroup& group) override {
    float* d = host_floats(bucket.buffer);
    const int64_t n = bucket.buffer.numel();
    const int world = group.size();
    Tensor compressed = Tensor::empty({n}, DType::Float32);  // [numel] float16 values
    float* c = compressed.data<float>();
    for (int64_t i = 0; i < n; ++i) c[i] = round_to_float16(round_to_float16(d[i]) / static_cast<float>(world));
    Tensor gathered = Tensor::empty({world * n}, DType::Float32);  // [world, numel] every rank's values
    CollectiveReport report = group.all_gather(compressed, gathered);
    report.op = CollectiveOp::AllReduce;
    report.bytes = static_cast<size_t>(n) * 2;
    finish_report(report);
    const float* all = gathered.data<float>();
    const int64_t chunk = std::max<int64_t>(2, 2 * ((n + 2 * world - 1) / (2 * world)));  // two segments per rank
    for (int64_t i = 0; i < n; ++i) {
      const int owner = static_cast<int>(i / chunk);
      float sum = all[static_cast<int64_t>((owner + world - 1) % world) * n + i];
      for (int k = 2; k <= world; ++k) sum = round_to_float16(sum + all[static_cast<int64_t>((owner + world - k) % world) * n + i]);
      d[i] = sum;
    }
    CommHookRun run;
    run.collectives.push_back(report);
    run.collective_names.push_back("bucket");
    run.bytes_sent = report.bytes;
    run.bytes_uncompressed = bucket.buffer.nbytes();
    run.compressed = true;
    return run;
  }
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
