#include "base/device/staging.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "base/backoff.hpp"
#include "base/device/cuda.hpp"
#include "base/error.hpp"

#ifdef LOOM_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "base/device/cuda_error.hpp"
#endif

namespace loom::cuda {
namespace {

thread_local bool userStreamTask = false;
std::atomic<uint64_t> fakeStaged{0};

#ifndef LOOM_HAVE_CUDA
[[noreturn]] void noCuda(const char* what) {
  throw Error(loomInvalidUsage, std::string(what) + ": this build of Loom has no CUDA");
}
#endif

// How many pinned buffers a staging area keeps when none is lent.
constexpr size_t kKeep = 4;

#ifdef LOOM_HAVE_CUDA
// Polls `query` (cudaStreamQuery, cudaEventQuery) until the work is done,
// backing off, with `checkWait` between polls to give up.
void waitUntilDone(const std::function<cudaError_t()>& query, const std::function<void()>& checkWait) {
  Backoff backoff;
  for (;;) {
    const cudaError_t state = query();
    if (state == cudaSuccess) return;
    if (state != cudaErrorNotReady) throwIfFailed(state, "a staging copy");
    backoff.idle([&](Backoff::Phase) { checkWait(); },
                 [](std::chrono::microseconds d) { std::this_thread::sleep_for(d); });
  }
}
#endif

}  // namespace

PinnedBuffer::PinnedBuffer(size_t bytes) : bytes_(bytes), fake_(fakeDevice()) {
  if (fake_) {
    data_ = static_cast<std::byte*>(::operator new(std::max<size_t>(bytes, 1)));
    return;
  }
#ifdef LOOM_HAVE_CUDA
  void* p = nullptr;
  throwIfFailed(cudaHostAlloc(&p, std::max<size_t>(bytes, 1), cudaHostAllocPortable),
                "cudaHostAlloc of a staging buffer");
  data_ = static_cast<std::byte*>(p);
#else
  noCuda("a pinned staging buffer");
#endif
}

PinnedBuffer::~PinnedBuffer() {
  if (fake_) {
    ::operator delete(data_);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  if (data_ != nullptr && cudaFreeHost(data_) != cudaSuccess) (void)cudaGetLastError();
#endif
}

struct DeviceStream::Impl {
  bool fake = fakeDevice();
#ifdef LOOM_HAVE_CUDA
  cudaStream_t stream = nullptr;
  cudaEvent_t legacyDone = nullptr;
#endif
};

DeviceStream::DeviceStream() : impl_(std::make_unique<Impl>()) {
  if (impl_->fake) return;
#ifdef LOOM_HAVE_CUDA
  throwIfFailed(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  if (cudaEventCreateWithFlags(&impl_->legacyDone, cudaEventDisableTiming) != cudaSuccess) {
    cudaStreamDestroy(impl_->stream);
    throwIfFailed(cudaErrorMemoryAllocation, "cudaEventCreateWithFlags");
  }
#else
  noCuda("a copy stream");
#endif
}

DeviceStream::~DeviceStream() {
#ifdef LOOM_HAVE_CUDA
  if (impl_->fake) return;
  cudaEventDestroy(impl_->legacyDone);
  cudaStreamDestroy(impl_->stream);
  (void)cudaGetLastError();
#endif
}

void DeviceStream::afterDefaultStream() {
  if (impl_->fake) return;
#ifdef LOOM_HAVE_CUDA
  throwIfFailed(cudaEventRecord(impl_->legacyDone, cudaStreamLegacy), "cudaEventRecord on the default stream");
  throwIfFailed(cudaStreamWaitEvent(impl_->stream, impl_->legacyDone, 0), "cudaStreamWaitEvent");
#endif
}

void DeviceStream::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  if (impl_->fake) {
    std::memcpy(dst, src, bytes);
    fakeStaged.fetch_add(bytes, std::memory_order_relaxed);
    return;
  }
#ifdef LOOM_HAVE_CUDA
  throwIfFailed(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, impl_->stream), "cudaMemcpyAsync");
#endif
}

void DeviceStream::copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes,
                            size_t rows) {
  if (rowBytes == 0 || rows == 0) return;
  if (rows == 1 || (dstPitch == rowBytes && srcPitch == rowBytes)) return copy(dst, src, rowBytes * rows);
#ifdef LOOM_HAVE_CUDA
  // CUDA's 2D copies take pitches up to the device's maximum (2^31 - 1 bytes
  // on every GPU so far); longer rows go one copy each.
  constexpr size_t kMaxPitch = (size_t{1} << 31) - 1;
  if (!impl_->fake && dstPitch <= kMaxPitch && srcPitch <= kMaxPitch) {
    throwIfFailed(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, rowBytes, rows, cudaMemcpyDefault, impl_->stream),
                  "cudaMemcpy2DAsync");
    return;
  }
#endif
  for (size_t i = 0; i < rows; ++i) {
    copy(static_cast<std::byte*>(dst) + i * dstPitch, static_cast<const std::byte*>(src) + i * srcPitch, rowBytes);
  }
}

CopyMark DeviceStream::mark() {
  CopyMark m;
  if (impl_->fake) return m;
#ifdef LOOM_HAVE_CUDA
  cudaEvent_t event = nullptr;
  throwIfFailed(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  m.event_ = event;  // the mark owns it from here, whatever fails next
  throwIfFailed(cudaEventRecord(event, impl_->stream), "cudaEventRecord on the copy stream");
#endif
  return m;
}

CopyMark::~CopyMark() {
#ifdef LOOM_HAVE_CUDA
  if (event_ != nullptr && cudaEventDestroy(static_cast<cudaEvent_t>(event_)) != cudaSuccess) (void)cudaGetLastError();
#endif
}

CopyMark::CopyMark(CopyMark&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CopyMark& CopyMark::operator=(CopyMark&& other) noexcept {
  if (this != &other) {
    CopyMark old(std::move(*this));
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CopyMark::wait(const std::function<void()>& checkWait) const {
  if (event_ == nullptr) return;
#ifdef LOOM_HAVE_CUDA
  waitUntilDone([this] { return cudaEventQuery(static_cast<cudaEvent_t>(event_)); }, checkWait);
#else
  (void)checkWait;
#endif
}

void DeviceStream::synchronize(const std::function<void()>& checkWait) {
  if (impl_->fake) return;
#ifdef LOOM_HAVE_CUDA
  waitUntilDone([this] { return cudaStreamQuery(impl_->stream); }, checkWait);
#else
  (void)checkWait;
#endif
}

void* DeviceStream::handle() const {
#ifdef LOOM_HAVE_CUDA
  return impl_->fake ? nullptr : impl_->stream;
#else
  return nullptr;
#endif
}

StagingArea::Lease::Lease(StagingArea& owner, std::unique_ptr<PinnedBuffer> buffer)
    : owner_(&owner), buffer_(std::move(buffer)) {}

StagingArea::Lease::~Lease() {
  if (buffer_) owner_->giveBack(std::move(buffer_));
}

void StagingArea::Lease::abandon() noexcept { (void)buffer_.release(); }

StagingArea::Lease StagingArea::lease(size_t bytes) {
  std::unique_ptr<PinnedBuffer> chosen;
  {
    std::lock_guard lock(mutex_);
    // The smallest kept buffer that is large enough.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if ((*it)->size() >= bytes && (best == free_.end() || (*it)->size() < (*best)->size())) best = it;
    }
    if (best != free_.end()) {
      chosen = std::move(*best);
      free_.erase(best);
    }
  }
  // Else a new one, a little larger than asked so that nearby sizes reuse it.
  if (!chosen) chosen = std::make_unique<PinnedBuffer>(bytes + bytes / 8);
  return Lease(*this, std::move(chosen));
}

void StagingArea::giveBack(std::unique_ptr<PinnedBuffer> buffer) {
  std::lock_guard lock(mutex_);
  free_.push_back(std::move(buffer));
  // Freeing pinned memory may wait for the device, which, on a task a
  // user's stream waits for, would wait for this very thread: such a thread
  // keeps what it gives back, and the next other one trims.
  if (free_.size() > kKeep && !onUserStream()) {
    // Keep the largest: they serve every smaller size too.
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                     [](const auto& a, const auto& b) { return a->size() < b->size(); });
    free_.erase(smallest);
  }
}

DeviceStream& StagingArea::stream() {
  std::lock_guard lock(mutex_);
  if (!stream_) stream_ = std::make_unique<DeviceStream>();
  return *stream_;
}

uint64_t fakeBytesStaged() { return fakeStaged.load(std::memory_order_relaxed); }

bool onUserStream() { return userStreamTask; }

UserStreamScope::UserStreamScope(bool on) : previous_(userStreamTask) { userStreamTask = on; }
UserStreamScope::~UserStreamScope() { userStreamTask = previous_; }

}  // namespace loom::cuda
