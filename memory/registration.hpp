// Registrations: how a peer reaches memory of this rank directly. A Handle
// names a range by its kind and what that kind's importer needs (a memfd's
// owner, fd and offsets today; a CUDA IPC handle, an ibv_mr's rkey or a UCX
// rkey tomorrow, each a kind of its own). Handles are plain values of one
// size, so they travel in the node segment as they are and serialise into
// handshakes; Mappings is the importer's side, which turns a peer's handle
// into a local address and keeps the mapping.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <list>

#include "base/bytes.hpp"
#include "memory/memory_kind.hpp"

namespace loom::memory {

struct Handle {
  MemoryKind kind = MemoryKind::Host;
  int32_t pid = 0;        // the owner; 0: no range (nothing published)
  int32_t fd = -1;        // HostShared: the allocation's memfd in the owner
  uint64_t serial = 0;    // HostShared: unique per allocation in its process
  uint64_t mapBytes = 0;  // HostShared: the whole allocation
  uint64_t offset = 0;    // of the range, from the allocation's start
  uint64_t address = 0;   // of the range in its owner

  // Whether a process other than the owner can map it.
  bool reachableByPeers() const { return kind == MemoryKind::HostShared; }
  bool empty() const { return pid == 0; }

  void serialize(ByteWriter& w) const;
  // Throws loomRemoteError on a kind this build does not know.
  static Handle deserialize(ByteReader& r);
};

// The handle of [p, p + bytes) in this process: loomMemAlloc's registration
// (HostShared) when it gave the range, else a Host handle that only threads
// of this process can use (its address). Empty for an empty range.
Handle handleOf(const void* p, size_t bytes);

class Mappings {
 public:
  static constexpr size_t kCapacity = 16;

  Mappings() = default;
  ~Mappings();
  Mappings(const Mappings&) = delete;
  Mappings& operator=(const Mappings&) = delete;

  // The start of the range `handle` names, readable here: the address itself
  // in its own process, else a mapping of its allocation (the last
  // kCapacity kept). Throws loom::Error (loomSystemError naming the owner's
  // pid) if it cannot be mapped, loomInvalidUsage for a kind peers cannot
  // reach.
  const std::byte* map(const Handle& handle);

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
