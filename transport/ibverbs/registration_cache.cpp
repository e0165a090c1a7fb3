#include "transport/ibverbs/registration_cache.hpp"

#include <algorithm>

#include "memory/shared_buffers.hpp"

namespace loom::transport::ibverbs {

RegistrationCache::RegistrationCache(Device& device, size_t capacity) : device_(device), capacity_(std::max<size_t>(capacity, 1)) {}

std::shared_ptr<const MemoryRegion> RegistrationCache::find(const void* p, size_t bytes) {
  const auto allocation = memory::findAllocation(p, bytes);
  if (!allocation) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(p) - allocation->offset;
  std::lock_guard lock(mutex_);
  ++clock_;
  for (Entry& e : entries_) {
    if (e.serial != allocation->serial) continue;
    e.lastUse = clock_;
    ++stats_.hits;
    return e.region;
  }
  // A miss. What overlaps this allocation belonged to one that is gone.
  const size_t before = entries_.size();
  std::erase_if(entries_, [&](const Entry& e) { return e.start < start + allocation->bytes && start < e.start + e.bytes; });
  stats_.evictions += before - entries_.size();
  if (entries_.size() >= capacity_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const Entry& a, const Entry& b) { return a.lastUse < b.lastUse; });
    entries_.erase(oldest);
    ++stats_.evictions;
  }
  std::shared_ptr<const MemoryRegion> region =
      device_.registerMemory(reinterpret_cast<void*>(start), allocation->bytes, /*remoteWrite=*/false);
  entries_.push_back({allocation->serial, start, allocation->bytes, region, clock_});
  ++stats_.misses;
  return region;
}

RegistrationCache::Stats RegistrationCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

size_t RegistrationCache::size() const {
  std::lock_guard lock(mutex_);
  return entries_.size();
}

}  // namespace loom::transport::ibverbs
