#include "base/device/cuda.hpp"

#include "base/error.hpp"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {
namespace {

// The fake device's allocations: start -> bytes.
std::atomic<bool> fakeOn{false};
std::mutex fakeMutex;
std::map<const std::byte*, size_t>& fakeAllocations() {
  static std::map<const std::byte*, size_t> allocations;
  return allocations;
}

bool isFakeDeviceMemory(const void* p) {
  if (!fakeOn.load(std::memory_order_acquire)) return false;
  const auto* b = static_cast<const std::byte*>(p);
  std::lock_guard lock(fakeMutex);
  auto& all = fakeAllocations();
  auto it = all.upper_bound(b);
  if (it == all.begin()) return false;
  --it;
  return b < it->first + it->second;
}

}  // namespace

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
  if (isFakeDeviceMemory(p)) return PointerKind::Device;
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

int currentDevice() {
#ifdef LOOM_HAVE_CUDA
  int device = 0;
  if (fakeDevice() || deviceCount() == 0 || cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return device;
#else
  return 0;
#endif
}

void setCurrentDevice(int device) {
#ifdef LOOM_HAVE_CUDA
  if (fakeDevice() || deviceCount() == 0) return;
  if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)device;
#endif
}

namespace {

// dst <- src on a stream of its own that waits for no other, then waits for it.
void copyNow(void* dst, const void* src, size_t bytes, const char* what) {
  if (fakeDevice() || bytes == 0) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  cudaStream_t stream = nullptr;
  cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  if (stream != nullptr) cudaStreamDestroy(stream);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(loomUnhandledCudaError, std::string(what) + ": " + cudaGetErrorString(e));
  }
#else
  (void)what;
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace

void copyFromDevice(void* host, const void* device, size_t bytes) { copyNow(host, device, bytes, "copying from the device"); }
void copyToDevice(void* device, const void* host, size_t bytes) { copyNow(device, host, bytes, "copying to the device"); }

void useFakeDevice(bool on) { fakeOn.store(on, std::memory_order_release); }
bool fakeDevice() { return fakeOn.load(std::memory_order_acquire); }

void* fakeDeviceAlloc(size_t bytes) {
  void* p = std::malloc(bytes == 0 ? 1 : bytes);
  if (p == nullptr) return nullptr;
  std::lock_guard lock(fakeMutex);
  fakeAllocations()[static_cast<const std::byte*>(p)] = bytes == 0 ? 1 : bytes;
  return p;
}

void fakeDeviceFree(void* p) {
  if (p == nullptr) return;
  {
    std::lock_guard lock(fakeMutex);
    fakeAllocations().erase(static_cast<const std::byte*>(p));
  }
  std::free(p);
}

}  // namespace loom::cuda
