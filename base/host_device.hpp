// LOOM_HOST_DEVICE marks a function that host code and CUDA kernels share
// (one definition, so both compute the same bits): __host__ __device__ under
// nvcc, nothing elsewhere.
#pragma once

#ifdef __CUDACC__
#define LOOM_HOST_DEVICE __host__ __device__
#else
#define LOOM_HOST_DEVICE
#endif
