// Host memory that the ranks of one node can read in place (loomMemAlloc).
//
// Each allocation is its own memfd, mapped shared. A peer process maps it
// through /proc/<pid>/fd/<fd> (same user, as the ranks of a job are;
// registration.hpp), so no name is ever left in /dev/shm.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>

namespace loom::memory {

void* allocateShared(size_t bytes);
void freeShared(void* p);

// The allocation holding all of [p, p + bytes), if loomMemAlloc made one.
struct Allocation {
  int fd = -1;
  uint64_t serial = 0;
  size_t bytes = 0;   // the whole allocation
  size_t offset = 0;  // of p from its start
};
std::optional<Allocation> findAllocation(const void* p, size_t bytes);

// How many loomMemAlloc allocations live now: every call asks whether its
// buffers are among them, and most programs have none to search.
inline constinit std::atomic<size_t> sharedAllocationsLive{0};
inline bool anySharedAllocations() { return sharedAllocationsLive.load(std::memory_order_acquire) != 0; }

}  // namespace loom::memory
