// Kernels that stand for a user's own work on a stream around Loom's calls
// (gpu_test): fill a collective's input, check its output, and hold a stream
// until the host says go.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace loom::test::gpu {

// Loads these kernels now: CUDA loads a kernel at its first launch by
// default, which may wait for the device to be idle, and a stream held by
// holdUntil() is not.
void load();
// data[i] = rank + 1 + i % 7 (floats, exact in any sum of a few ranks).
void fill(cudaStream_t stream, float* data, size_t count, int rank);
// Counts into *wrong the elements of an all-reduce sum of fill()'s inputs over `nranks` ranks that differ.
void countWrongSums(cudaStream_t stream, const float* data, size_t count, int nranks, unsigned long long* wrong);
// Holds the stream until *go (mapped pinned memory) is nonzero, or about 20 s
// have passed (then *timedOut is set): a test never hangs on it.
void holdUntil(cudaStream_t stream, const volatile int* go, int* timedOut);

}  // namespace loom::test::gpu
