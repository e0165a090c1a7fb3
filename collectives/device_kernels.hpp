// The kernels device work runs, behind one interface: CUDA's
// (cuda/kernels.hpp) where the device's memory is its own, or the host's
// (cpu/reduce.hpp) queued as host functions on the stream where the host
// reads device memory (the tests' fake device), which its stream then runs
// in order with the copies around them. Both have the same contract, bit
// for bit (cuda/kernels.hpp).
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/cpu/reduce.hpp"
#include "base/device/published_piece.hpp"
#include "base/device/runtime.hpp"

namespace loom::coll {

class DeviceKernels {
 public:
  virtual ~DeviceKernels() = default;
  // dst <- op(sources...) x scalar for PreMulSum, `count` elements, queued on `stream`.
  virtual void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst,
                      size_t count, double scalar, void* stream) = 0;
  // dst[i] /= divisor for the integer types, queued.
  virtual void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor, void* stream) = 0;
  // dst <- src, queued.
  virtual void copy(void* dst, const void* src, size_t bytes, void* stream) = 0;

  // reduce() from places the ranks published (base/device/published_piece.hpp),
  // loaded when the work runs, not when it is queued: rank r's source is
  // the base of places[r]'s region + its input + block x its pitch + at.
  // Where a place is not for call `sequence` (a stream a failure let go),
  // nothing is done. (A copy from a place is the runtime's:
  // DeviceRuntime::copyFromPlace.)
  virtual void reduceFrom(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                          uint64_t sequence, size_t block, size_t at, void* dst, size_t count, void* stream) = 0;

  // reduceFrom() between flag operations, as one piece of work on the
  // stream: `before` in order (a wait until its
  // word holds at least its value, a write), the fold, then `after`. On a
  // GPU one kernel (cuda/kernels.hpp's reduceFromBetween), for ranks whose
  // kernels run at once: threads of one process on one GPU.
  virtual void reduceFromBetween(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                                 uint64_t sequence, size_t block, size_t at, void* dst, size_t count,
                                 std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                                 void* stream) = 0;

  // Copies out of the places (each what DeviceRuntime::copyFromPlace would
  // queue), between flag operations as reduceFromBetween runs them: one
  // kernel on a GPU (cuda/kernels.hpp's copyFromBetween).
  virtual void copyFromBetween(std::span<const PlaceView> places, uint64_t sequence, std::span<const PlaceCopy> copies,
                               std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                               void* stream) = 0;

  // A sum of `ranks` ranks' values made their average in place, queued, as
  // the host path does: floats scaled by 1/ranks, integers divided.
  void average(loomDataType_t type, void* dst, size_t count, int ranks, void* stream);
};

// The kernels for the process's device runtime (base/device/runtime.hpp).
DeviceKernels& deviceKernels();

}  // namespace loom::coll
