#include "base/device/stream_gate.hpp"

#include <map>
#include <vector>
#include <mutex>
#include <string>
#include <thread>

#include "base/backoff.hpp"
#include "base/env.hpp"
#include "base/error.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

#include "base/device/cuda_error.hpp"
#include "base/device/stream_gate_kernel.hpp"
#endif

namespace loom::cuda {

#ifdef LOOM_HAVE_CUDA
namespace {

// The gates' counters: pages of pinned, mapped memory, pinned ahead of need
// (prepareStreamGates), a counter each. Kept for the process's life, as the
// gates that use them are.
class Counters {
 public:
  static Counters& instance() {
    static auto* counters = new Counters();  // never freed: gates live as long as the process
    return *counters;
  }
  void prepare() {
    std::lock_guard lock(mutex_);
    if (!loaded_) {
      throwIfFailed(loadHoldKernel(), "loading the stream gate's kernel");
      loaded_ = true;
    }
    if (next_ == kPerPage) addPage();
  }
  uint64_t* take() {
    std::lock_guard lock(mutex_);
    if (next_ == kPerPage) addPage();  // past the first page's gates: pinned now, which may wait
    uint64_t* counter = page_ + next_++;
    *counter = 0;
    return counter;
  }

 private:
  static constexpr size_t kPerPage = 512;
  void addPage() {
    void* p = nullptr;
    throwIfFailed(cudaHostAlloc(&p, kPerPage * sizeof(uint64_t), cudaHostAllocMapped | cudaHostAllocPortable),
                  "cudaHostAlloc of stream gates' counters");
    page_ = static_cast<uint64_t*>(p);
    next_ = 0;
  }
  std::mutex mutex_;
  bool loaded_ = false;
  uint64_t* page_ = nullptr;
  size_t next_ = kPerPage;
};

// LOOM_CUDA_GATE=memop: the stream waits with cuStreamWaitValue64, a driver
// call reached through the runtime (Loom links no libcuda).
using WaitValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);

template <class Fn>
Fn driverEntry(const char* name);

WaitValue64 waitValue64() {
  static const WaitValue64 entry = driverEntry<WaitValue64>("cuStreamWaitValue64");
  return entry;
}

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

// Whether `device` (an ordinal) waits on 64-bit stream memory operations.
bool deviceHasMemops(int device) {
  using GetDevice = CUresult (*)(CUdevice*, int);
  using GetAttribute = CUresult (*)(int*, CUdevice_attribute, CUdevice);
  static const auto get = driverEntry<GetDevice>("cuDeviceGet");
  static const auto attribute = driverEntry<GetAttribute>("cuDeviceGetAttribute");
  if (waitValue64() == nullptr || get == nullptr || attribute == nullptr) return false;
  CUdevice handle = 0;
  int supported = 0;
  return get(&handle, device) == CUDA_SUCCESS &&
         attribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, handle) == CUDA_SUCCESS &&
         supported != 0;
}

// Whether `stream`'s device waits on 64-bit stream memory operations.
bool streamHasMemops(cudaStream_t stream) {
  int device = 0;
  if (cudaStreamGetDevice(stream, &device) != cudaSuccess) {
    (void)cudaGetLastError();
    throwIfFailed(cudaGetDevice(&device), "cudaGetDevice");
  }
  return deviceHasMemops(device);
}

// LOOM_CUDA_GATE: memop by default where the stream's device supports it
// (`hasMemops`; measured on an H200, a gate that holds no kernel is ten
// times faster for processes sharing the GPU, which time-slices a resident
// kernel), else the kernel; either when named.
bool gateWithMemops(bool hasMemops) {
  const std::string how = env::get("LOOM_CUDA_GATE");
  if (how == "kernel") return false;
  if (how == "memop") return true;
  if (how != "auto") throw Error(loomInvalidArgument, "LOOM_CUDA_GATE=" + how + " is none of auto, kernel and memop");
  return hasMemops;
}

}  // namespace

namespace {

std::vector<void (*)()>& loaders() {
  static std::vector<void (*)()> all;
  return all;
}

}  // namespace

void prepareStreamGates() {
  Counters::instance().prepare();
  for (void (*load)() : loaders()) load();
}

void loadBeforeStreamGates(void (*load)()) { loaders().push_back(load); }

struct StreamGate::Impl {
  cudaStream_t stream = nullptr;
  uint64_t* released = nullptr;  // pinned, mapped: the kernel or the GPU's front end reads it
  std::mutex mutex;
  uint64_t issued = 0;
  std::map<uint64_t, cudaEvent_t> marks;  // ticket -> the stream's work before it
  bool hasMemops = false;  // the stream's device's, asked once

  ~Impl() {
    for (auto& [ticket, event] : marks) cudaEventDestroy(event);
    (void)cudaGetLastError();
  }
};

StreamGate::StreamGate(void* stream) : impl_(std::make_unique<Impl>()) {
  impl_->stream = static_cast<cudaStream_t>(stream);
  impl_->hasMemops = streamHasMemops(impl_->stream);
  Counters::instance().prepare();  // a no-op once a communicator did it
  impl_->released = Counters::instance().take();
}

StreamGate::~StreamGate() = default;

uint64_t StreamGate::admit() {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  throwIfFailed(cudaStreamIsCapturing(impl_->stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) {
    // A captured call would be a graph node that Loom's host side never sees run.
    throw Error(loomInvalidUsage, "the stream is being captured into a CUDA graph, which Loom does not support yet: "
                                  "make the call outside the capture");
  }
  std::lock_guard lock(impl_->mutex);
  cudaEvent_t mark = nullptr;
  throwIfFailed(cudaEventCreateWithFlags(&mark, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  if (cudaError_t e = cudaEventRecord(mark, impl_->stream); e != cudaSuccess) {
    cudaEventDestroy(mark);
    throwIfFailed(e, "cudaEventRecord on the call's stream");
  }
  const uint64_t ticket = impl_->issued + 1;
  if (gateWithMemops(impl_->hasMemops)) {  // asked per call: a stream's handle outlives the setting it was first used with
    const WaitValue64 wait = waitValue64();
    if (wait == nullptr) {
      cudaEventDestroy(mark);
      throw Error(loomUnhandledCudaError, "LOOM_CUDA_GATE=memop: the driver offers no cuStreamWaitValue64");
    }
    const CUresult r = wait(impl_->stream, reinterpret_cast<CUdeviceptr>(impl_->released), ticket,
                            CU_STREAM_WAIT_VALUE_GEQ);
    if (r != CUDA_SUCCESS) {
      cudaEventDestroy(mark);
      throw Error(loomUnhandledCudaError, "LOOM_CUDA_GATE=memop: cuStreamWaitValue64 failed with CUresult " +
                                              std::to_string(static_cast<int>(r)) +
                                              " (the device may lack 64-bit stream memory operations: use kernel)");
    }
  } else if (cudaError_t e = queueHold(impl_->stream, impl_->released, ticket); e != cudaSuccess) {
    cudaEventDestroy(mark);
    throwIfFailed(e, "queueing the stream's wait for Loom");
  }
  impl_->issued = ticket;
  impl_->marks.emplace(ticket, mark);
  return ticket;
}

void StreamGate::waitStarted(uint64_t ticket, const std::function<void()>& checkWait) {
  cudaEvent_t mark = nullptr;
  {
    std::lock_guard lock(impl_->mutex);
    auto it = impl_->marks.find(ticket);
    if (it == impl_->marks.end()) return;
    mark = it->second;
  }
  struct Forget {
    Impl& impl;
    uint64_t ticket;
    ~Forget() {
      std::lock_guard lock(impl.mutex);
      auto it = impl.marks.find(ticket);
      cudaEventDestroy(it->second);
      impl.marks.erase(it);
    }
  } forget{*impl_, ticket};
  // The user's own work comes first, however long it takes: only an abort
  // ends this wait early.
  Backoff backoff;
  for (;;) {
    const cudaError_t state = cudaEventQuery(mark);
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) throwIfFailed(state, "the work queued before the call on its stream");
    backoff.idle([&](Backoff::Phase) { checkWait(); },
                 [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); });
  }
}

void StreamGate::release(uint64_t ticket) noexcept {
  uint64_t now = __atomic_load_n(impl_->released, __ATOMIC_ACQUIRE);
  while (now < ticket && !__atomic_compare_exchange_n(impl_->released, &now, ticket, false, __ATOMIC_RELEASE,
                                                      __ATOMIC_ACQUIRE)) {
  }
}

#else

struct StreamGate::Impl {};

StreamGate::StreamGate(void*) { throw Error(loomInvalidUsage, "a CUDA stream: this build of Loom has no CUDA"); }
StreamGate::~StreamGate() = default;
uint64_t StreamGate::admit() { return 0; }
void StreamGate::waitStarted(uint64_t, const std::function<void()>&) {}
void StreamGate::release(uint64_t) noexcept {}
void prepareStreamGates() {}
void loadBeforeStreamGates(void (*)()) {}

#endif

}  // namespace loom::cuda
