// Copying out of memory that another rank on this node has just written: its
// slots in the node segment, or its loomMemAlloc'd buffers read in place.
//
// Those lines may still sit dirty in the writer's cache. On a 2-vCPU AMD
// EPYC VM whose two cores share no L3 (0.2 us to see a peer's store), one
// glibc memcpy of a 128 KiB slice that a peer had just written, which runs as
// a single `rep movsb`, moved about 2 GB/s. Prefetching each page's lines
// before copying it puts them in flight together, and the same copies ran
// 3-5x faster (bench/RESULTS.md, "Pulled copies").
#pragma once

#include <cstddef>

namespace loom::coll::shm {

// memcpy(dst, src, bytes) for a src another rank just wrote; the ranges do not overlap.
void pullCopy(std::byte* dst, const std::byte* src, size_t bytes);

}  // namespace loom::coll::shm
