#include "tests/gpu/user_kernels.cuh"

namespace loom::test::gpu {
namespace {

__global__ void fillKernel(float* data, size_t count, int rank) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    data[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
  }
}

__global__ void countWrongKernel(const float* data, size_t count, int nranks, unsigned long long* wrong) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < count; i += size_t(gridDim.x) * blockDim.x) {
    // sum over r of (r + 1 + i % 7)
    const float expected = static_cast<float>(nranks * (nranks + 1) / 2 + nranks * static_cast<int>(i % 7));
    if (data[i] != expected) atomicAdd(wrong, 1ull);
  }
}

__global__ void holdKernel(const volatile int* go, int* timedOut) {
  for (long long i = 0; i < 10'000'000; ++i) {  // about 20 s of 2 us sleeps
    if (*go != 0) return;
    __nanosleep(2000);
  }
  *timedOut = 1;
}

unsigned blocks(size_t count) { return static_cast<unsigned>(count / 256 + 1 > 1024 ? 1024 : count / 256 + 1); }

}  // namespace

void load() {
  cudaFuncAttributes a{};
  cudaFuncGetAttributes(&a, fillKernel);
  cudaFuncGetAttributes(&a, countWrongKernel);
  cudaFuncGetAttributes(&a, holdKernel);
}

void fill(cudaStream_t stream, float* data, size_t count, int rank) {
  fillKernel<<<blocks(count), 256, 0, stream>>>(data, count, rank);
}

void countWrongSums(cudaStream_t stream, const float* data, size_t count, int nranks, unsigned long long* wrong) {
  countWrongKernel<<<blocks(count), 256, 0, stream>>>(data, count, nranks, wrong);
}

void holdUntil(cudaStream_t stream, const volatile int* go, int* timedOut) { holdKernel<<<1, 1, 0, stream>>>(go, timedOut); }

}  // namespace loom::test::gpu
