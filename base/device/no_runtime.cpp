// DeviceRuntime for a build without CUDA: no device, host memory only, and
// whatever needs a device refused with loomInvalidUsage.
#include <string>

#include "base/device/runtimes.hpp"
#include "base/error.hpp"

namespace loom::cuda {
namespace {

[[noreturn]] void noCuda(const char* what) {
  throw Error(loomInvalidUsage, std::string(what) + ": this build of Loom has no CUDA");
}

class NoRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "none"; }
  int deviceCount() override { return 0; }
  int currentDevice() override { return 0; }
  void setCurrentDevice(int) override {}
  std::string busId(int) override { return ""; }
  uint64_t deviceId(int) override { return 0; }
  PointerKind pointerKind(const void*) override { return PointerKind::Host; }
  bool hostReadsDeviceMemory() const override { return false; }
  int deviceOf(const void*) override { return -1; }
  bool fromMemoryPool(const void*) override { return false; }
  bool enablePeerAccess(int, int) override { return false; }
  void* allocDevice(size_t) override { noCuda("device memory"); }
  void freeDevice(void*) noexcept override {}
  void* allocPinned(size_t) override { noCuda("pinned memory"); }
  void freePinned(void*) noexcept override {}
  bool hasMemoryPools(int) override { return false; }
  void* allocOnStream(size_t, StreamHandle) override { noCuda("device memory"); }
  void freeOnStream(void*, StreamHandle) noexcept override {}
  StreamHandle createStream() override { noCuda("a device stream"); }
  void destroyStream(StreamHandle) noexcept override {}
  void checkStream(StreamHandle) override { noCuda("a CUDA stream"); }
  int streamDevice(StreamHandle) override { noCuda("a CUDA stream"); }
  bool capturing(StreamHandle) override { return false; }
  void copy(void*, const void*, size_t, StreamHandle) override { noCuda("a device copy"); }
  void copyRows(void*, size_t, const void*, size_t, size_t, size_t, StreamHandle) override {
    noCuda("a device copy");
  }
  void copyNow(void*, const void*, size_t bytes) override {
    if (bytes != 0) noCuda("a device copy");
  }
  void copyFromPlace(void*, PlaceView, uint64_t, bool, size_t, size_t, size_t bytes,
                     StreamHandle) override {
    if (bytes != 0) noCuda("a device copy");
  }
  bool idle(StreamHandle) override { return true; }
  void hostFunction(StreamHandle, std::function<void()>) override { noCuda("a CUDA stream"); }
  EventHandle record(StreamHandle) override { noCuda("a CUDA event"); }
  bool reached(EventHandle) override { return true; }
  void destroyEvent(EventHandle) noexcept override {}
  void waitEvent(StreamHandle, EventHandle) override { noCuda("a CUDA event"); }
  bool hasMemops(int) override { return false; }
  void waitValue(StreamHandle, const uint64_t*, uint64_t) override { noCuda("a CUDA stream"); }
  void writeValue(StreamHandle, uint64_t*, uint64_t) override { noCuda("a CUDA stream"); }
  void memops(StreamHandle, std::span<const MemOp>) override { noCuda("stream memory operations"); }
  void storeValue(uint64_t*, uint64_t) override { noCuda("a device word"); }
  uint64_t loadValue(const uint64_t*) override { noCuda("a device word"); }
  void holdKernel(StreamHandle, const uint64_t*, uint64_t) override { noCuda("a CUDA stream"); }
  void loadKernels() override {}
  std::optional<IpcExport> exportIpc(const void*) override { return std::nullopt; }
  void* openIpc(const IpcHandle&) override { noCuda("a peer's CUDA IPC handle"); }
  void closeIpc(void*) noexcept override {}
};

}  // namespace

DeviceRuntime& noRuntime() {
  static auto* rt = new NoRuntime();
  return *rt;
}

}  // namespace loom::cuda
