#pragma once
// Conventions shared by every launcher in kernels/*.h:
//  - pointers are device pointers of the named element type, sizes are element counts;
//  - `stream` is a cudaStream_t passed as void*, so these headers need no CUDA types;
//  - a launcher returns 0 when the launch was accepted, else the cudaError_t value as an int
//    (the engine's DPV_CUDA_CHECK turns it into a dpv::Error naming the launcher);
//  - reductions accumulate in double for float32 and float64 alike, in two levels (each thread's
//    strided partial sum, then a fixed tree over the block), so long channels (large N*S) lose no
//    precision. The CPU backend accumulates BatchNorm's sums in double too (the results agree to the
//    last bits the output dtype holds, up to the order of the additions) but sum_channels (the bias
//    gradient) in the tensor's own dtype, over lanes: for float32 the GPU's is the more exact sum,
//    and the two agree to float rounding, not bit for bit.
#include <cstdint>

namespace dpv::kernels {

// The most ranks bn_gather_stats takes (their counts travel by value in the kernel parameters).
constexpr int64_t kMaxGatherRanks = 256;

}  // namespace dpv::kernels
