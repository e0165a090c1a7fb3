// DeviceRuntime over the CUDA runtime (CUDA builds only). Driver calls
// (stream memory operations, address ranges, attributes) are reached through
// the runtime's entry-point query, so that libloom does not link the
// driver's library and a process without a driver still loads it.
#include "base/device/runtimes.hpp"

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <span>
#include <utility>
#include <vector>

#include "base/bus_id.hpp"
#include "base/device/cuda_error.hpp"
#include "base/device/place_copy_kernel.hpp"
#include "base/device/stream_gate_kernel.hpp"
#include "base/error.hpp"

namespace loom::cuda {
namespace {

// nullptr is the legacy default stream, whatever default-stream mode a
// translation unit was compiled with.
cudaStream_t asStream(StreamHandle s) { return s == nullptr ? cudaStreamLegacy : static_cast<cudaStream_t>(s); }
cudaEvent_t asEvent(EventHandle e) { return static_cast<cudaEvent_t>(e); }

// A driver call through the runtime, or null where the driver lacks it.
template <class Fn>
Fn driverEntry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Fn>(fn);
}

using WaitValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using WriteValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
using AddressRange = CUresult (*)(CUdeviceptr*, size_t*, CUdeviceptr);
using PointerAttribute = CUresult (*)(void*, CUpointer_attribute, CUdeviceptr);

WaitValue64 waitValue64() {
  static const auto entry = driverEntry<WaitValue64>("cuStreamWaitValue64");
  return entry;
}
WriteValue64 writeValue64() {
  static const auto entry = driverEntry<WriteValue64>("cuStreamWriteValue64");
  return entry;
}

void memopFailed(const char* what, CUresult r) {
  throw Error(loomUnhandledCudaError, std::string(what) + " failed with CUresult " +
                                          std::to_string(static_cast<int>(r)) +
                                          " (the device may lack 64-bit stream memory operations)");
}

class CudaRuntime final : public DeviceRuntime {
 public:
  const char* name() const override { return "cuda"; }

  int deviceCount() override {
    // Asked once: CUDA reads CUDA_VISIBLE_DEVICES when it starts, and calls
    // ask for the current device often.
    static const int count = [] {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();  // no driver or no device: not an error for a host communicator
        return 0;
      }
      return n;
    }();
    return count;
  }

  int currentDevice() override {
    int device = 0;
    if (deviceCount() == 0 || cudaGetDevice(&device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return device;
  }

  void setCurrentDevice(int device) override {
    if (deviceCount() == 0) return;
    if (cudaSetDevice(device) != cudaSuccess) (void)cudaGetLastError();
  }

  std::string busId(int device) override {
    const auto& ids = busIds();
    return device >= 0 && static_cast<size_t>(device) < ids.size() ? ids[static_cast<size_t>(device)] : "";
  }

  uint64_t deviceId(int device) override {
    // Even (the fake device's are odd), from the bus id, which every process
    // of the machine sees alike whatever its CUDA_VISIBLE_DEVICES.
    const std::string id = busId(device);
    return id.empty() ? 0 : (std::hash<std::string>{}(id) | 2) & ~uint64_t{1};
  }

  PointerKind pointerKind(const void* p) override {
    if (deviceCount() == 0) return PointerKind::Host;
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
  }

  bool hostReadsDeviceMemory() const override { return false; }

  int deviceOf(const void* p) override {
    if (deviceCount() == 0) return -1;
    cudaPointerAttributes attributes{};
    if (cudaPointerGetAttributes(&attributes, p) != cudaSuccess) {
      (void)cudaGetLastError();
      return -1;
    }
    const bool device = attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
    return device ? attributes.device : -1;
  }

  bool fromMemoryPool(const void* p) override {
    static const auto attribute = driverEntry<PointerAttribute>("cuPointerGetAttribute");
    // Where the driver cannot say, as if it did: the caller then keeps to
    // what every kernel may read.
    if (attribute == nullptr) return true;
    CUmemoryPool pool = nullptr;
    const CUresult r = attribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, reinterpret_cast<CUdeviceptr>(p));
    return r != CUDA_SUCCESS || pool != nullptr;
  }

  bool enablePeerAccess(int from, int to) override {
    // A context's peer access lasts as long as the context, the process's
    // primary one, so the answer is kept.
    std::lock_guard lock(peerMutex_);
    const auto [it, fresh] = peers_.try_emplace({from, to}, false);
    if (!fresh) return it->second;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, from, to) != cudaSuccess || can == 0) {
      (void)cudaGetLastError();
      return false;
    }
    const cudaError_t e = cudaDeviceEnablePeerAccess(to, 0);
    if (e != cudaSuccess) (void)cudaGetLastError();  // already enabled (by the user, say) is enabled
    it->second = e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled;
    return it->second;
  }

  void* allocDevice(size_t bytes) override {
    void* p = nullptr;
    if (const cudaError_t e = cudaMalloc(&p, bytes == 0 ? 1 : bytes); e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(loomUnhandledCudaError,
                  "cudaMalloc of " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(e));
    }
    return p;
  }
  void freeDevice(void* p) noexcept override {
    if (p != nullptr && cudaFree(p) != cudaSuccess) (void)cudaGetLastError();
  }

  bool hasMemoryPools(int device) override {
    int supported = 0;
    if (cudaDeviceGetAttribute(&supported, cudaDevAttrMemoryPoolsSupported, device) != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return supported != 0;
  }
  void* allocOnStream(size_t bytes, StreamHandle stream) override {
    void* p = nullptr;
    if (const cudaError_t e = cudaMallocAsync(&p, bytes == 0 ? 1 : bytes, asStream(stream));
        e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(loomUnhandledCudaError,
                  "cudaMallocAsync of " + std::to_string(bytes) + " bytes: " + cudaGetErrorString(e));
    }
    return p;
  }
  void freeOnStream(void* p, StreamHandle stream) noexcept override {
    if (p != nullptr && cudaFreeAsync(p, asStream(stream)) != cudaSuccess) (void)cudaGetLastError();
  }

  void* allocPinned(size_t bytes) override {
    void* p = nullptr;
    throwIfFailed(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocPortable | cudaHostAllocMapped),
                  "cudaHostAlloc of pinned memory");
    return p;
  }
  void freePinned(void* p) noexcept override {
    if (p != nullptr && cudaFreeHost(p) != cudaSuccess) (void)cudaGetLastError();
  }

  StreamHandle createStream() override {
    cudaStream_t stream = nullptr;
    throwIfFailed(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    return stream;
  }
  void destroyStream(StreamHandle stream) noexcept override {
    if (stream != nullptr && cudaStreamDestroy(asStream(stream)) != cudaSuccess) (void)cudaGetLastError();
  }
  void checkStream(StreamHandle) override {}

  int streamDevice(StreamHandle stream) override {
    int device = 0;
    if (cudaStreamGetDevice(asStream(stream), &device) != cudaSuccess) {
      (void)cudaGetLastError();
      throwIfFailed(cudaGetDevice(&device), "cudaGetDevice");
    }
    return device;
  }

  bool capturing(StreamHandle stream) override {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    throwIfFailed(cudaStreamIsCapturing(asStream(stream), &capture), "cudaStreamIsCapturing");
    return capture != cudaStreamCaptureStatusNone;
  }

  void copy(void* dst, const void* src, size_t bytes, StreamHandle stream) override {
    if (bytes == 0 || dst == src) return;
    throwIfFailed(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, asStream(stream)), "cudaMemcpyAsync");
  }

  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes, size_t rows,
                StreamHandle stream) override {
    // CUDA's 2D copies take pitches up to the device's maximum (2^31 - 1
    // bytes on every GPU so far); longer rows go one copy each.
    constexpr size_t kMaxPitch = (size_t{1} << 31) - 1;
    if (dstPitch <= kMaxPitch && srcPitch <= kMaxPitch) {
      throwIfFailed(
          cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, rowBytes, rows, cudaMemcpyDefault, asStream(stream)),
          "cudaMemcpy2DAsync");
      return;
    }
    for (size_t i = 0; i < rows; ++i) {
      copy(static_cast<std::byte*>(dst) + i * dstPitch, static_cast<const std::byte*>(src) + i * srcPitch,
           rowBytes, stream);
    }
  }

  void copyNow(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    cudaStream_t stream = nullptr;
    cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
    if (e == cudaSuccess) e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
    if (stream != nullptr) cudaStreamDestroy(stream);
    throwIfFailed(e, "copying device memory");
  }

  bool idle(StreamHandle stream) override { return done(cudaStreamQuery(asStream(stream)), "a stream's work"); }

  void hostFunction(StreamHandle stream, std::function<void()> fn) override {
    auto* owned = new std::function<void()>(std::move(fn));
    const cudaError_t e = cudaLaunchHostFunc(
        asStream(stream),
        [](void* data) {
          std::unique_ptr<std::function<void()>> f(static_cast<std::function<void()>*>(data));
          (*f)();
        },
        owned);
    if (e != cudaSuccess) {
      delete owned;
      throwIfFailed(e, "cudaLaunchHostFunc");
    }
  }

  EventHandle record(StreamHandle stream) override {
    cudaEvent_t event = nullptr;
    throwIfFailed(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    if (const cudaError_t e = cudaEventRecord(event, asStream(stream)); e != cudaSuccess) {
      cudaEventDestroy(event);
      throwIfFailed(e, "cudaEventRecord");
    }
    return event;
  }
  bool reached(EventHandle event) override { return done(cudaEventQuery(asEvent(event)), "the work before an event"); }
  void destroyEvent(EventHandle event) noexcept override {
    if (event != nullptr && cudaEventDestroy(asEvent(event)) != cudaSuccess) (void)cudaGetLastError();
  }
  void waitEvent(StreamHandle stream, EventHandle event) override {
    throwIfFailed(cudaStreamWaitEvent(asStream(stream), asEvent(event), 0), "cudaStreamWaitEvent");
  }

  bool hasMemops(int device) override {
    using GetDevice = CUresult (*)(CUdevice*, int);
    using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
    static const auto get = driverEntry<GetDevice>("cuDeviceGet");
    static const auto attribute = driverEntry<GetAttribute>("cuDeviceGetAttribute");
    if (waitValue64() == nullptr || writeValue64() == nullptr || get == nullptr || attribute == nullptr) return false;
    CUdevice handle = 0;
    int supported = 0;
    return get(&handle, device) == CUDA_SUCCESS &&
           attribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, handle) == CUDA_SUCCESS &&
           supported != 0;
  }

  void waitValue(StreamHandle stream, const uint64_t* word, uint64_t value) override {
    const WaitValue64 wait = waitValue64();
    if (wait == nullptr) throw Error(loomUnhandledCudaError, "the driver offers no cuStreamWaitValue64");
    const CUresult r = wait(asStream(stream), reinterpret_cast<CUdeviceptr>(word), value, CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) memopFailed("cuStreamWaitValue64", r);
  }

  void writeValue(StreamHandle stream, uint64_t* word, uint64_t value) override {
    const WriteValue64 write = writeValue64();
    if (write == nullptr) throw Error(loomUnhandledCudaError, "the driver offers no cuStreamWriteValue64");
    const CUresult r = write(asStream(stream), reinterpret_cast<CUdeviceptr>(word), value, 0);
    if (r != CUDA_SUCCESS) memopFailed("cuStreamWriteValue64", r);
  }

  void memops(StreamHandle stream, std::span<const MemOp> ops) override {
    using BatchMemOp = CUresult (*)(CUstream, unsigned int, CUstreamBatchMemOpParams*, unsigned int);
    static const auto batch = driverEntry<BatchMemOp>("cuStreamBatchMemOp");
    if (batch == nullptr) {  // one by one, as the batch would run them
      for (const MemOp& op : ops) op.write ? writeValue(stream, op.word, op.value) : waitValue(stream, op.word, op.value);
      return;
    }
    constexpr size_t kMost = 255;  // the driver takes fewer than 256 at once
    std::vector<CUstreamBatchMemOpParams> params;
    for (size_t at = 0; at < ops.size(); at += kMost) {
      params.clear();
      for (const MemOp& op : ops.subspan(at, std::min(kMost, ops.size() - at))) {
        CUstreamBatchMemOpParams p{};
        if (op.write) {
          p.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_64;
          p.writeValue.address = reinterpret_cast<CUdeviceptr>(op.word);
          p.writeValue.value64 = op.value;
          p.writeValue.flags = 0;
        } else {
          p.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
          p.waitValue.address = reinterpret_cast<CUdeviceptr>(op.word);
          p.waitValue.value64 = op.value;
          p.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        }
        params.push_back(p);
      }
      const CUresult r = batch(asStream(stream), static_cast<unsigned int>(params.size()), params.data(), 0);
      if (r != CUDA_SUCCESS) memopFailed("cuStreamBatchMemOp", r);
    }
  }

  void storeValue(uint64_t* word, uint64_t value) override { copyNow(word, &value, sizeof value); }
  uint64_t loadValue(const uint64_t* word) override {
    uint64_t value = 0;
    copyNow(&value, word, sizeof value);
    return value;
  }

  void holdKernel(StreamHandle stream, const uint64_t* word, uint64_t value) override {
    throwIfFailed(queueHold(asStream(stream), word, value), "queueing the stream's wait for Loom");
  }
  void copyFromPlace(void* dst, PlaceView place, uint64_t sequence, bool result, size_t block, size_t at, size_t bytes,
                     StreamHandle stream) override {
    throwIfFailed(queueCopyFromPlace(dst, place, sequence, result, block, at, bytes, asStream(stream)),
                  "queueing a copy from a published place");
  }
  void loadKernels() override {
    throwIfFailed(loadCopyFromPlaceKernel(), "loading the copy from a published place");
    throwIfFailed(loadHoldKernel(), "loading the stream gate's kernel");
    for (void (*load)() : kernelLoaders()) load();
  }

  std::optional<IpcExport> exportIpc(const void* p) override {
    static const auto range = driverEntry<AddressRange>("cuMemGetAddressRange");
    if (deviceCount() == 0 || range == nullptr) return std::nullopt;
    CUdeviceptr base = 0;
    size_t bytes = 0;
    if (range(&base, &bytes, reinterpret_cast<CUdeviceptr>(p)) != CUDA_SUCCESS) return std::nullopt;
    cudaIpcMemHandle_t handle{};
    if (cudaIpcGetMemHandle(&handle, reinterpret_cast<void*>(base)) != cudaSuccess) {
      (void)cudaGetLastError();  // not cudaMalloc's (a pool's, the virtual memory API's): staged instead
      return std::nullopt;
    }
    static_assert(sizeof(handle) == kIpcHandleBytes);
    IpcExport out;
    std::memcpy(out.handle.data(), &handle, sizeof handle);
    out.offset = reinterpret_cast<uintptr_t>(p) - static_cast<uintptr_t>(base);
    return out;
  }

  void* openIpc(const IpcHandle& handle) override {
    cudaIpcMemHandle_t h{};
    std::memcpy(&h, handle.data(), sizeof h);
    void* p = nullptr;
    if (const cudaError_t e = cudaIpcOpenMemHandle(&p, h, cudaIpcMemLazyEnablePeerAccess); e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(loomUnhandledCudaError,
                  std::string("cudaIpcOpenMemHandle of a peer's buffer: ") + cudaGetErrorString(e));
    }
    return p;
  }
  void closeIpc(void* base) noexcept override {
    if (base != nullptr && cudaIpcCloseMemHandle(base) != cudaSuccess) (void)cudaGetLastError();
  }

 private:
  // Every visible device's bus id, by ordinal, in hwloc's spelling.
  const std::vector<std::string>& busIds() {
    static const std::vector<std::string> ids = [this] {
      std::vector<std::string> out;
      for (int d = 0; d < deviceCount(); ++d) {
        char id[32] = {};
        if (cudaDeviceGetPCIBusId(id, sizeof id, d) != cudaSuccess) (void)cudaGetLastError();
        out.push_back(normalizeBusId(id));  // CUDA's "00000000:1A:00.0" in hwloc's spelling
      }
      return out;
    }();
    return ids;
  }

  // A query's answer: done, not yet, or the device's error thrown.
  static bool done(cudaError_t state, const char* what) {
    if (state == cudaSuccess) return true;
    if (state == cudaErrorNotReady) return false;
    throwIfFailed(state, what);
    return false;
  }

  std::mutex peerMutex_;
  std::map<std::pair<int, int>, bool> peers_;
};

}  // namespace

DeviceRuntime& cudaRuntime() {
  static auto* rt = new CudaRuntime();  // never freed: workers may use it at exit
  return *rt;
}

}  // namespace loom::cuda
