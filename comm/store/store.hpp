// A key-value store for rendezvous when no unique id can be passed around
// (loomCommInitFromEnv). get() waits until the key exists or the deadline.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/cancellation.hpp"
#include "base/deadline.hpp"
#include "base/secret.hpp"

namespace loom {

class Store {
 public:
  virtual ~Store() = default;
  virtual void set(const std::string& key, std::span<const std::byte> value) = 0;
  virtual std::vector<std::byte> get(const std::string& key, Deadline deadline, const Cancellation* cancel) = 0;
  virtual void erase(const std::string& key) = 0;
};

// "file:///dir" (FileStore), "memory://name" (MemoryStore shared by the
// process's threads) or "host:port" (TcpStore; `serve` makes this process
// its server, as rank 0 does; with `secret`, the server serves only clients
// that present it, and this process presents it).
std::unique_ptr<Store> openStore(const std::string& spec, bool serve, Deadline deadline, const Cancellation* cancel,
                                 const std::optional<Secret>& secret = std::nullopt);

inline constexpr size_t kMaxStoreKeyBytes = 1024;
inline constexpr size_t kMaxStoreValueBytes = 16u << 20;

}  // namespace loom
