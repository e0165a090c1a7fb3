#include "base/device/staging.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>
#include <thread>
#include <utility>

#include "base/backoff.hpp"
#include "base/device/runtime.hpp"

namespace loom::cuda {
namespace {

thread_local bool userStreamTask = false;

// How many pinned buffers a staging area keeps when none is lent.
constexpr size_t kKeep = 4;

}  // namespace

PinnedBuffer::PinnedBuffer(size_t bytes)
    : runtime_(runtime()), data_(static_cast<std::byte*>(runtime_.allocPinned(bytes))), bytes_(bytes) {}

PinnedBuffer::~PinnedBuffer() { runtime_.freePinned(data_); }

DeviceStream::DeviceStream() : runtime_(runtime()), stream_(runtime_.createStream()) {}

DeviceStream::~DeviceStream() { runtime_.destroyStream(stream_); }

void DeviceStream::afterDefaultStream() {
  const EventHandle legacyDone = runtime_.record(nullptr);
  struct Destroy {
    DeviceRuntime& rt;
    EventHandle event;
    ~Destroy() { rt.destroyEvent(event); }  // CUDA keeps a waited-for event alive until it fires
  } destroy{runtime_, legacyDone};
  runtime_.waitEvent(stream_, legacyDone);
}

void DeviceStream::copy(void* dst, const void* src, size_t bytes) { runtime_.copy(dst, src, bytes, stream_); }

void DeviceStream::copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes,
                            size_t rows) {
  if (rowBytes == 0 || rows == 0) return;
  if (rows == 1 || (dstPitch == rowBytes && srcPitch == rowBytes)) return copy(dst, src, rowBytes * rows);
  runtime_.copyRows(dst, dstPitch, src, srcPitch, rowBytes, rows, stream_);
}

CopyMark DeviceStream::mark() {
  CopyMark m;
  m.runtime_ = &runtime_;
  m.event_ = runtime_.record(stream_);
  return m;
}

CopyMark::~CopyMark() {
  if (event_ != nullptr) runtime_->destroyEvent(event_);
}

CopyMark::CopyMark(CopyMark&& other) noexcept
    : runtime_(other.runtime_), event_(std::exchange(other.event_, nullptr)) {}

CopyMark& CopyMark::operator=(CopyMark&& other) noexcept {
  if (this != &other) {
    CopyMark old(std::move(*this));
    runtime_ = other.runtime_;
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CopyMark::wait(const std::function<void()>& checkWait) const {
  if (event_ == nullptr) return;
  pollUntil([this] { return runtime_->reached(event_); }, checkWait);
}

void DeviceStream::synchronize(const std::function<void()>& checkWait) {
  pollUntil([this] { return runtime_.idle(stream_); }, checkWait);
}

StagingArea::Lease::Lease(StagingArea& owner, std::unique_ptr<PinnedBuffer> buffer)
    : owner_(&owner), buffer_(std::move(buffer)) {}

StagingArea::Lease::~Lease() {
  if (buffer_) owner_->giveBack(std::move(buffer_));
}

void StagingArea::Lease::abandon() noexcept {
  // Kept for the process's life, where a copy may still write into it.
  static std::mutex mutex;
  static auto* abandoned = new std::vector<std::unique_ptr<PinnedBuffer>>();
  std::lock_guard lock(mutex);
  try {
    abandoned->push_back(std::move(buffer_));
  } catch (...) {
    (void)buffer_.release();  // no room to keep it: leaked, never freed under a copy
  }
}

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

StagedCopies::StagedCopies(StagingArea& area, std::function<void()> check)
    : area_(area), check_(std::move(check)) {}

StagedCopies::~StagedCopies() {
  if (stream_ == nullptr || leases_.empty()) return;
  try {
    stream_->synchronize(check_);  // at once where the call did (its success path)
  } catch (...) {
    for (StagingArea::Lease& lease : leases_) lease.abandon();
  }
}

std::byte* StagedCopies::lease(size_t bytes) {
  leases_.push_back(area_.lease(bytes));
  return leases_.back().data();
}

DeviceStream& StagedCopies::stream() {
  if (stream_ == nullptr) stream_ = &area_.stream();
  return *stream_;
}

void StagedCopies::synchronize() {
  if (stream_ != nullptr) stream_->synchronize(check_);
}

bool onUserStream() { return userStreamTask; }

UserStreamScope::UserStreamScope(bool on) : previous_(userStreamTask) { userStreamTask = on; }
UserStreamScope::~UserStreamScope() { userStreamTask = previous_; }

}  // namespace loom::cuda
