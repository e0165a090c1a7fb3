// Copying out of memory that another rank on this node has just written: its
// slots in the node segment, or its loomMemAlloc'd buffers read in place.
//
// Those lines may still sit dirty in the writer's cache. One glibc memcpy of
// such a slice runs as a single `rep movsb`, which on the project's 2-vCPU
// AMD EPYC VMs fetched them slowly: copying a 128 KiB slice a peer had just
// written took 4-5x as long as copying it page by page with each page's
// lines prefetched first, which puts them in flight together. It held
// whether the host ran the two vCPUs close together (a store seen across in
// 0.05 us) or apart (0.2 us). bench/RESULTS.md, "Pulled copies".
#pragma once

#include <cstddef>

namespace loom::coll::shm {

// memcpy(dst, src, bytes) for a src another rank just wrote; the ranges do not overlap.
void pullCopy(std::byte* dst, const std::byte* src, size_t bytes);

}  // namespace loom::coll::shm
