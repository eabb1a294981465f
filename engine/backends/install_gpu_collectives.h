#pragma once
// Inside the backends target: DeviceSet::create installs the GPU collectives' factory in the core
// (engine/core_backends.h) before it hands out a CUDA device set. Nothing without CUDA to install.

namespace dpv {

void install_gpu_collectives();

}  // namespace dpv
