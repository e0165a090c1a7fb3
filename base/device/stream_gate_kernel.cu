// The gate's one kernel (stream_gate.hpp): a single thread that waits until
// the host raises the counter to its ticket. It sleeps between reads, so the
// reads it makes over the bus stay few and the SM it holds is nearly idle.
#include "base/device/stream_gate_kernel.hpp"

namespace loom::cuda {
namespace {

__global__ void holdUntil(const volatile unsigned long long* released, unsigned long long ticket) {
  while (*released < ticket) __nanosleep(2000);
}

}  // namespace

cudaError_t loadHoldKernel() {
  cudaFuncAttributes attributes{};
  return cudaFuncGetAttributes(&attributes, holdUntil);
}

cudaError_t queueHold(cudaStream_t stream, const uint64_t* released, uint64_t ticket) {
  holdUntil<<<1, 1, 0, stream>>>(reinterpret_cast<const volatile unsigned long long*>(released), ticket);
  return cudaGetLastError();
}

}  // namespace loom::cuda
