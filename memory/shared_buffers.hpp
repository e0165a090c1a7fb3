// Host memory that the ranks of one node can read in place (loomMemAlloc),
// and the peers' side: mapping what another process allocated.
//
// Each allocation is its own memfd, mapped shared. A peer process maps it
// through /proc/<pid>/fd/<fd> (same user, as the ranks of a job are), so no
// name is ever left in /dev/shm; ranks that are threads of one process use
// the address itself.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>

namespace loom::memory {

// Where a range of a shared allocation lives, as a peer can find it. Plain
// data: it travels through the node's segment.
struct SharedRef {
  int32_t pid = 0;
  int32_t fd = -1;
  uint64_t serial = 0;    // unique per allocation in its process
  uint64_t mapBytes = 0;  // the whole allocation
  uint64_t offset = 0;    // of the range, from the allocation's start
  uint64_t address = 0;   // of the range in its own process
};

// A new shared allocation of `bytes` (> 0), zero-filled. Throws loom::Error.
void* allocateShared(size_t bytes);
// Frees what allocateShared returned; loomInvalidArgument for anything else.
void freeShared(void* p);
// The allocation holding [p, p + bytes), if one does.
std::optional<SharedRef> findShared(const void* p, size_t bytes);

// The peers' allocations this process has mapped, most recently used first.
// Mappings are kept across calls (mapping anew would fault every page again
// each call) up to kCapacity; the least recently used goes first, and with
// it the memory of an allocation its owner has freed since.
class PeerMappings {
 public:
  static constexpr size_t kCapacity = 16;

  PeerMappings() = default;
  ~PeerMappings();
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // The start of the range `ref` names, readable here. Throws loom::Error
  // (loomSystemError naming the peer's pid) if it cannot be mapped.
  const std::byte* map(const SharedRef& ref);

 private:
  struct Mapping {
    pid_t pid;
    uint64_t serial;
    std::byte* data;
    size_t bytes;
  };
  std::list<Mapping> mappings_;
};

}  // namespace loom::memory
