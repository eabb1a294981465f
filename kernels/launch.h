#pragma once
// Conventions shared by every launcher in kernels/*.h:
//  - pointers are device pointers of the named element type, sizes are element counts;
//  - `stream` is a cudaStream_t passed as void*, so these headers need no CUDA types;
//  - a launcher returns 0 when the launch was accepted, else the cudaError_t value as an int
//    (the engine's DPV_CUDA_CHECK turns it into a dpv::Error naming the launcher);
//  - reductions accumulate in double for float32 and float64 alike, so results match the CPU
//    backend (which accumulates in double) to the last bits the output dtype can hold.
#include <cstdint>

namespace dpv::kernels {

// The most ranks bn_gather_stats takes (their counts travel by value in the kernel parameters).
constexpr int64_t kMaxGatherRanks = 256;

}  // namespace dpv::kernels
