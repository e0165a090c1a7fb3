// Shared memory between ranks on one node (equal host ids): one POSIX
// segment per connection, created by the receiver (so it sits on the
// receiver's NUMA node) and mapped by the sender, which removes its name.
#pragma once

#include "transport/transport.hpp"

namespace loom::transport::shm {

class ShmTransport final : public Transport {
 public:
  // Sweeps segments left by dead processes, once per process.
  ShmTransport();

  static constexpr uint32_t kWireId = 1;

  const char* name() const override { return "shm"; }
  uint32_t wireId() const override { return kWireId; }
  // Peers on this host only, where it beats sockets.
  int preference(const Endpoint& self, const Endpoint& peer) const override;
  std::unique_ptr<SendConnection> connect(const Endpoint& peer, Channel channel, const Context& context) override;
  std::unique_ptr<RecvConnection> accept(net::Socket& socket, const Hello& hello, const Context& context) override;
};

}  // namespace loom::transport::shm
