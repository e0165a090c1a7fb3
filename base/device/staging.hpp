// The staged device path's pieces: device buffers reach the host data path
// through pinned host memory, copied on a CUDA stream of Loom's own. Nothing
// of CUDA in this header (the stream is behind a pointer to its
// implementation), so the layers above build the same without it.
//
// Loom's stream is non-blocking: it never waits for the legacy default
// stream on its own. That matters because a user's stream may be held at a
// gate (stream_gate.hpp) until Loom's host side finishes a call; a copy that
// waited for the legacy stream, which waits for every blocking stream, would
// then wait for itself.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace loom::cuda {

class DeviceRuntime;

// Host memory pinned for the device's copy engines (cudaHostAlloc), freed
// with the object.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(size_t bytes);
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  std::byte* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  DeviceRuntime& runtime_;  // the one that made it frees it
  std::byte* data_ = nullptr;
  size_t bytes_ = 0;
};

// A point in a DeviceStream's queue, reached once every copy queued before
// it is done: a caller waits for its own copies alone, whatever other
// threads queue on the stream after it. Owns its CUDA event.
class CopyMark {
 public:
  CopyMark() = default;  // reached already
  ~CopyMark();
  CopyMark(CopyMark&& other) noexcept;
  CopyMark& operator=(CopyMark&& other) noexcept;
  CopyMark(const CopyMark&) = delete;
  CopyMark& operator=(const CopyMark&) = delete;

  // Returns once reached; `check` as DeviceStream::synchronize's.
  void wait(const std::function<void()>& check) const;

 private:
  friend class DeviceStream;
  DeviceRuntime* runtime_ = nullptr;
  void* event_ = nullptr;  // the runtime's event
};

// A non-blocking stream on the device current when it was made, for Loom's
// own copies.
class DeviceStream {
 public:
  DeviceStream();
  ~DeviceStream();
  DeviceStream(const DeviceStream&) = delete;
  DeviceStream& operator=(const DeviceStream&) = delete;

  // Later copies start after the work queued so far on the legacy default
  // stream: a call on the NULL stream reads its inputs after it, as
  // cudaMemcpy would.
  void afterDefaultStream();
  // dst <- src, queued; any pair of host and device memory.
  void copy(void* dst, const void* src, size_t bytes);
  // `rows` rows of `rowBytes` each, row i from src + i srcPitch to
  // dst + i dstPitch, queued as one copy (a block of each of n ranks' to
  // or from a piece's side-by-side stand-in).
  void copyRows(void* dst, size_t dstPitch, const void* src, size_t srcPitch, size_t rowBytes, size_t rows);
  // The copies queued so far, as a mark to wait for.
  CopyMark mark();
  // Returns once every queued copy is done. `check` runs between polls and
  // throws to give up (an abort, a deadline); a CUDA error throws
  // loomUnhandledCudaError.
  void synchronize(const std::function<void()>& check);
  // The runtime's stream, for kernels queued beside the copies.
  void* handle() const { return stream_; }

 private:
  DeviceRuntime& runtime_;
  void* stream_ = nullptr;
};

// One communicator's staging: its copy stream and pinned buffers lent to one
// call at a time each, kept for the next (allocating pinned memory costs far
// more than a copy). Safe to use from several threads.
class StagingArea {
 public:
  class Lease {
   public:
    Lease(StagingArea& owner, std::unique_ptr<PinnedBuffer> buffer);
    ~Lease();
    Lease(Lease&&) = default;
    Lease& operator=(Lease&&) = delete;
    std::byte* data() const { return buffer_->data(); }
    // For a lease a copy may still be writing into (its wait gave up: the
    // device is stuck or the call aborted): the buffer is never lent again,
    // nor freed, as freeing it under a copy in flight is no safer.
    void abandon() noexcept;

   private:
    StagingArea* owner_;
    std::unique_ptr<PinnedBuffer> buffer_;
  };

  StagingArea() = default;
  StagingArea(const StagingArea&) = delete;
  StagingArea& operator=(const StagingArea&) = delete;

  // A buffer of at least `bytes` for the caller alone until the lease ends.
  Lease lease(size_t bytes);
  // Made on first use, on the caller's current device.
  DeviceStream& stream();

 private:
  void giveBack(std::unique_ptr<PinnedBuffer> buffer);

  std::mutex mutex_;
  std::unique_ptr<DeviceStream> stream_;
  std::vector<std::unique_ptr<PinnedBuffer>> free_;
};

// One call's staging, the only way a call stages: the pinned stand-ins it
// leases and the copies on its communicator's stream that fill and empty
// them, with one owner. The leases go back to the area when it goes, once
// every copy queued on the stream is done; where that wait gives up (an
// abort, the communicator's deadline, a stuck device) they are abandoned
// instead, never lent again while a copy may still write into them.
// Collectives (collectives/device_staging) and sends and receives
// (comm/engine/group) stage through it.
class StagedCopies {
 public:
  // `check`: what every wait of the call runs between polls (it throws to
  // give up: DeviceStream::synchronize's).
  StagedCopies(StagingArea& area, std::function<void()> check);
  ~StagedCopies();
  StagedCopies(const StagedCopies&) = delete;
  StagedCopies& operator=(const StagedCopies&) = delete;

  // A pinned buffer of at least `bytes`, the call's until the object goes.
  std::byte* lease(size_t bytes);
  // The copy stream, made on first use (a call that stages nothing never
  // touches the device).
  DeviceStream& stream();
  // Returns once every copy queued so far is done; throws as the check does.
  void synchronize();
  const std::function<void()>& check() const { return check_; }

 private:
  StagingArea& area_;
  std::function<void()> check_;
  DeviceStream* stream_ = nullptr;
  std::vector<StagingArea::Lease> leases_;
};

// Whether this thread is running a task that a user's CUDA stream waits
// for (stream_gate.hpp): such a task must not wait for the legacy default
// stream, which may be waiting for it.
bool onUserStream();
class UserStreamScope {
 public:
  // `on`: whether the scope's work is such a task (a group worker doing a
  // share of one passes on what its caller was).
  explicit UserStreamScope(bool on = true);
  ~UserStreamScope();
  UserStreamScope(const UserStreamScope&) = delete;
  UserStreamScope& operator=(const UserStreamScope&) = delete;

 private:
  bool previous_;
};

}  // namespace loom::cuda
