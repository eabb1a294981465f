// Built when no CUDA toolkit was found: CUDA device specs fail with a clear engine error.
#include "engine/backend.h"
#include "engine/collectives.h"
#include "engine/device.h"
#include "engine/error.h"

namespace dpv {

namespace {
const char* kNoCuda =
    "CUDA is not available: this build of dpviz has no CUDA backend (no CUDA toolkit was found when it "
    "was configured); use --devices cpu:K for simulated devices";
}

std::unique_ptr<Backend> make_cuda_backend(int, int) { throw Error(kNoCuda); }
std::unique_ptr<Collectives> make_cuda_collectives(std::shared_ptr<DeviceSet>) { throw Error(kNoCuda); }
bool cuda_available() { return false; }
int cuda_device_count() { return 0; }
std::string cuda_device_name(int) { throw Error(kNoCuda); }
std::string cuda_build_info() { return "no CUDA backend (built without the CUDA toolkit)"; }

}  // namespace dpv
