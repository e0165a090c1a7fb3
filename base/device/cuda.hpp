// The CUDA devices this process sees. Builds and answers 0 without CUDA, and
// without a driver or device.
#pragma once

#include <string>

namespace loom::cuda {

bool compiledWithCuda();
int deviceCount();
// What the CUDA runtime says a pointer is. Host without CUDA or a device
// (the runtime is not asked then, so host-only processes pay nothing).
enum class PointerKind { Host, Device, HostPinned };
PointerKind pointerKind(const void* p);

// The PCI bus id of this thread's current device ("0000:1a:00.0", lower
// case), or "" without CUDA or a device.
std::string currentDeviceBusId();

}  // namespace loom::cuda
