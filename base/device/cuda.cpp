#include "base/device/cuda.hpp"

#include "base/backoff.hpp"

namespace loom::cuda {

int deviceCount() { return runtime().deviceCount(); }

bool detail::anyDeviceFirst() {
  const int any = runtime().deviceCount() > 0 ? 1 : 0;
  int unknown = -1;
  // Not over an answer useFakeDevice gave meanwhile: a stale "none" would
  // take its device buffers for host memory.
  if (!anyDevice.compare_exchange_strong(unknown, any, std::memory_order_acq_rel)) return unknown != 0;
  return any != 0;
}

PointerKind pointerKindOnDevice(const void* p) { return runtime().pointerKind(p); }

std::vector<std::string> visibleDeviceBusIds() {
  DeviceRuntime& rt = runtime();
  std::vector<std::string> ids;
  for (int d = 0; d < rt.deviceCount(); ++d) ids.push_back(rt.busId(d));
  return ids;
}

std::string currentDeviceBusId() {
  DeviceRuntime& rt = runtime();
  return rt.deviceCount() == 0 ? "" : rt.busId(rt.currentDevice());
}

int currentDevice() { return runtime().currentDevice(); }
void setCurrentDevice(int device) { runtime().setCurrentDevice(device); }

DeviceScope::DeviceScope(int device) : previous_(currentDevice()), changed_(device != previous_) {
  if (changed_) setCurrentDevice(device);
}

DeviceScope::~DeviceScope() {
  if (changed_) setCurrentDevice(previous_);
}

void copyFromDevice(void* host, const void* device, size_t bytes) { runtime().copyNow(host, device, bytes); }
void copyToDevice(void* device, const void* host, size_t bytes) { runtime().copyNow(device, host, bytes); }
void copyAny(void* dst, const void* src, size_t bytes) { runtime().copyNow(dst, src, bytes); }

void copyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  DeviceRuntime& rt = runtime();
  rt.copy(dst, src, bytes, stream);
  if (stream != nullptr) return;
  pollUntil([&] { return rt.idle(nullptr); });  // a blocking call's: the legacy stream's copy, waited for
}

}  // namespace loom::cuda
