// The device's reduction and copy kernels, behind a header without CUDA in
// it: the same contract as the host's (cpu/reduce.hpp), element for element
// and bit for bit. dst = op(src[0], ..., src[n-1]) in one pass over every
// source; float16 and bfloat16 accumulate in float32 across all sources and
// round once, to nearest even, through the very conversions of base/half.hpp;
// integers wrap; min and max propagate NaN; PreMulSum scales each source as
// it is loaded. No multiply-add is fused (the host fuses none either), so a
// float reduction has the host's bits.
//
// Every pointer must be one the device reaches (its memory, a peer's mapped
// through CUDA IPC, or pinned host memory). The work is queued on `stream`
// (a cudaStream_t; nullptr is the legacy default stream) and the call
// returns without waiting for it. Where every pointer and the count allow,
// each thread moves 16 bytes per source at a time; the rest, element by element.
#pragma once

#include <loom/loom.h>

#include <cstddef>
#include <cstdint>
#include <span>

#include "collectives/cpu/reduce.hpp"
#include "base/device/published_piece.hpp"
#include "base/device/runtime.hpp"

namespace loom::coll::cuda {

// The most sources one pass folds; more are refused (loomInvalidArgument),
// since folding them in two passes would round a 16-bit float twice.
constexpr size_t kMaxSources = 16;

void reduce(loomDataType_t type, cpu::ReduceOp op, std::span<const void* const> sources, void* dst, size_t count,
            double scalar, void* stream);

// dst[i] /= divisor for the integer types (averages: sum, then divide, truncating toward zero).
void divide(loomDataType_t type, void* dst, size_t count, uint64_t divisor, void* stream);

// dst <- src, `bytes` bytes, on `stream` (cudaMemcpyAsync, any direction).
void copy(void* dst, const void* src, size_t bytes, void* stream);

// reduce() from places the ranks published, loaded by the kernel when it
// runs (collectives/device_kernels.hpp): source r is the base of
// places[r]'s region + its input + block x its pitch + at. Where a place is
// not for call `sequence` (a stream a failure let go before its peer
// published), the kernel writes nothing. At most kMaxSources places; no PreMulSum scaling (a scaled input
// is published scaled).
void reduceFrom(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places,
                uint64_t sequence, size_t block, size_t at, void* dst, size_t count, void* stream);

// The most flag operations reduceFromBetween takes on either side of its
// fold (a round of flags of 16 ranks is under 50).
constexpr size_t kMaxFlagOps = 64;

// reduceFrom() between flag operations, in one kernel of one thread block: its first thread runs `before` in order (a
// wait spins until its word holds at least its value; a write stores its
// value after everything before it), the block folds, then the first thread
// runs `after`. For ranks whose kernels run at once (threads of one process
// on one GPU), so that a small call's round of flags and its read cost one
// launch instead of a kernel between two batches of stream memory
// operations. A kernel spinning on a word holds one SM's block, released
// when the word comes (a failure's release raises every word).
void reduceFromBetween(loomDataType_t type, cpu::ReduceOp op, std::span<const PlaceView> places, uint64_t sequence,
                       size_t block, size_t at, void* dst, size_t count, std::span<const loom::cuda::MemOp> before,
                       std::span<const loom::cuda::MemOp> after, void* stream);

// The copies `copies` out of the places (each a copy DeviceRuntime::copyFromPlace
// would queue, at most kMaxSources), between flag operations as reduceFromBetween
// runs them, in one kernel of one thread block. A copy whose place is not for
// call `sequence` moves nothing.
void copyFromBetween(std::span<const PlaceView> places, uint64_t sequence, std::span<const PlaceCopy> copies,
                     std::span<const loom::cuda::MemOp> before, std::span<const loom::cuda::MemOp> after,
                     void* stream);

}  // namespace loom::coll::cuda
