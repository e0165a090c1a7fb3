// What kind of memory a buffer is. Every buffer the data path touches has
// one: the API finds it once per call, algorithms and transports may only
// touch what they can reach (today's host executor: host memory of either
// kind), and a peer reaches it through the handle its kind registers
// (registration.hpp).
#pragma once

#include <cstddef>
#include <cstdint>

#include "memory/shared_buffers.hpp"

namespace loom::memory {

enum class MemoryKind : uint8_t {
  Host = 0,            // ordinary host memory of this process
  HostShared = 1,      // loomMemAlloc's: host memory peers on the node may map
  CudaDevice = 2,      // a CUDA device's memory
  CudaHostPinned = 3,  // host memory pinned and mapped by CUDA
};

// "host", "host-shared", "cuda-device", "cuda-host-pinned".
const char* memoryKindName(MemoryKind kind);

// The same for a pointer loomMemAlloc did not give: a CUDA kind, or Host.
MemoryKind cudaKindOf(const void* p);
// The kind of [p, p + bytes): HostShared when loomMemAlloc gave the whole
// range, a CUDA kind when the CUDA runtime knows the pointer (builds with
// CUDA and a device only), else Host. Inline, as every call asks it of each
// buffer: where loomMemAlloc made nothing, there is nothing to search.
inline MemoryKind kindOf(const void* p, size_t bytes) {
  if (p == nullptr || bytes == 0) return MemoryKind::Host;
  if (anySharedAllocations() && findAllocation(p, bytes)) return MemoryKind::HostShared;
  return cudaKindOf(p);
}

// Whether a CPU thread may read and write it directly.
inline bool hostReachable(MemoryKind kind) {
  return kind == MemoryKind::Host || kind == MemoryKind::HostShared || kind == MemoryKind::CudaHostPinned;
}

}  // namespace loom::memory
