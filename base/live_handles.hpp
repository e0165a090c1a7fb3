// The objects of one kind that are alive, so that the C API can refuse a
// stale or made-up handle with an error naming it instead of following it
// (loomStream_t, loomEvent_t).
#pragma once

#include <mutex>
#include <set>

namespace loom {

template <class T>
class LiveHandles {
 public:
  void add(const T* handle) {
    std::lock_guard lock(mutex_);
    live_.insert(handle);
  }
  void remove(const T* handle) {
    std::lock_guard lock(mutex_);
    live_.erase(handle);
  }
  bool contains(const T* handle) const {
    std::lock_guard lock(mutex_);
    return live_.count(handle) != 0;
  }

 private:
  mutable std::mutex mutex_;
  std::set<const T*> live_;
};

}  // namespace loom
