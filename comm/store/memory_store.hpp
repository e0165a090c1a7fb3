// A store for ranks that are threads of one process.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>

#include "comm/store/store.hpp"

namespace loom {

class MemoryStore final : public Store {
 public:
  // The process-wide store called `name`, created on first use.
  static std::shared_ptr<MemoryStore> named(const std::string& name);

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, Deadline deadline, const Cancellation* cancel) override;
  void erase(const std::string& key) override;

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<std::byte>> values_;
};

}  // namespace loom
