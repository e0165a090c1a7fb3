#include "base/device/peer_access.hpp"

#include "base/device/runtime.hpp"

namespace loom::cuda {

uint64_t deviceIdOf(const void* p) {
  DeviceRuntime& rt = runtime();
  if (rt.deviceCount() == 0) return 0;
  const int device = rt.deviceOf(p);
  return device < 0 ? 0 : rt.deviceId(device);
}

bool canReachDevice(uint64_t deviceId) {
  if (deviceId == 0) return false;
  DeviceRuntime& rt = runtime();
  const int current = rt.currentDevice();
  for (int d = 0; d < rt.deviceCount(); ++d) {
    if (rt.deviceId(d) == deviceId) return d == current || rt.enablePeerAccess(current, d);
  }
  return false;
}

bool canReadInPlace(uint64_t deviceId, bool pooled) {
  if (!pooled) return canReachDevice(deviceId);
  DeviceRuntime& rt = runtime();
  return deviceId != 0 && rt.deviceCount() > 0 && rt.deviceId(rt.currentDevice()) == deviceId;
}

}  // namespace loom::cuda
