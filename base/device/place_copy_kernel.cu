// A copy whose source another rank's stream published (published_piece.hpp):
// the place is loaded by every thread block when the kernel runs, after the
// stream's wait for the publisher, then the bytes move 16 at a time where
// both ends allow, else one by one.
#include "base/device/place_copy_kernel.hpp"

namespace loom::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr size_t kMaxBlocks = 4096;

__device__ inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

__global__ void copyFromPlaceKernel(char* dst, PlaceView place, uint64_t sequence, bool result,
                                    size_t block, size_t at, size_t bytes) {
  const char* src = placeOnDevice(place, sequence, result, block, at);
  if (src == nullptr || src == dst) return;
  const size_t first = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  size_t done = 0;
  if (aligned16(src) && aligned16(dst)) {
    const size_t vectors = bytes / 16;
    for (size_t v = first; v < vectors; v += stride) {
      reinterpret_cast<uint4*>(dst)[v] = reinterpret_cast<const uint4*>(src)[v];
    }
    done = vectors * 16;
  }
  for (size_t i = done + first; i < bytes; i += stride) dst[i] = src[i];
}

}  // namespace

cudaError_t queueCopyFromPlace(void* dst, PlaceView place, uint64_t sequence, bool result, size_t block,
                               size_t at, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  const size_t work = bytes / 16 == 0 ? bytes : bytes / 16;
  const size_t blocks = (work + kThreads - 1) / kThreads;
  copyFromPlaceKernel<<<static_cast<unsigned>(blocks > kMaxBlocks ? kMaxBlocks : blocks), kThreads, 0, stream>>>(
      static_cast<char*>(dst), place, sequence, result, block, at, bytes);
  return cudaGetLastError();
}

cudaError_t loadCopyFromPlaceKernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, copyFromPlaceKernel);
}

}  // namespace loom::cuda
