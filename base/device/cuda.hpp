// The CUDA devices this process sees. Builds and answers 0 without CUDA, and
// without a driver or device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::cuda {

bool compiledWithCuda();
int deviceCount();
// What the CUDA runtime says a pointer is. Host without CUDA or a device
// (the runtime is not asked then, so host-only processes pay nothing).
enum class PointerKind { Host, Device, HostPinned };
PointerKind pointerKind(const void* p);

// The PCI bus id of this thread's current device, as hwloc spells it
// (base/bus_id.hpp), or "" without CUDA or a device.
std::string currentDeviceBusId();
// Every device this process sees, by ordinal, likewise (empty without CUDA
// or a device): under CUDA_VISIBLE_DEVICES ordinal 0 may be any of the
// machine's GPUs.
std::vector<std::string> visibleDeviceBusIds();

// This thread's current device (0 without CUDA; the fake device's, below,
// while it is on), and making `device` it: a task that runs on another
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
// of its own that waits for no other (memcpy under the fake device).
// Throws loomUnhandledCudaError.
void copyFromDevice(void* host, const void* device, size_t bytes);
// device <- host, likewise.
void copyToDevice(void* device, const void* host, size_t bytes);
// dst <- src between any two of device memory (this device's, or a peer's
// opened through CUDA IPC) and host memory, likewise.
void copyAny(void* dst, const void* src, size_t bytes);
// dst <- src queued on a caller's `stream` (a cudaStream_t) and returning at
// once; null: the legacy default stream, after its work, and waited for (a
// blocking call's). Any mix of host and device memory (cudaMemcpyDefault);
// memcpy at once under the fake device. Throws loomUnhandledCudaError.
void copyOnStream(void* dst, const void* src, size_t bytes, void* stream);

// The tests' fake device, for machines without a GPU (CI): while on, memory
// from fakeDeviceAlloc is "device memory" to pointerKind, and the staged
// path's pinned buffers and copies (staging.hpp) are plain host memory and
// memcpy, so that the host-side logic of the device path runs everywhere.
// Never on in a user's process: only tests call it.
void useFakeDevice(bool on);
bool fakeDevice();
// Each fake allocation is a memfd mapped shared, which peer processes map
// where a GPU's would be opened through CUDA IPC (ipc.hpp), and belongs to
// the thread's current fake GPU.
void* fakeDeviceAlloc(size_t bytes);
void fakeDeviceFree(void* p);
// The fake device shows `count` GPUs (1 until a test says otherwise;
// setCurrentDevice picks one per thread), and `peerAccess` says whether one
// GPU's kernels may read another's memory, as NVLink or a shared PCIe switch
// lets a real GPU's (peer_access.hpp asks). Per process: the ranks of a test
// that runs processes each say the same.
void fakeDeviceGpus(int count, bool peerAccess);
int fakeGpuCount();
bool fakePeerAccess();
struct FakeAllocation {
  int fd = -1;
  uint64_t serial = 0;  // unique per allocation in this process
  size_t bytes = 0;     // the whole allocation
  size_t offset = 0;    // of the pointer from its start
  int gpu = 0;          // the fake GPU it is on
};
// The fake allocation holding p, if the fake device is on and made it.
std::optional<FakeAllocation> fakeAllocationOf(const void* p);
// While on, this process cannot map other processes' fake device memory, as
// CUDA IPC may refuse to (memory/registration.cpp): the tests' failure.
void fakeRefuseIpc(bool on);
bool fakeIpcRefused();

}  // namespace loom::cuda
