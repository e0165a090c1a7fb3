#include "base/device/cuda.hpp"

#include "base/bus_id.hpp"
#include "base/error.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace loom::cuda {
namespace {

// The fake device's allocations, by start: each a memfd mapped shared, so
// that peer processes can map it as CUDA IPC would let them (ipc.hpp).
struct FakeBlock {
  size_t bytes;
  int fd;
  uint64_t serial;
  int gpu;
};
std::atomic<bool> fakeOn{false};
std::atomic<int> fakeGpus{1};
std::atomic<bool> fakePeers{true};
thread_local int fakeCurrent = 0;
std::mutex fakeMutex;
uint64_t fakeSerials = 0;
std::map<const std::byte*, FakeBlock>& fakeAllocations() {
  static std::map<const std::byte*, FakeBlock> allocations;
  return allocations;
}

// The allocation holding p, under fakeMutex.
std::map<const std::byte*, FakeBlock>::const_iterator findFake(const void* p) {
  const auto* b = static_cast<const std::byte*>(p);
  auto& all = fakeAllocations();
  auto it = all.upper_bound(b);
  if (it == all.begin()) return all.end();
  --it;
  return b < it->first + it->second.bytes ? it : all.end();
}

bool isFakeDeviceMemory(const void* p) {
  if (!fakeOn.load(std::memory_order_acquire)) return false;
  std::lock_guard lock(fakeMutex);
  return findFake(p) != fakeAllocations().end();
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
  // Asked once: CUDA reads CUDA_VISIBLE_DEVICES when it starts, so the count
  // is the process's for its life, and calls ask for the current device often.
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();  // no driver or no device: not an error for a host communicator
      return 0;
    }
    return n;
  }();
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

std::vector<std::string> visibleDeviceBusIds() {
  std::vector<std::string> ids;
#ifdef LOOM_HAVE_CUDA
  for (int d = 0; d < deviceCount(); ++d) {
    char id[32] = {};
    if (cudaDeviceGetPCIBusId(id, sizeof id, d) != cudaSuccess) (void)cudaGetLastError();
    ids.push_back(normalizeBusId(id));  // CUDA's "00000000:1A:00.0" in hwloc's spelling
  }
#endif
  return ids;
}

std::string currentDeviceBusId() {
  if (fakeDevice()) return "";
  const std::vector<std::string> ids = visibleDeviceBusIds();
  const auto device = static_cast<size_t>(currentDevice());
  return device < ids.size() ? ids[device] : "";
}

int currentDevice() {
  if (fakeDevice()) return fakeCurrent;
#ifdef LOOM_HAVE_CUDA
  int device = 0;
  if (deviceCount() == 0 || cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return device;
#else
  return 0;
#endif
}

void setCurrentDevice(int device) {
  if (fakeDevice()) {
    if (device >= 0 && device < fakeGpuCount()) fakeCurrent = device;
    return;
  }
#ifdef LOOM_HAVE_CUDA
  if (deviceCount() == 0) return;
  if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
#else
  (void)device;
#endif
}

DeviceScope::DeviceScope(int device) : previous_(currentDevice()), changed_(device != previous_) {
  if (changed_) setCurrentDevice(device);
}

DeviceScope::~DeviceScope() {
  if (changed_) setCurrentDevice(previous_);
}

namespace {

// dst <- src on a stream of its own that waits for no other, then waits for it.
void copyNow(void* dst, const void* src, size_t bytes, const char* what) {
  if (bytes == 0) return;  // an empty vector's data() may be null, which memcpy may not get
  if (fakeDevice()) {
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
void copyAny(void* dst, const void* src, size_t bytes) { copyNow(dst, src, bytes, "copying device memory"); }

void copyOnStream(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0 || dst == src) return;
  if (fakeDevice()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  auto* s = static_cast<cudaStream_t>(stream);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s);
  if (e == cudaSuccess && s == nullptr) e = cudaStreamSynchronize(nullptr);
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(loomUnhandledCudaError, std::string("copying on the call's stream: ") + cudaGetErrorString(e));
  }
#else
  (void)stream;
  std::memcpy(dst, src, bytes);
#endif
}

void useFakeDevice(bool on) { fakeOn.store(on, std::memory_order_release); }
bool fakeDevice() { return fakeOn.load(std::memory_order_acquire); }

void* fakeDeviceAlloc(size_t bytes) {
  const size_t size = bytes == 0 ? 1 : bytes;
  const int fd = ::memfd_create("loom-fake-device", MFD_CLOEXEC);
  if (fd < 0) return nullptr;
  void* p = ::ftruncate(fd, static_cast<off_t>(size)) == 0
                ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
                : MAP_FAILED;
  if (p == MAP_FAILED) {
    ::close(fd);
    return nullptr;
  }
  std::lock_guard lock(fakeMutex);
  fakeAllocations()[static_cast<const std::byte*>(p)] = {size, fd, ++fakeSerials, fakeCurrent};
  return p;
}

void fakeDeviceFree(void* p) {
  if (p == nullptr) return;
  std::lock_guard lock(fakeMutex);
  auto it = fakeAllocations().find(static_cast<const std::byte*>(p));
  if (it == fakeAllocations().end()) return;
  ::munmap(p, it->second.bytes);
  ::close(it->second.fd);
  fakeAllocations().erase(it);
}

void fakeDeviceGpus(int count, bool peerAccess) {
  fakeGpus.store(count < 1 ? 1 : count, std::memory_order_release);
  fakePeers.store(peerAccess, std::memory_order_release);
}
int fakeGpuCount() { return fakeGpus.load(std::memory_order_acquire); }
bool fakePeerAccess() { return fakePeers.load(std::memory_order_acquire); }

namespace {
std::atomic<bool> refuseIpc{false};
}  // namespace

void fakeRefuseIpc(bool on) { refuseIpc.store(on, std::memory_order_release); }
bool fakeIpcRefused() { return refuseIpc.load(std::memory_order_acquire); }

std::optional<FakeAllocation> fakeAllocationOf(const void* p) {
  if (!fakeDevice()) return std::nullopt;
  std::lock_guard lock(fakeMutex);
  const auto it = findFake(p);
  if (it == fakeAllocations().end()) return std::nullopt;
  return FakeAllocation{.fd = it->second.fd,
                        .serial = it->second.serial,
                        .bytes = it->second.bytes,
                        .offset = static_cast<size_t>(static_cast<const std::byte*>(p) - it->first),
                        .gpu = it->second.gpu};
}

}  // namespace loom::cuda
