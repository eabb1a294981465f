// The backend registry. DPV_HAVE_CUDA is defined for this one file when the CUDA target is linked
// in; the engine core is the same in both builds and reaches the GPU collectives only through the
// hook of engine/core_backends.h, which install_gpu_collectives fills.
#include "engine/backend_registry.h"
#include "engine/backends/install_gpu_collectives.h"

#include "engine/backend.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/process_groups/process_group.h"
#include "engine/error.h"

#ifdef DPV_HAVE_CUDA
#include "engine/cuda/cuda_entry.h"
#endif

namespace dpv {

namespace {

[[maybe_unused]] const char* kNoCuda =
    "CUDA is not available: this build of dpviz has no CUDA backend (no CUDA toolkit was found when it "
    "was configured); use the device spec cpu:K for simulated devices";

}  // namespace

#ifdef DPV_HAVE_CUDA

bool cuda_compiled_in() { return true; }
bool cuda_available() { return cuda_entry::available(); }
int cuda_device_count() { return cuda_entry::device_count(); }
std::string cuda_device_name(int ordinal) { return cuda_entry::device_name(ordinal); }
std::string cuda_build_info() { return cuda_entry::build_info(); }
std::unique_ptr<Backend> make_cuda_backend(int ordinal, int virtual_slot) {
  return cuda_entry::make_backend(ordinal, virtual_slot);
}
void install_gpu_collectives() { install_gpu_collectives_factory(&cuda_entry::make_collectives); }
std::unique_ptr<ProcessGroup> make_nccl_process_group(int rank, int world_size, int local_rank, int64_t timeout_ms,
                                                      StoreSet store_set, StoreGet store_get) {
  return cuda_entry::make_nccl_process_group(rank, world_size, local_rank, timeout_ms, std::move(store_set),
                                             std::move(store_get));
}

#else

bool cuda_compiled_in() { return false; }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { throw Error(kNoCuda); }
std::string cuda_build_info() { return "no CUDA backend (built without the CUDA toolkit)"; }
std::unique_ptr<Backend> make_cuda_backend(int, int) { throw Error(kNoCuda); }
void install_gpu_collectives() {}  // no CUDA device set can be made: nothing to install
std::unique_ptr<ProcessGroup> make_nccl_process_group(int, int, int, int64_t, StoreSet, StoreGet) {
  throw Error("the nccl backend needs GPUs, but this build of dpviz has no CUDA backend (no CUDA toolkit was found "
              "when it was configured); use the gloo backend for CPU ranks (DPV_BACKEND=gloo)")
      .about_settings({"DPV_BACKEND"});
}

#endif

}  // namespace dpv
