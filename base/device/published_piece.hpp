// Where a rank's part of a resident piece lies, as it tells the ranks that
// read it (comm/resident_area.hpp, DeviceRuntime::copyFromPlace and the
// collectives' reduceFrom). The publisher's stream writes it into its own
// flag line, the sequence last, before its "arrived"; the readers' kernels
// load it when they run, after their wait, so that a rank may offer its own
// buffer to be read in place, or its scratch slot, without its readers
// knowing which when they queue the call (or a send's receiver which, for
// its piece). A place is an offset into one of the publisher's regions,
// which each reader turns into an address of its own through its table of
// the publisher's regions (region 0: the address itself, between threads of
// one process; 1: the publisher's resident area; from 2 on, buffers of
// another process the reader opened through CUDA IPC:
// comm/resident_regions.hpp). Kept free of everything but integers: the
// device's kernels include it.
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
  // The regions `input` (low 32 bits) and `result` (high 32) are offsets in.
  uint64_t regions = 0;
  // The call these places are for. A reader whose stream a failure let go
  // before the publisher got there finds an older one and reads nothing.
  uint64_t sequence = 0;
};

static_assert(sizeof(PublishedPiece) == 40);

// Regions per publisher in a reader's table.
inline constexpr size_t kPlaceRegions = 64;

// A place as its publisher names it: a region and the offset into it.
struct RegionPlace {
  uint32_t region = 0;
  uint64_t offset = 0;
};

// `place` moved `bytes` on, in the same region.
inline constexpr RegionPlace past(RegionPlace place, uint64_t bytes) {
  return {.region = place.region, .offset = place.offset + bytes};
}

inline constexpr uint64_t regionsOf(uint32_t input, uint32_t result) { return input | uint64_t{result} << 32; }

// A published place as one reader reaches it: the entry, in the publisher's
// line, and the reader's table of the publisher's regions (kPlaceRegions
// bases, in the reader's device memory).
struct PlaceView {
  const PublishedPiece* place = nullptr;
  const uint64_t* bases = nullptr;
};

// Where `view` says its part lies: the region's base + input (or result) +
// block x pitch + at; null where it is not for call `sequence`, or names a
// region the reader has no base for (which no publisher does: it offers a
// region only once its readers opened it). Loaded as it is now, since other
// ranks' streams write it: by the host (the fake device's streams, threads)
// with atomics, by the device's kernels through volatile loads, so that
// nothing read before the kernel's wait is used.
#ifdef __CUDACC__
__device__ inline const char* placeOnDevice(PlaceView view, uint64_t sequence, bool result, size_t block,
                                            size_t at) {
  const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(view.place);
  if (words[4] != sequence) return nullptr;
  const uint64_t region = result ? words[3] >> 32 : words[3] & 0xffffffffu;
  if (region >= kPlaceRegions) return nullptr;
  const uint64_t base = reinterpret_cast<const volatile uint64_t*>(view.bases)[region];
  if (region != 0 && base == 0) return nullptr;
  return reinterpret_cast<const char*>(base + (result ? words[2] : words[0])) + block * words[1] + at;
}
#endif
inline const std::byte* placeOnHost(PlaceView view, uint64_t sequence, bool result, size_t block, size_t at) {
  const PublishedPiece& place = *view.place;
  if (__atomic_load_n(&place.sequence, __ATOMIC_ACQUIRE) != sequence) return nullptr;
  const uint64_t regions = __atomic_load_n(&place.regions, __ATOMIC_RELAXED);
  const uint64_t region = result ? regions >> 32 : regions & 0xffffffffu;
  if (region >= kPlaceRegions) return nullptr;
  const uint64_t base = __atomic_load_n(&view.bases[region], __ATOMIC_RELAXED);
  if (region != 0 && base == 0) return nullptr;
  const uint64_t offset = __atomic_load_n(result ? &place.result : &place.input, __ATOMIC_RELAXED);
  const uint64_t pitch = __atomic_load_n(&place.pitch, __ATOMIC_RELAXED);
  return reinterpret_cast<const std::byte*>(base + offset) + block * pitch + at;
}

}  // namespace loom
