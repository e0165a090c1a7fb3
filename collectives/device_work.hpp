// A rank's work on its GPU for an algorithm that reads device memory in place
// (its peers' buffers mapped through CUDA IPC, or threads' of one process):
// the device's reduction kernels and copies (device_kernels.hpp), queued on
// the communicator's copy stream and waited for by finish(), so that an
// algorithm posts to its peers only what the device has finished. The
// LocalWork the shared-memory algorithms drive on device buffers.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/cpu/reduce.hpp"
#include "collectives/device_kernels.hpp"
#include "collectives/local_work.hpp"
#include "comm/communicator.hpp"

namespace loom::coll {

class DeviceWork final : public LocalWork {
 public:
  explicit DeviceWork(Communicator& comm);
  // Waits out work still queued (a call failing between queueing and
  // finish()): see drain().
  ~DeviceWork() override;
  DeviceWork(const DeviceWork&) = delete;
  DeviceWork& operator=(const DeviceWork&) = delete;

  // Returns once the work the caller queued before the call has finished
  // (the legacy default stream's, for a call on no stream; a user stream's
  // was waited for before the call's task began), so that peers may read
  // this rank's input.
  void waitForInputs();
  // LocalWork: kernels and copies on the copy stream, finish() waits for them;
  // an abort, a revoked communicator or its timeout throws
  // (Communicator::deviceWaitCheck), once the queued work has drained.
  void copy(std::byte* dst, const std::byte* src, size_t bytes) override;
  void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
              size_t count) override;
  void finish() override;
  // The work around an algorithm on this rank's own buffers: dst <- src x
  // scalar (PreMulSum's input), and a sum of the ranks' values made their
  // average in place (DeviceKernels::average).
  void scale(loomDataType_t type, const void* src, void* dst, size_t count, double scalar);
  void average(loomDataType_t type, void* dst, size_t count, int ranks);

 private:
  // Returns once the work queued so far has ended, giving up only at the
  // communicator's timeout (a stuck device). A failing call must wait: its
  // kernels read peers' buffers, which their owners free or reuse once this
  // rank has stopped reading (shm::PeerReads), and write this rank's, which
  // the user reuses once the call returns. They end on their own, as they
  // wait for nothing but memory.
  void drain() noexcept;

  Communicator& comm_;
  DeviceKernels& kernels_;
  bool queued_ = false;  // work queued since the last finish()
};

}  // namespace loom::coll
