#include "base/device/stream_gate.hpp"

#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/backoff.hpp"
#include "base/device/runtimes.hpp"
#include "base/env.hpp"
#include "base/error.hpp"

namespace loom::cuda {
namespace {

// The gates' counters: pages of pinned, mapped memory, pinned ahead of need
// (prepareStreamGates), a counter each. Kept for the process's life, as the
// gates that use them are; one set per runtime (the tests switch to the fake).
class Counters {
 public:
  explicit Counters(DeviceRuntime& rt) : runtime_(rt) {}
  static Counters& of(DeviceRuntime& rt) {
    static std::mutex mutex;
    static auto* all = new std::map<DeviceRuntime*, Counters*>();  // never freed, as the gates are not
    std::lock_guard lock(mutex);
    Counters*& c = (*all)[&rt];
    if (c == nullptr) c = new Counters(rt);
    return *c;
  }
  void prepare() {
    std::lock_guard lock(mutex_);
    if (!loaded_) {
      runtime_.loadKernels();
      loaded_ = true;
    }
    if (next_ == kPerPage) addPage();
  }
  uint64_t* take() {
    std::lock_guard lock(mutex_);
    if (next_ == kPerPage) addPage();  // past the first page's gates: pinned now, which may wait
    uint64_t* counter = page_ + next_++;
    __atomic_store_n(counter, 0, __ATOMIC_RELEASE);
    return counter;
  }

 private:
  static constexpr size_t kPerPage = 512;
  void addPage() {
    page_ = static_cast<uint64_t*>(runtime_.allocPinned(kPerPage * sizeof(uint64_t)));
    next_ = 0;
  }
  DeviceRuntime& runtime_;
  std::mutex mutex_;
  bool loaded_ = false;
  uint64_t* page_ = nullptr;
  size_t next_ = kPerPage;
};

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

void prepareStreamGates() { Counters::of(runtime()).prepare(); }

void loadBeforeStreamGates(void (*load)()) { kernelLoaders().push_back(load); }

struct StreamGate::Impl {
  explicit Impl(DeviceRuntime& r) : rt(r) {}
  DeviceRuntime& rt;
  StreamHandle stream = nullptr;
  uint64_t* released = nullptr;  // pinned, mapped: the GPU's front end or the kernel reads it
  std::mutex mutex;
  uint64_t issued = 0;
  std::map<uint64_t, EventHandle> marks;  // ticket -> the stream's work before it
  bool hasMemops = false;  // the stream's device's, asked once

  ~Impl() {
    for (auto& [ticket, event] : marks) rt.destroyEvent(event);
  }
};

StreamGate::StreamGate(void* stream) : impl_(std::make_unique<Impl>(runtime())) {
  DeviceRuntime& rt = impl_->rt;
  if (rt.deviceCount() == 0) throw Error(loomInvalidUsage, "a CUDA stream: no CUDA device is visible");
  rt.checkStream(stream);
  impl_->stream = stream;
  impl_->hasMemops = rt.hasMemops(rt.streamDevice(stream));
  Counters::of(rt).prepare();  // a no-op once a communicator did it
  impl_->released = Counters::of(rt).take();
}

StreamGate::~StreamGate() = default;

uint64_t StreamGate::admit() {
  DeviceRuntime& rt = impl_->rt;
  refuseCapture(rt, impl_->stream);  // a captured gate would be a graph node that Loom's host side never sees run
  std::lock_guard lock(impl_->mutex);
  const EventHandle mark = rt.record(impl_->stream);
  const uint64_t ticket = impl_->issued + 1;
  try {
    // Asked per call: a stream's handle outlives the setting it was first used with.
    if (gateWithMemops(impl_->hasMemops)) {
      rt.waitValue(impl_->stream, impl_->released, ticket);
    } else {
      rt.holdKernel(impl_->stream, impl_->released, ticket);
    }
  } catch (...) {
    rt.destroyEvent(mark);
    throw;
  }
  impl_->issued = ticket;
  impl_->marks.emplace(ticket, mark);
  return ticket;
}

void StreamGate::waitStarted(uint64_t ticket, const std::function<void()>& checkWait) {
  EventHandle mark = nullptr;
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
      impl.rt.destroyEvent(it->second);
      impl.marks.erase(it);
    }
  } forget{*impl_, ticket};
  // The user's own work comes first, however long it takes: only an abort
  // ends this wait early.
  pollUntil([&] { return impl_->rt.reached(mark); }, checkWait);
}

void StreamGate::release(uint64_t ticket) noexcept {
  uint64_t now = __atomic_load_n(impl_->released, __ATOMIC_ACQUIRE);
  while (now < ticket && !__atomic_compare_exchange_n(impl_->released, &now, ticket, false, __ATOMIC_RELEASE,
                                                      __ATOMIC_ACQUIRE)) {
  }
}

}  // namespace loom::cuda
