#include "memory/memory_kind.hpp"

#include "base/device/cuda.hpp"

namespace loom::memory {

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::Host: return "host";
    case MemoryKind::HostShared: return "host-shared";
    case MemoryKind::CudaDevice: return "cuda-device";
    case MemoryKind::CudaHostPinned: return "cuda-host-pinned";
  }
  return "unknown";
}

MemoryKind cudaKindOf(const void* p) {
  switch (cuda::pointerKind(p)) {
    case cuda::PointerKind::Device: return MemoryKind::CudaDevice;
    case cuda::PointerKind::HostPinned: return MemoryKind::CudaHostPinned;
    case cuda::PointerKind::Host: break;
  }
  return MemoryKind::Host;
}

}  // namespace loom::memory
