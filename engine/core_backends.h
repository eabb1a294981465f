#pragma once
// What the engine core makes by itself: the CPU backend, the host-thread collectives, and the
// collectives of any device set. The core never links the CUDA target: a CUDA device set is made
// by the backends target (engine/backends, dpv_backends, see engine/backend_registry.h), which
// installs the GPU collectives' factory here before it hands out such a set.
#include <compare>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace dpv {

class Backend;
class Collectives;
class DeviceSet;
class Tensor;

std::unique_ptr<Backend> make_cpu_backend();

// The CPU backend's float32 GEMM library per product shape (engine/cpu/gemm_choice.h): timed once per
// shape, the faster of OpenBLAS and oneDNN, unless DPV_GEMM pins one. float64 is always OpenBLAS.
enum class CpuGemmLibrary { OpenBlas, Onednn };
// DPV_GEMM: auto (unset or empty), openblas or onednn.
enum class CpuGemmPin { Auto, OpenBlas, Onednn };

// One float32 product as the backend's gemm is called: c[rows, cols] = op(a) @ op(b) (+ c unless beta is 0).
struct CpuGemmShape {
  bool trans_a = false, trans_b = false;
  int64_t rows = 0, cols = 0, inner = 0;
  bool beta_zero = true;
  auto operator<=>(const CpuGemmShape&) const = default;
};
struct CpuGemmChoice {
  CpuGemmShape shape;
  CpuGemmLibrary library = CpuGemmLibrary::OpenBlas;
  bool operator==(const CpuGemmChoice&) const = default;
};

// Whether this build has oneDNN: without it every float32 product runs with OpenBLAS.
bool cpu_has_onednn();
// "oneDNN sgemm", "OpenBLAS sgemm".
std::string cpu_gemm_library_name(CpuGemmLibrary library);
// The library the CPU backend multiplies a product of `shape` with, as it does now: "OpenBLAS dgemm"
// (float64), the pinned or chosen library, or "not timed yet" for a float32 shape no gemm has run.
std::string cpu_gemm_library(bool float64, const CpuGemmShape& shape);
// DPV_GEMM, read once per process; a value other than auto, openblas or onednn (or onednn in a build
// without oneDNN) is a dpv::Error that says what to set.
CpuGemmPin cpu_gemm_pin();

// This process's choices so far, sorted by shape: a checkpoint records them, and a resumed run sets
// them back before its first step so it multiplies every shape as the interrupted run did.
std::vector<CpuGemmChoice> cpu_gemm_choices();
void set_cpu_gemm_choices(const std::vector<CpuGemmChoice>& choices);
// "NT:256x1024x784:0=onednn;TN:1024x784x256:0=openblas" (op(a) op(b), rows x cols x inner, beta 0 or 1),
// and back; a malformed text is a dpv::Error naming `source`.
std::string cpu_gemm_choices_text(const std::vector<CpuGemmChoice>& choices);
std::vector<CpuGemmChoice> parse_cpu_gemm_choices(const std::string& text, const std::string& source);

// How ranks of a launched job agree on each shape's library (rank 0's choice wins): called once per
// new shape with the function that times it here; returns the library every rank uses.
class CpuGemmSharing {
 public:
  virtual ~CpuGemmSharing() = default;
  virtual CpuGemmLibrary agree(const CpuGemmShape& shape, const std::function<CpuGemmLibrary()>& time_here) = 0;
};
// Installs the process's sharing (nullptr: none, each process times its own). The caller keeps it
// alive until it installs nullptr again.
void install_cpu_gemm_sharing(CpuGemmSharing* sharing);

// Rank 0's choice wins, through a key-value store every rank reaches (a launched job's c10d store):
// rank 0 times a new shape and publishes its library under "dpv/gemm/<shape>"; every other rank
// waits for that key instead of timing (the job's ranks run the same products in the same order).
class RankZeroGemmSharing final : public CpuGemmSharing {
 public:
  using Publish = std::function<void(const std::string& key, const std::string& value)>;
  using WaitFor = std::function<std::string(const std::string& key)>;  // waits, bounded by the store's timeout
  RankZeroGemmSharing(int rank, Publish publish, WaitFor wait_for);
  CpuGemmLibrary agree(const CpuGemmShape& shape, const std::function<CpuGemmLibrary()>& time_here) override;

 private:
  int rank_;
  Publish publish_;
  WaitFor wait_for_;
};

// The CPU backend's GEMM on its own, for timing it against the BLAS libraries (`dpv bench`'s
// reference): c[rows,cols] = alpha * op(a) @ op(b) + beta * c, as a Linear layer calls it, on host
// tensors, without handing a front end the whole Backend interface.
class CpuGemm {
 public:
  CpuGemm();
  ~CpuGemm();
  CpuGemm(const CpuGemm&) = delete;
  CpuGemm& operator=(const CpuGemm&) = delete;
  void run(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a,
           const Tensor& b, double beta, Tensor& c);
  // The same product with `library` (float32 only), whatever the choice for its shape: each
  // library alone, for the reference "best of both per shape".
  void run_with(CpuGemmLibrary library, bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner,
                       const Tensor& a, const Tensor& b, Tensor& c);

 private:
  std::unique_ptr<Backend> backend_;
};

// The collectives of a device set: host threads for CPU devices; NCCL or peer copies for GPUs
// (through the installed GPU factory).
std::unique_ptr<Collectives> make_host_collectives(std::shared_ptr<DeviceSet> devices);
std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices);

// The hook through which the core reaches the GPU collectives without depending on the target that
// has them. Installing it again replaces the factory (the backends target always installs the same).
using GpuCollectivesFactory = std::unique_ptr<Collectives> (*)(std::shared_ptr<DeviceSet> devices);
void install_gpu_collectives_factory(GpuCollectivesFactory factory);

}  // namespace dpv
