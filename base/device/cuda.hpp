// The CUDA devices this process sees, and synchronous copies: the questions
// most callers ask, answered by the process's DeviceRuntime (runtime.hpp).
// Builds and answers 0 without CUDA, and without a driver or device.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/device/runtime.hpp"

namespace loom::cuda {

bool compiledWithCuda();
int deviceCount();

namespace detail {
inline constinit std::atomic<int> anyDevice{-1};  // -1: not asked yet; 0: none; 1: some
bool anyDeviceFirst();
}  // namespace detail
// Whether the process's runtime has a device, so that a buffer may be device
// memory: asked of the runtime once, then one load, as every call asks it of
// each of its buffers. The fake device's switch (useFakeDevice) sets it.
inline bool anyDevice() {
  const int any = detail::anyDevice.load(std::memory_order_acquire);
  if (any < 0) [[unlikely]] return detail::anyDeviceFirst();
  return any != 0;
}

// What the runtime says a pointer is. Host without CUDA or a device (the
// runtime is not asked then, so host-only processes pay one load).
PointerKind pointerKindOnDevice(const void* p);
inline PointerKind pointerKind(const void* p) { return anyDevice() ? pointerKindOnDevice(p) : PointerKind::Host; }

// The PCI bus id of this thread's current device, as hwloc spells it
// (base/bus_id.hpp), or "" without CUDA or a device.
std::string currentDeviceBusId();
// Every device this process sees, by ordinal, likewise (empty without CUDA
// or a device): under CUDA_VISIBLE_DEVICES ordinal 0 may be any of the
// machine's GPUs.
std::vector<std::string> visibleDeviceBusIds();

// This thread's current device (0 without CUDA), and making `device` it: a task that runs on another
// thread for a caller uses the caller's.
int currentDevice();
void setCurrentDevice(int device);
// Makes `device` this thread's current device for the scope's life, then
// the one before it again.
class DeviceScope {
 public:
  explicit DeviceScope(int device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_;
  bool changed_;
};

// host <- device, `bytes` bytes, returning when they are there; on a stream
// of its own that waits for no other.
// Throws loomUnhandledCudaError.
void copyFromDevice(void* host, const void* device, size_t bytes);
// device <- host, likewise.
void copyToDevice(void* device, const void* host, size_t bytes);
// dst <- src between any two of device memory (this device's, or a peer's
// opened through CUDA IPC) and host memory, likewise.
void copyAny(void* dst, const void* src, size_t bytes);
// dst <- src queued on a caller's `stream` (a cudaStream_t) and returning at
// once; null: the legacy default stream, after its work, and waited for (a
// blocking call's). Any mix of host and device memory (cudaMemcpyDefault).
// Throws loomUnhandledCudaError.
void copyOnStream(void* dst, const void* src, size_t bytes, void* stream);

}  // namespace loom::cuda
