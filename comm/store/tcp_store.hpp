// A store served over TCP by one process (rank 0 under loomCommInitFromEnv),
// the way torch's TCPStore is. Requests: SET, GET (answered when the key
// exists) and ERASE, each a 9-byte header (op, key length, value length)
// and the bytes; lengths are checked before anything is read.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "comm/store/store.hpp"
#include "transport/socket/socket.hpp"

namespace loom {

enum class StoreOp : uint8_t { Set = 1, Get = 2, Erase = 3 };

struct StoreRequestHeader {
  StoreOp op;
  uint32_t keyBytes;
  uint32_t valueBytes;
};
inline constexpr size_t kStoreHeaderBytes = 9;

// loomRemoteError on an unknown op or a length above the limits.
StoreRequestHeader parseStoreRequestHeader(std::span<const std::byte, kStoreHeaderBytes> raw);

class TcpStoreServer {
 public:
  explicit TcpStoreServer(const net::SocketAddress& address);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  net::SocketAddress address() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

class TcpStore final : public Store {
 public:
  // Connects to the server at `address`; with `serve`, starts it here first.
  TcpStore(const net::SocketAddress& address, bool serve, Deadline deadline, const Cancellation* cancel);
  ~TcpStore() override;

  void set(const std::string& key, std::span<const std::byte> value) override;
  std::vector<std::byte> get(const std::string& key, Deadline deadline, const Cancellation* cancel) override;
  void erase(const std::string& key) override;

 private:
  void request(StoreOp op, const std::string& key, std::span<const std::byte> value, Deadline deadline,
               const Cancellation* cancel);

  std::unique_ptr<TcpStoreServer> server_;
  net::Socket socket_;
};

}  // namespace loom
