#pragma once
// DPV_HD marks the per-element functions of kernels/math: `__host__ __device__` under nvcc, so the
// kernels call them, and nothing under a plain C++ compiler, so the CPU backend and the CPU tests
// (tests/kernel_math) call the very same code. These headers hold no CUDA types and include only
// the standard library: the engine core includes them without seeing CUDA.
#if defined(__CUDACC__)
#define DPV_HD __host__ __device__
#else
#define DPV_HD
#endif
