// Accepts the data connections other ranks open to this one. One thread runs
// one poll() loop over the listening socket and every connection still in its
// handshake, so a silent or hostile client cannot hold up the others. A Hello
// with a wrong secret, magic or version, or meant for another rank, is dropped
// without a reply; a good one goes to the transport it names, and the receive
// end that comes back is handed to `deliver`.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <thread>

#include "base/net/socket.hpp"
#include "transport/connection.hpp"
#include "transport/transport.hpp"

namespace loom::transport {

class Listener {
 public:
  using Deliver = std::function<void(int from, Channel channel, std::unique_ptr<RecvConnection> connection)>;

  // `socket` listens at context.self.listener; `transports` outlive this object.
  Listener(net::Socket socket, Context context, std::span<const std::unique_ptr<Transport>> transports,
           Deliver deliver);
  ~Listener();  // stops the thread; connections in their handshake are dropped
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

 private:
  struct Pending;
  void run();
  void onHello(net::Socket& socket, std::span<const std::byte> bytes);

  net::Socket socket_;
  Context context_;
  std::span<const std::unique_ptr<Transport>> transports_;
  Deliver deliver_;
  int stopFd_;
  std::thread thread_;
};

}  // namespace loom::transport
