// TCP between any two ranks: Context::socketsPerPeer sockets per connection
// (LOOM_SOCKET_NSOCKS), non-blocking, TCP_NODELAY, on the interface that
// LOOM_SOCKET_IFNAME selects (the listener's address).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "transport/handshake.hpp"
#include "transport/transport.hpp"

namespace loom::transport::sock {

// The socket transport's bytes of a Hello: which of a connection's sockets
// this is, and the nonce that groups them.
struct SocketHello {
  uint16_t index = 0;
  uint16_t count = 1;
  uint64_t nonce = 0;

  std::array<std::byte, Hello::kTransportBytes> encode() const;
  static SocketHello decode(const Hello& hello);
};

class SocketTransport final : public Transport {
 public:
  static constexpr uint32_t kWireId = 2;

  const char* name() const override { return "socket"; }
  uint32_t wireId() const override { return kWireId; }
  // Reaches every peer, but shared memory serves a peer on this host better.
  int preference(const Endpoint&, const Endpoint&) const override { return 1; }
  std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) override;
  std::unique_ptr<RecvConnection> accept(net::Socket& socket, const Hello& hello, const Context& context) override;

 private:
  // Sockets of connections whose other sockets are still on their way, by (sender, nonce).
  std::map<std::pair<int, uint64_t>, std::vector<net::Socket>> partial_;
};

// Applies Loom's socket options to a data socket (large kernel buffers).
void configureDataSocket(net::Socket& socket);

}  // namespace loom::transport::sock
