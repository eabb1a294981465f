// The core's side of the backend hook: make_collectives picks host threads or the GPU factory that
// engine/backends installed when it made the CUDA device set.
#include "engine/core_backends.h"

#include <atomic>

#include "engine/backend.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv {

namespace {

// Set once by the backends target, read by every DataParallel that is built: an atomic so a
// trainer made on another thread sees it without a lock.
std::atomic<GpuCollectivesFactory> g_gpu_collectives{nullptr};

}  // namespace

void install_gpu_collectives_factory(GpuCollectivesFactory factory) { g_gpu_collectives.store(factory); }

std::unique_ptr<Collectives> make_collectives(std::shared_ptr<DeviceSet> devices) {
  if (devices->size() > 0 && (*devices)[0].kind() == DeviceKind::Cuda) {
    GpuCollectivesFactory factory = g_gpu_collectives.load();
    // Only DeviceSet::create (engine/backends) makes CUDA sets, and it installs the factory first.
    check(factory != nullptr, "no GPU collectives are installed for the CUDA device set '" + devices->spec().text + "'");
    return factory(std::move(devices));
  }
  return make_host_collectives(std::move(devices));
}

CpuGemm::CpuGemm() : backend_(make_cpu_backend()) {}
CpuGemm::~CpuGemm() = default;

void CpuGemm::run(bool trans_a, bool trans_b, int64_t rows, int64_t cols, int64_t inner, double alpha, const Tensor& a,
                  const Tensor& b, double beta, Tensor& c) {
  backend_->gemm(trans_a, trans_b, rows, cols, inner, alpha, a, b, beta, c);
}

}  // namespace dpv
