// Device memory that Loom allocates for a program (loomMemAllocDevice, and
// the NCCL shim's ncclMemAlloc): cudaMalloc on the calling thread's current
// device, the fake device's memory under the tests, kept here until
// loomMemFree. The collectives treat it as any other device memory (its
// CUDA IPC handle lets the node's ranks read it in place).
#pragma once

#include <cstddef>

namespace loom::memory {

// Throws loomInvalidArgument for 0 bytes, loomInvalidUsage where no CUDA
// device is visible, loomUnhandledCudaError when the device has no room.
void* allocateDevice(size_t bytes);
// Frees p if allocateDevice returned it; false (nothing done) otherwise.
bool freeDevice(void* p);

}  // namespace loom::memory
