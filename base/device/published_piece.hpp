// Where a rank's part of a resident piece lies, as it tells the ranks that
// read it (comm/resident_area.hpp, DeviceRuntime::copyFromPlace and the
// collectives' reduceFrom), where every rank of a communicator is a
// thread of one process and a pointer means the same to all of them. The
// publisher's stream writes it into its own flag line, the sequence last,
// before its "arrived"; the readers' kernels load it when they run, after
// their wait, so that a rank may offer its own buffer to be read in place,
// or its scratch slot, without its readers knowing which when they queue
// the call (or a send's receiver which, for its piece). Kept free of
// everything but integers: the device's kernels include it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom {

struct PublishedPiece {
  // The piece's part of the first block.
  uint64_t input = 0;
  // Bytes from the piece's part of one block to the next (inputs in blocks).
  uint64_t pitch = 0;
  // Where a two-shot all-reduce's reduced share of the piece lies, at the
  // share's own offset.
  uint64_t result = 0;
  // The call these places are for. A reader whose stream a failure let go
  // before the publisher got there finds an older one and reads nothing.
  uint64_t sequence = 0;
};

static_assert(sizeof(PublishedPiece) == 32);

// Where `place` says its part lies: input (or result) + block x pitch + at;
// null where it is not for call `sequence`. Loaded as it is now, since other
// ranks' streams write it: by the host (the fake device's streams, threads)
// with atomics, by the device's kernels through volatile loads, so that
// nothing read before the kernel's wait is used.
#ifdef __CUDACC__
__device__ inline const char* placeOnDevice(const PublishedPiece* place, uint64_t sequence, bool result, size_t block,
                                            size_t at) {
  const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(place);
  if (words[3] != sequence) return nullptr;
  return reinterpret_cast<const char*>(result ? words[2] : words[0]) + block * words[1] + at;
}
#endif
inline const std::byte* placeOnHost(const PublishedPiece& place, uint64_t sequence, bool result, size_t block,
                                    size_t at) {
  if (__atomic_load_n(&place.sequence, __ATOMIC_ACQUIRE) != sequence) return nullptr;
  const uint64_t base = __atomic_load_n(result ? &place.result : &place.input, __ATOMIC_RELAXED);
  const uint64_t pitch = __atomic_load_n(&place.pitch, __ATOMIC_RELAXED);
  return reinterpret_cast<const std::byte*>(base) + block * pitch + at;
}

}  // namespace loom
