// The gate's kernel, queued from stream_gate.cpp (CUDA builds only).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace loom::cuda {

// Queues on `stream` a wait until *released (pinned host memory the device
// maps) reaches `ticket`.
cudaError_t queueHold(cudaStream_t stream, const uint64_t* released, uint64_t ticket);
// Loads the kernel now (CUDA loads kernels lazily, at their first launch, by default).
cudaError_t loadHoldKernel();

}  // namespace loom::cuda
