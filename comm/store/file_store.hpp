// A store in a directory that every rank can see (one node, or a shared
// file system). Values are written to a temporary file and renamed into
// place, so a reader sees all of a value or nothing. Use a fresh directory
// per job: keys left by an earlier job would be read as this job's.
#pragma once

#include "comm/store/store.hpp"

namespace loom {

class FileStore final : public Store {
 public:
  explicit FileStore(std::string directory);

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, Deadline deadline, const Cancellation* cancel) override;
  void erase(const std::string& key) override;

 private:
  std::string pathOf(const std::string& key) const;
  std::string directory_;
};

}  // namespace loom
