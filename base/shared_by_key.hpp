// One object of type T per key in this process, shared by every caller that
// asks for that key while one of them still holds it: how the ranks of one
// communicator that are threads of this process find the same state
// (comm/entry_gate.hpp's gate, comm/resident_area.hpp's stream claims)
// without a pointer passed between them.
#pragma once

#include <map>
#include <memory>
#include <mutex>

namespace loom {

template <class T, class Key>
std::shared_ptr<T> sharedByKey(const Key& key) {
  static std::mutex mutex;
  static auto* all = new std::map<Key, std::weak_ptr<T>>();  // outlives statics
  std::lock_guard lock(mutex);
  std::erase_if(*all, [](const auto& entry) { return entry.second.expired(); });
  std::weak_ptr<T>& slot = (*all)[key];
  std::shared_ptr<T> object = slot.lock();
  if (object == nullptr) {
    object = std::make_shared<T>();
    slot = object;
  }
  return object;
}

}  // namespace loom
