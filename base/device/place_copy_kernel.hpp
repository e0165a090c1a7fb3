// The kernel of DeviceRuntime::copyFromPlace (runtime.hpp), queued from
// cuda_runtime.cpp (CUDA builds only).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "base/device/published_piece.hpp"

namespace loom::cuda {

cudaError_t queueCopyFromPlace(void* dst, PlaceView place, uint64_t sequence, bool result, size_t block,
                               size_t at, size_t bytes, cudaStream_t stream);
// Loads the kernel now (CUDA loads kernels lazily, at their first launch, by default).
cudaError_t loadCopyFromPlaceKernel();

}  // namespace loom::cuda
