// A store served over TCP by one process (rank 0 under loomCommInitFromEnv),
// the way torch's TCPStore is. A client first presents a 20-byte hello (a
// magic and the job's store secret, LOOM_STORE_SECRET); a server that has a
// secret answers a wrong one with a refusal and drops the client, so whoever
// merely reaches the port cannot read the unique id (and its secret) out of
// the store. Then requests: SET, GET (answered when the key exists) and
// ERASE, each a 9-byte header (op, key length, value length) and the bytes;
// lengths are checked before anything is read.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "base/net/socket.hpp"
#include "base/secret.hpp"
#include "comm/store/store.hpp"

namespace loom {

enum class StoreOp : uint8_t { Set = 1, Get = 2, Erase = 3 };

struct StoreRequestHeader {
  StoreOp op;
  uint32_t keyBytes;
  uint32_t valueBytes;
};
inline constexpr size_t kStoreHeaderBytes = 9;
inline constexpr size_t kStoreHelloBytes = 4 + 16;  // "LSTR", the secret (zeros without one)

// A client's hello, and whether it presents `secret` (any hello passes a server without one).
std::array<std::byte, kStoreHelloBytes> encodeStoreHello(const std::optional<Secret>& secret);
bool storeHelloAdmits(std::span<const std::byte, kStoreHelloBytes> hello, const std::optional<Secret>& secret);

// loomRemoteError on an unknown op or a length above the limits.
StoreRequestHeader parseStoreRequestHeader(std::span<const std::byte, kStoreHeaderBytes> raw);

class TcpStoreServer {
 public:
  // With a secret, only clients that present it are served.
  explicit TcpStoreServer(const net::SocketAddress& address, std::optional<Secret> secret = std::nullopt);
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
  // Connects to the server at `address` and presents `secret`; with
  // `serve`, starts the server here first. loomInvalidUsage when the server
  // refuses the secret.
  TcpStore(const net::SocketAddress& address, bool serve, Deadline deadline, const Cancellation* cancel,
           std::optional<Secret> secret = std::nullopt);
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
