#include "base/device/cuda.hpp"

#include <cctype>

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {

bool compiledWithCuda() {
#ifdef LOOM_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

int deviceCount() {
#ifdef LOOM_HAVE_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver or no device: not an error for a host communicator
    return 0;
  }
  return count;
#else
  return 0;
#endif
}

PointerKind pointerKind(const void* p) {
#ifdef LOOM_HAVE_CUDA
  static const bool haveDevice = deviceCount() > 0;
  if (!haveDevice) return PointerKind::Host;
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
    (void)cudaGetLastError();  // memory CUDA never saw
    return PointerKind::Host;
  }
  switch (attributes.type) {
    case cudaMemoryTypeDevice:
    case cudaMemoryTypeManaged: return PointerKind::Device;
    case cudaMemoryTypeHost: return PointerKind::HostPinned;
    default: return PointerKind::Host;
  }
#else
  (void)p;
  return PointerKind::Host;
#endif
}

std::string currentDeviceBusId() {
#ifdef LOOM_HAVE_CUDA
  int device = 0;
  char id[32] = {};
  if (deviceCount() == 0 || cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetPCIBusId(id, sizeof id, device) != cudaSuccess) {
    (void)cudaGetLastError();
    return "";
  }
  std::string out(id);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // CUDA may print the domain with 8 digits; hwloc and Loom use 4.
  const size_t colon = out.find(':');
  if (colon > 4 && colon != std::string::npos) out.erase(0, colon - 4);
  return out;
#else
  return "";
#endif
}

}  // namespace loom::cuda
