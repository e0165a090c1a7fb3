// The verbs transport's one registration cache: which user buffers it may
// hand to the device as they are (no copy into the FIFO), registered once
// and kept.
//
// Registering pins pages and costs tens of microseconds a megabyte, so a
// buffer sent from again and again must stay registered; but a registration
// outliving its buffer names pages that are no longer the buffer's, and a
// later buffer at the same address would be sent from the old pages. So the
// cache holds only loomMemAlloc's buffers (NCCL registers only what
// ncclCommRegister or ncclMemAlloc gave it, for the same reason), keyed by
// the allocation's serial, which no later allocation shares: a buffer freed
// and another allocated at the same address is a miss, and the stale entry
// over that range goes at once. Ordinary memory is copied into the
// registered FIFO instead.
//
// Entries go least recently used first once there are `capacity`; a write
// still in flight keeps its registration alive (shared_ptr) until it completes.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/ibverbs/verbs.hpp"

namespace loom::transport::ibverbs {

class RegistrationCache {
 public:
  static constexpr size_t kDefaultCapacity = 64;

  explicit RegistrationCache(Device& device, size_t capacity = kDefaultCapacity);

  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;      // registrations made
    uint64_t evictions = 0;   // registrations dropped: least recently used, or stale
  };

  // The registration covering [p, p + bytes) when loomMemAlloc gave that
  // range (registering its whole allocation on a miss); null otherwise.
  std::shared_ptr<const MemoryRegion> find(const void* p, size_t bytes);
  Stats stats() const;
  size_t size() const;

 private:
  struct Entry {
    uint64_t serial;
    uintptr_t start;
    size_t bytes;
    std::shared_ptr<const MemoryRegion> region;
    uint64_t lastUse;
  };

  Device& device_;
  size_t capacity_;
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  uint64_t clock_ = 0;
  Stats stats_;
};

}  // namespace loom::transport::ibverbs
