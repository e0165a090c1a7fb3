#include "comm/store/memory_store.hpp"

#include "base/error.hpp"

namespace loom {

std::shared_ptr<MemoryStore> MemoryStore::named(const std::string& name) {
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<MemoryStore>> stores;
  std::lock_guard lock(mutex);
  auto store = stores[name].lock();
  if (!store) {
    store = std::make_shared<MemoryStore>();
    stores[name] = store;
  }
  return store;
}

void MemoryStore::set(const std::string& key, std::span<const std::byte> value) {
  {
    std::lock_guard lock(mutex_);
    values_[key].assign(value.begin(), value.end());
  }
  changed_.notify_all();
}

std::vector<std::byte> MemoryStore::get(const std::string& key, Deadline deadline, const Cancellation* cancel) {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto it = values_.find(key); it != values_.end()) return it->second;
    if (cancel) cancel->throwIfCancelled();
    if (deadline.expired()) throw Error(loomTimeout, "timed out waiting for store key '" + key + "'");
    // Bounded slices, so a cancellation is seen without a notify.
    changed_.wait_until(lock, deadline.capped(std::chrono::milliseconds(10)).at());
  }
}

void MemoryStore::erase(const std::string& key) {
  std::lock_guard lock(mutex_);
  values_.erase(key);
}

}  // namespace loom
