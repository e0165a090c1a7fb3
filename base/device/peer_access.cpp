#include "base/device/peer_access.hpp"

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "base/device/cuda.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {
namespace {

// The fake GPU g's id: odd, as no real GPU's is (theirs keep bit 1), and 1
// for GPU 0.
uint64_t fakeIdOf(int gpu) { return 1 + 4 * static_cast<uint64_t>(gpu); }

#ifdef LOOM_HAVE_CUDA
// Every visible device's id, by ordinal: never 0 (unknown) or odd (the fake
// device's).
const std::vector<uint64_t>& visibleIds() {
  static const std::vector<uint64_t> ids = [] {
    std::vector<uint64_t> out;
    for (const std::string& busId : visibleDeviceBusIds()) {
      out.push_back(busId.empty() ? 0 : (std::hash<std::string>{}(busId) | 2) & ~uint64_t{1});
    }
    return out;
  }();
  return ids;
}

// Whether `from`'s context may access `to`'s memory, enabling it the first
// time. A context's peer access lasts as long as the context, the process's
// primary one, so the answer is kept.
bool peerEnabled(int from, int to) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, bool> known;
  std::lock_guard lock(mutex);
  const auto [it, fresh] = known.try_emplace({from, to}, false);
  if (!fresh) return it->second;
  int can = 0;
  if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) {
    (void)cudaGetLastError();
    return false;
  }
  // Enabled from the current device's context, which is `from`'s.
  const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
  if (e != cudaSuccess) (void)cudaGetLastError();  // already enabled (by the user, say) is enabled
  it->second = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
  return it->second;
}
#endif

}  // namespace

uint64_t deviceIdOf(const void* p) {
  if (fakeDevice()) {
    const auto fake = fakeAllocationOf(p);
    return fake ? fakeIdOf(fake->gpu) : 0;
  }
#ifdef LOOM_HAVE_CUDA
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  const auto& ids = visibleIds();
  const auto d = static_cast<size_t>(attributes.device);
  return attributes.device >= 0 && d < ids.size() ? ids[d] : 0;
#else
  (void)p;
  return 0;
#endif
}

bool canReachDevice(uint64_t deviceId) {
  if (deviceId == 0) return false;
  if (fakeDevice()) {
    for (int g = 0; g < fakeGpuCount(); ++g) {
      if (fakeIdOf(g) == deviceId) return g == currentDevice() || fakePeerAccess();
    }
    return false;
  }
#ifdef LOOM_HAVE_CUDA
  const auto& ids = visibleIds();
  const int current = currentDevice();
  for (size_t d = 0; d < ids.size(); ++d) {
    if (ids[d] != deviceId) continue;
    return static_cast<int>(d) == current || peerEnabled(current, static_cast<int>(d));
  }
#endif
  return false;
}

}  // namespace loom::cuda
