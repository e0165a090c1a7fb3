// TCP between any two ranks: Context::socketsPerPeer sockets per connection
// (LOOM_SOCKET_NSOCKS), non-blocking, TCP_NODELAY, on the interface that
// LOOM_SOCKET_IFNAME selects (the listener's address).
#pragma once

#include <map>
#include <utility>
#include <vector>

#include "transport/transport.hpp"

namespace loom::transport::sock {

class SocketTransport final : public Transport {
 public:
  TransportKind kind() const override { return TransportKind::Socket; }
  bool canConnect(const Endpoint&, const Endpoint&) const override { return true; }
  LinkEstimate estimate() const override;
  std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) override;
  std::unique_ptr<RecvConnection> accept(net::Socket& socket, const Hello& hello, const Context& context) override;

 private:
  // Sockets of connections whose other sockets are still on their way, by (sender, nonce).
  std::map<std::pair<int, uint64_t>, std::vector<net::Socket>> partial_;
};

// Applies Loom's socket options to a data socket (large kernel buffers).
void configureDataSocket(net::Socket& socket);

}  // namespace loom::transport::sock
