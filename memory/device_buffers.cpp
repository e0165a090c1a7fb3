#include "memory/device_buffers.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "base/device/cuda.hpp"
#include "base/device/device_buffer.hpp"
#include "base/error.hpp"

namespace loom::memory {
namespace {

struct DeviceRegistry {
  std::mutex mutex;
  std::map<uintptr_t, std::unique_ptr<cuda::DeviceBuffer>> byStart;
};

DeviceRegistry& deviceRegistry() {
  static DeviceRegistry r;
  return r;
}

}  // namespace

void* allocateDevice(size_t bytes) {
  if (bytes == 0) throw Error(loomInvalidArgument, "size is 0");
  if (cuda::deviceCount() == 0) {
    throw Error(loomInvalidUsage, cuda::compiledWithCuda() ? "no CUDA device is visible to this process"
                                                           : "no CUDA device: this build of Loom has no CUDA");
  }
  auto buffer = std::make_unique<cuda::DeviceBuffer>(bytes);
  void* p = buffer->data();
  DeviceRegistry& r = deviceRegistry();
  std::lock_guard lock(r.mutex);
  r.byStart.emplace(reinterpret_cast<uintptr_t>(p), std::move(buffer));
  return p;
}

bool freeDevice(void* p) {
  std::unique_ptr<cuda::DeviceBuffer> buffer;  // freed outside the lock: cudaFree may wait for the device
  DeviceRegistry& r = deviceRegistry();
  {
    std::lock_guard lock(r.mutex);
    auto it = r.byStart.find(reinterpret_cast<uintptr_t>(p));
    if (it == r.byStart.end()) return false;
    buffer = std::move(it->second);
    r.byStart.erase(it);
  }
  return true;
}

}  // namespace loom::memory
