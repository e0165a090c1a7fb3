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
  // The regions `input` (bits 0-15) and `result` (bits 16-31) are offsets
  // in; bits 32-63: how many pieces after `sequence` the entry is for too (a
  // range: a rank whose buffer is read in place publishes every piece of its
  // call at once, each piece at its own distance into the call, which its
  // readers know).
  uint64_t regions = 0;
  // The piece these places are for (a range's first). A reader whose stream
  // a failure let go before the publisher got there finds an older one and
  // reads nothing.
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

inline constexpr uint64_t regionsOf(uint32_t input, uint32_t result, uint64_t further = 0) {
  return (input & 0xffffu) | uint64_t{result & 0xffffu} << 16 | further << 32;
}

// One copy out of a published place (DeviceKernels::copyFromBetween): rank
// `rank`'s block `block` of the piece, `bytes` of it, into `dst`.
struct PlaceCopy {
  uint32_t rank = 0;
  uint64_t block = 0;
  void* dst = nullptr;
  uint64_t bytes = 0;
};

// A published place as one reader reaches it: the entry, in the publisher's
// line, and the reader's table of the publisher's regions (kPlaceRegions
// bases, in the reader's device memory); `other`, the publisher's other
// entry of the pair, where a range may lie; `into`, the bytes of the
// reader's piece from its call's first piece, which a range's places are
// moved by.
struct PlaceView {
  const PublishedPiece* place = nullptr;
  const uint64_t* bases = nullptr;
  const PublishedPiece* other = nullptr;
  uint64_t into = 0;
};

// Where `view` says its part lies, for call `sequence`: in the entry that
// is for that piece, or in a range that covers it (then `into` bytes on),
// the region's base + input (or result) + block x pitch + at; null where
// neither entry is for it (a stream a failure let go before the publisher
// got there), or an entry names a region the reader has no base for (which
// no publisher does: it offers a region only once its readers opened it).
// Loaded as it is now, since other ranks' streams write it: by the host (the
// fake device's streams, threads) with atomics, by the device's kernels
// through volatile loads, the sequence first (written last), so that nothing
// read before the kernel's wait is used. The two forms below are one rule.
#ifdef __CUDACC__
__device__ inline const char* placeOnDevice(PlaceView view, uint64_t sequence, bool result, size_t block,
                                            size_t at) {
  const PublishedPiece* entries[2] = {view.place, view.other};
  for (const PublishedPiece* entry : entries) {
    if (entry == nullptr) continue;
    const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(entry);
    const uint64_t first = words[4];
    const uint64_t regions = words[3];
    const bool exact = first == sequence;
    if (!exact && !(first < sequence && sequence - first <= regions >> 32)) continue;
    const uint64_t region = result ? (regions >> 16) & 0xffffu : regions & 0xffffu;
    if (region >= kPlaceRegions) return nullptr;
    const uint64_t base = reinterpret_cast<const volatile uint64_t*>(view.bases)[region];
    if (region != 0 && base == 0) return nullptr;
    const uint64_t into = exact ? 0 : view.into;
    return reinterpret_cast<const char*>(base + (result ? words[2] : words[0]) + into + block * words[1] + at);
  }
  return nullptr;
}
#endif
inline const std::byte* placeOnHost(PlaceView view, uint64_t sequence, bool result, size_t block, size_t at) {
  for (const PublishedPiece* entry : {view.place, view.other}) {
    if (entry == nullptr) continue;
    const uint64_t first = __atomic_load_n(&entry->sequence, __ATOMIC_ACQUIRE);
    const uint64_t regions = __atomic_load_n(&entry->regions, __ATOMIC_RELAXED);
    const bool exact = first == sequence;
    if (!exact && !(first < sequence && sequence - first <= regions >> 32)) continue;
    const uint64_t region = result ? (regions >> 16) & 0xffffu : regions & 0xffffu;
    if (region >= kPlaceRegions) return nullptr;
    const uint64_t base = __atomic_load_n(&view.bases[region], __ATOMIC_RELAXED);
    if (region != 0 && base == 0) return nullptr;
    const uint64_t offset = __atomic_load_n(result ? &entry->result : &entry->input, __ATOMIC_RELAXED);
    const uint64_t pitch = __atomic_load_n(&entry->pitch, __ATOMIC_RELAXED);
    const uint64_t into = exact ? 0 : view.into;
    return reinterpret_cast<const std::byte*>(base + offset + into + block * pitch + at);
  }
  return nullptr;
}

}  // namespace loom
