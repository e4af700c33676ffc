// AD_HD: a function of the execution contract, compiled for the host and, under nvcc, for
// the device as well. Every header of kernels/contract/ marks its functions with it, so
// the CPU emulation (lib/exec) and the CUDA kernels (kernels/) run the same definitions.
#pragma once

#if defined(__CUDACC__)
#define AD_HD __host__ __device__ __forceinline__
#else
#define AD_HD inline
#endif
