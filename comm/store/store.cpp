#include "comm/store/store.hpp"

#include "comm/store/file_store.hpp"
#include "comm/store/memory_store.hpp"
#include "comm/store/tcp_store.hpp"

namespace loom {
namespace {

// Shares one MemoryStore while letting the caller own "a store".
class SharedMemoryStore final : public Store {
 public:
  explicit SharedMemoryStore(std::shared_ptr<MemoryStore> s) : store_(std::move(s)) {}
  void set(const std::string& k, std::span<const std::byte> v) override { store_->set(k, v); }
  std::vector<std::byte> get(const std::string& k, Deadline d, const Cancellation* c) override { return store_->get(k, d, c); }
  void erase(const std::string& k) override { store_->erase(k); }

 private:
  std::shared_ptr<MemoryStore> store_;
};

}  // namespace

std::unique_ptr<Store> openStore(const std::string& spec, bool serve, Deadline deadline, const Cancellation* cancel,
                                 const std::optional<Secret>& secret) {
  if (spec.starts_with("file://")) return std::make_unique<FileStore>(spec.substr(7));
  if (spec.starts_with("memory://")) return std::make_unique<SharedMemoryStore>(MemoryStore::named(spec.substr(9)));
  return std::make_unique<TcpStore>(net::SocketAddress::parse(spec), serve, deadline, cancel, secret);
}

}  // namespace loom
