// Built when no CUDA toolkit was found: CUDA device specs fail with a clear engine error.
#include "engine/backend.h"
#include "engine/error.h"

namespace dpv {

std::unique_ptr<Backend> make_cuda_backend(int, int) {
  throw Error("CUDA is not available: this build of dpviz has no CUDA backend (no CUDA toolkit was found "
              "when it was configured); use --devices cpu:K for simulated devices");
}

bool cuda_available() { return false; }

}  // namespace dpv
